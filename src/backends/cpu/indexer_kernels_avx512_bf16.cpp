// The indexer-scores cpu kernel table for the avx512_bf16 level, compiled with the avx512 flags plus
// -mavx512bf16 (16 lanes, vdpbf16ps); see src/backends/CMakeLists.txt. Bodies: indexer_kernels_impl.inl.
#define SIEVE_CPU_INDEXER_TABLE kCpuIndexerKernelsAvx512Bf16
#define SIEVE_CPU_ISA_NAME "avx512_bf16"
#define SIEVE_CPU_ISA_NS avx512_bf16
#include "backends/cpu/indexer_kernels_impl.inl"
