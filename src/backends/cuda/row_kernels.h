// RoPE, FP8 quantisation and the Hadamard transform (ops/rope.h, ops/quant_fp8.h, ops/hadamard.h): bit for bit the ref backend's results, as those contracts promise.
// Each launcher enqueues on `stream`; the backend has validated the params (cuda_backend.cpp), whose
// pointers are device addresses.
#pragma once

#include <cstddef>

#include <cuda_runtime_api.h>

#include "sieve/backends/backend.h"
#include "sieve/core/status.h"
#include "sieve/ops/rope.h"
#include "sieve/ops/quant_fp8.h"
#include "sieve/ops/hadamard.h"

namespace sieve::cuda {

Status rope(const RopeParams& p, cudaStream_t stream);
Status quant_fp8(const QuantFp8Params& p, cudaStream_t stream);
Status hadamard(const HadamardParams& p, cudaStream_t stream);

}  // namespace sieve::cuda
