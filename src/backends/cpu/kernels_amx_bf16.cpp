// The cpu kernel table for the amx_bf16 level, compiled with the avx512 flags plus -mavx512bf16 -mamx-tile
// -mamx-bf16 (16 lanes; the linear's bf16 and fp8 pair panels as AMX tile products at every batch size,
// linear_kernels_impl.inl); see src/backends/CMakeLists.txt. Bodies: kernels_impl.inl.
#define SIEVE_CPU_TABLE kCpuKernelsAmxBf16
#define SIEVE_CPU_ISA_NAME "amx_bf16"
#define SIEVE_CPU_ISA_NS amx_bf16
#include "backends/cpu/kernels_impl.inl"
