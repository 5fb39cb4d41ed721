// The cpu QSA kernel table for the amx_bf16 level, compiled with the avx512 flags + -mavx512bf16 -mamx-tile
// -mamx-bf16 (16 lanes; the sparse GQA attention's bf16 products as AMX tile products for bf16 q, caches and
// math, qsa_kernels_impl.inl); see src/backends/CMakeLists.txt. Bodies: qsa_kernels_impl.inl.
#define SIEVE_QSA_TABLE kQsaKernelsAmxBf16
#define SIEVE_QSA_ISA_NAME "amx_bf16"
#define SIEVE_CPU_ISA_NS amx_bf16
#include "backends/cpu/qsa_kernels_impl.inl"
