// DeepSeek-V4 kernel table for the avx512_bf16 level, compiled with the avx512 flags + -mavx512bf16 (16 lanes):
// the tile path of the sparse attention on vdpbf16ps register tiles (attention_kernels_impl.inl); see
// src/backends/CMakeLists.txt. Bodies: dsv4_kernels_impl.inl.
#define SIEVE_CPU_DSV4_TABLE kCpuDsv4KernelsAvx512Bf16
#define SIEVE_CPU_ISA_NAME "avx512_bf16"
#define SIEVE_CPU_ISA_NS avx512_bf16
#include "backends/cpu/dsv4_kernels_impl.inl"
