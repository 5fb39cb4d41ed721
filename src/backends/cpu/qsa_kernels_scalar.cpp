// The cpu QSA kernel table for the scalar level, compiled with the baseline flags (portable code, 1 lane);
// see src/backends/CMakeLists.txt. Bodies: qsa_kernels_impl.inl.
#define SIEVE_QSA_TABLE kQsaKernelsScalar
#define SIEVE_QSA_ISA_NAME "scalar"
#define SIEVE_CPU_ISA_NS scalar
#include "backends/cpu/qsa_kernels_impl.inl"
