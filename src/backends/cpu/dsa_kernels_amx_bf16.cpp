// The DSA-on-MLA cpu kernel table for the amx_bf16 level, compiled with the avx512 flags + -mavx512bf16
// -mamx-tile -mamx-bf16 (16 lanes; the sparse MLA attention's bf16 products as AMX tile products where they
// are exact, dsa_kernels_impl.inl); see src/backends/CMakeLists.txt. Bodies: dsa_kernels_impl.inl.
#define SIEVE_DSA_CPU_TABLE kDsaCpuKernelsAmxBf16
#define SIEVE_CPU_ISA_NAME "amx_bf16"
#define SIEVE_CPU_ISA_NS amx_bf16
#include "backends/cpu/dsa_kernels_impl.inl"
