// The cpu QSA kernel table for the avx512 level, compiled with the avx512 flags (16 lanes; also used at the avx512_bf16 level);
// see src/backends/CMakeLists.txt. Bodies: qsa_kernels_impl.inl.
#define SIEVE_QSA_TABLE kQsaKernelsAvx512
#define SIEVE_QSA_ISA_NAME "avx512"
#define SIEVE_CPU_ISA_NS avx512
#include "backends/cpu/qsa_kernels_impl.inl"
