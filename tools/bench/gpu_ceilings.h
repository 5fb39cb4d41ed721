// A GPU's ceilings, measured in the same run as the kernels they judge (DESIGN.md: ratios against
// measured ceilings): device-to-device copy bandwidth (cudaMemcpyAsync of 2 GiB; bytes read + written)
// and the bf16 tensor-core rate (cuBLAS bf16 GEMM 8192³, fp32 accumulation): the two numbers the GPU
// peers quote theirs against. Each is the best of its repetitions, with the spread.
#pragma once

#include <vector>

#include "ceilings.h"
#include "sieve/core/status.h"

namespace sieve::bench {

// unsupported_error in a build without CUDA (gpu_ceilings_none.cpp).
Expected<std::vector<Ceiling>> measure_gpu_ceilings(int device, bool quick);

}  // namespace sieve::bench
