// The indexer-scores cpu kernel table for the avx2 level, compiled with the avx2 flags (8 lanes); see
// src/backends/CMakeLists.txt. Bodies: indexer_kernels_impl.inl.
#define SIEVE_CPU_INDEXER_TABLE kCpuIndexerKernelsAvx2
#define SIEVE_CPU_ISA_NAME "avx2"
#define SIEVE_CPU_ISA_NS avx2
#include "backends/cpu/indexer_kernels_impl.inl"
