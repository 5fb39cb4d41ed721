// The indexer-scores cpu kernel table for the amx_bf16 level, compiled with the avx512 flags plus -mavx512bf16
// -mamx-tile -mamx-bf16 (16 lanes; the bf16 dots of fp8 keys as AMX tile products, indexer_kernels_impl.inl);
// see src/backends/CMakeLists.txt. Bodies: indexer_kernels_impl.inl.
#define SIEVE_CPU_INDEXER_TABLE kCpuIndexerKernelsAmxBf16
#define SIEVE_CPU_ISA_NAME "amx_bf16"
#define SIEVE_CPU_ISA_NS amx_bf16
#include "backends/cpu/indexer_kernels_impl.inl"
