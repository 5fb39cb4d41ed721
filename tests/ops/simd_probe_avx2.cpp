// simd_probe.h at the avx2 level: compiled with that level's flags (tests/ops/CMakeLists.txt).
#define SIEVE_SIMD_PROBE simd_probe_avx2
#define SIEVE_CPU_ISA_NS avx2
#include "simd_probe_impl.inl"
