// The cpu QSA kernel table for the avx2 level, compiled with -mavx2 -mfma -mf16c (8 lanes);
// see src/backends/CMakeLists.txt. Bodies: qsa_kernels_impl.inl.
#define SIEVE_QSA_TABLE kQsaKernelsAvx2
#define SIEVE_QSA_ISA_NAME "avx2"
#define SIEVE_CPU_ISA_NS avx2
#include "backends/cpu/qsa_kernels_impl.inl"
