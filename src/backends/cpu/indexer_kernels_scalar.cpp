// The indexer-scores cpu kernel table for the scalar level, compiled with baseline flags; see
// src/backends/CMakeLists.txt. Bodies: indexer_kernels_impl.inl.
#define SIEVE_CPU_INDEXER_TABLE kCpuIndexerKernelsScalar
#define SIEVE_CPU_ISA_NAME "scalar"
#define SIEVE_CPU_ISA_NS scalar
#include "backends/cpu/indexer_kernels_impl.inl"
