// The DSA-on-MLA cpu kernel table for the scalar level, compiled with baseline flags; see
// src/backends/CMakeLists.txt. Bodies: dsa_kernels_impl.inl.
#define SIEVE_DSA_CPU_TABLE kDsaCpuKernelsScalar
#define SIEVE_CPU_ISA_NAME "scalar"
#define SIEVE_CPU_ISA_NS scalar
#include "backends/cpu/dsa_kernels_impl.inl"
