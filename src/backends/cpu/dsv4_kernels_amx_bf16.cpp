// DeepSeek-V4 kernel table for the amx_bf16 level, compiled with the avx512 flags plus -mavx512bf16
// -mamx-tile -mamx-bf16 (16 lanes; the sparse attention's bf16 products run as AMX tile products where
// they are exact, dsv4_kernels_impl.inl); see src/backends/CMakeLists.txt.
#define SIEVE_CPU_DSV4_TABLE kCpuDsv4KernelsAmxBf16
#define SIEVE_CPU_ISA_NAME "amx_bf16"
#define SIEVE_CPU_ISA_NS amx_bf16
#include "backends/cpu/dsv4_kernels_impl.inl"
