// The cpu QSA kernel table for the avx512_bf16 level, compiled with the avx512 flags + -mavx512bf16 (16 lanes);
// see src/backends/CMakeLists.txt. Bodies: qsa_kernels_impl.inl (the scores use vdpbf16ps here).
#define SIEVE_QSA_TABLE kQsaKernelsAvx512Bf16
#define SIEVE_QSA_ISA_NAME "avx512_bf16"
#define SIEVE_CPU_ISA_NS avx512_bf16
#include "backends/cpu/qsa_kernels_impl.inl"
