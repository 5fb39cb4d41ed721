// DeepSeek-V4 kernel table for the avx2 level, compiled with -mavx2 -mfma -mf16c (8 lanes);
// see src/backends/CMakeLists.txt. Bodies: dsv4_kernels_impl.inl.
#define SIEVE_CPU_DSV4_TABLE kCpuDsv4KernelsAvx2
#define SIEVE_CPU_ISA_NAME "avx2"
#define SIEVE_CPU_ISA_NS avx2
#include "backends/cpu/dsv4_kernels_impl.inl"
