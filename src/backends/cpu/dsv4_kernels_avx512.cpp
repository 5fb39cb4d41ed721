// DeepSeek-V4 kernel table for the avx512 level, compiled with -mavx512f -mavx512bw -mavx512vl -mavx512dq
// (16 lanes); see src/backends/CMakeLists.txt. Bodies: dsv4_kernels_impl.inl.
#define SIEVE_CPU_DSV4_TABLE kCpuDsv4KernelsAvx512
#define SIEVE_CPU_ISA_NAME "avx512"
#define SIEVE_CPU_ISA_NS avx512
#include "backends/cpu/dsv4_kernels_impl.inl"
