// DeepSeek-V4 kernel tables for the avx512 and avx512_bf16 levels, compiled with -mavx512f -mavx512bw
// -mavx512vl -mavx512dq (16 lanes); see src/backends/CMakeLists.txt. Bodies: dsv4_kernels_impl.inl. The
// avx512_bf16 table differs only in the indexer scores (vdpbf16ps), whose functions carry
// __attribute__((target("avx512bf16"))) since this unit is not compiled with -mavx512bf16.
#define SIEVE_CPU_DSV4_TABLE kCpuDsv4KernelsAvx512
#define SIEVE_CPU_DSV4_BF16_TABLE kCpuDsv4KernelsAvx512Bf16
#define SIEVE_CPU_ISA_NAME "avx512"
#define SIEVE_CPU_ISA_NS avx512
#include "backends/cpu/dsv4_kernels_impl.inl"
