// The cpu kernel table for the scalar level, compiled with the baseline flags (portable code, 1 lane);
// see src/backends/CMakeLists.txt. Bodies: kernels_impl.inl.
#define SIEVE_CPU_TABLE kCpuKernelsScalar
#define SIEVE_CPU_ISA_NAME "scalar"
#define SIEVE_CPU_ISA_NS scalar
#include "backends/cpu/kernels_impl.inl"
