// simd_probe.h at the scalar level: compiled with the baseline flags, as cpu/*kernels_scalar.cpp.
#define SIEVE_SIMD_PROBE simd_probe_scalar
#define SIEVE_CPU_ISA_NS scalar
#include "simd_probe_impl.inl"
