// cuda: NVIDIA Hopper GPUs (sm_90a). The backend owns one device: its memory (cudaMalloc'd buffers, never
// host accessible), one stream on which every op and transfer is issued in order, and the kernels of
// cuda_kernels.h. Specs: "cuda" (device 0) or "cuda:<N>". A build without CUDA (SIEVE_WITH_CUDA off, or
// no CUDA compiler found) knows the spec and refuses it with unsupported; a machine without a GPU lists no
// variant, so the conformance tests run it only where a GPU is.
//
// Op coverage grows op by op: an op without a CUDA kernel yet returns unsupported naming it (backend.h),
// never a silent host fallback.
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "sieve/backends/backend.h"

namespace sieve {

inline constexpr std::string_view kCudaBackendSpecs = "cuda or cuda:<device index>";

Expected<std::unique_ptr<Backend>> make_cuda_backend_from_spec(std::string_view spec);
// "cuda:<N>" for every GPU the CUDA runtime sees; none without a GPU or driver, or in a build without CUDA.
std::vector<std::string> cuda_backend_variants();

}  // namespace sieve
