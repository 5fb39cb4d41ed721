// DeepSeek-V4 kernel table for the scalar level, compiled with the baseline flags (portable code, 1 lane);
// see src/backends/CMakeLists.txt. Bodies: dsv4_kernels_impl.inl.
#define SIEVE_CPU_DSV4_TABLE kCpuDsv4KernelsScalar
#define SIEVE_CPU_ISA_NAME "scalar"
#define SIEVE_CPU_ISA_NS scalar
#include "backends/cpu/dsv4_kernels_impl.inl"
