// The cpu kernel table for the avx512_bf16 level, compiled with the avx512 flags plus -mavx512bf16 (16 lanes, vdpbf16ps for bf16 linear);
// see src/backends/CMakeLists.txt. Bodies: kernels_impl.inl.
#define SIEVE_CPU_TABLE kCpuKernelsAvx512Bf16
#define SIEVE_CPU_ISA_NAME "avx512_bf16"
#define SIEVE_CPU_ISA_NS avx512_bf16
#include "backends/cpu/kernels_impl.inl"
