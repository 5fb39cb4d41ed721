// The launchers of the norm kernels (ops/rms_norm.h, ops/layer_norm.h semantics), each enqueuing on `stream` and
// returning the launch's Status. Params are validated by the backend before (cuda_backend.cpp); their
// pointers are device addresses.
#pragma once

#include <cuda_runtime_api.h>

#include "sieve/core/status.h"
#include "sieve/ops/layer_norm.h"
#include "sieve/ops/rms_norm.h"

namespace sieve::cuda {

Status rms_norm(const RmsNormParams& p, cudaStream_t stream);      // norm_kernels.cu
Status layer_norm(const LayerNormParams& p, cudaStream_t stream);  // norm_kernels.cu

}  // namespace sieve::cuda
