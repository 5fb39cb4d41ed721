// The element-wise halves of the cuda linear (cuda_linear.cpp runs the GEMM itself through cuBLAS):
// staging the activations in the GEMM's input dtype, and the bias add + cast + strided store after it.
#pragma once

#include <cstdint>

#include <cuda_runtime_api.h>

#include "sieve/core/dtype.h"
#include "sieve/core/status.h"

namespace sieve::cuda {

// xs[t, i] = x[t·x_stride + i] as fp32 (to_bf16 = false) or rounded to bf16 (to_bf16 = true, ops/linear.h
// bf16 math: X = round_bf16(x)); xs dense [n_tokens, k]. x_stride may be 0 (one row for every token).
Status linear_stage_x(const void* x, DType x_type, int64_t x_stride, int64_t n_tokens, int64_t k, bool to_bf16,
                      void* xs, cudaStream_t stream);
// y[t·y_stride + o] = cast_{y_type}(acc[t, o] + bias[o]) (bias may be null): the contract's one rounding of y.
Status linear_finish(const float* acc, const float* bias, int64_t n_tokens, int64_t n, void* y, DType y_type,
                     int64_t y_stride, cudaStream_t stream);

}  // namespace sieve::cuda
