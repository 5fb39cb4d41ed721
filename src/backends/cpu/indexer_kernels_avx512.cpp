// The indexer-scores cpu kernel table for the avx512 level, compiled with the avx512 flags (16 lanes); see
// src/backends/CMakeLists.txt. Bodies: indexer_kernels_impl.inl.
#define SIEVE_CPU_INDEXER_TABLE kCpuIndexerKernelsAvx512
#define SIEVE_CPU_ISA_NAME "avx512"
#define SIEVE_CPU_ISA_NS avx512
#include "backends/cpu/indexer_kernels_impl.inl"
