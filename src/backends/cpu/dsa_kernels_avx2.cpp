// The DSA-on-MLA cpu kernel table for the avx2 level, compiled with -mavx2 -mfma -mf16c (8 lanes); see
// src/backends/CMakeLists.txt. Bodies: dsa_kernels_impl.inl.
#define SIEVE_DSA_CPU_TABLE kDsaCpuKernelsAvx2
#define SIEVE_CPU_ISA_NAME "avx2"
#define SIEVE_CPU_ISA_NS avx2
#include "backends/cpu/dsa_kernels_impl.inl"
