// The DSA-on-MLA cpu kernel table for the avx512_bf16 level, compiled with the avx512 flags + -mavx512bf16 (16 lanes): the
// tile path of the sparse MLA attention on vdpbf16ps register tiles (attention_kernels_impl.inl); see
// src/backends/CMakeLists.txt. Bodies: dsa_kernels_impl.inl.
#define SIEVE_DSA_CPU_TABLE kDsaCpuKernelsAvx512Bf16
#define SIEVE_CPU_ISA_NAME "avx512_bf16"
#define SIEVE_CPU_ISA_NS avx512_bf16
#include "backends/cpu/dsa_kernels_impl.inl"
