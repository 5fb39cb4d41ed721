// The DSA-on-MLA cpu kernel table for the avx512 level, compiled with the avx512 flags (16 lanes); see
// src/backends/CMakeLists.txt. Bodies: dsa_kernels_impl.inl.
#define SIEVE_DSA_CPU_TABLE kDsaCpuKernelsAvx512
#define SIEVE_CPU_ISA_NAME "avx512"
#define SIEVE_CPU_ISA_NS avx512
#include "backends/cpu/dsa_kernels_impl.inl"
