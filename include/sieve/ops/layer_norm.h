// ops/layer_norm.h — LayerNorm (mean-subtracting, weight and bias) over the last dim of
// [n_tokens, n_heads, dim] rows: the DSA indexer's k_norm (dsa_mla.md §2.6, "Decisions for sieve":
// LayerNorm with weight and bias, eps from the caller — 1e-6 for V3.2 and Hy4).
//
// Semantics, for each row v (dim values), in fp32 (x widened exactly when bf16):
//   mean = (Σ_i v_i) / dim
//   var  = (Σ_i (v_i − mean)²) / dim           biased variance, as torch.nn.LayerNorm
//   inv  = 1 / sqrt(var + eps)
//   y_i  = ((v_i − mean) · inv) · w_i + b_i    then cast to y_type once
// w = 1 when weight is nullptr, b = 0 when bias is nullptr. Accumulation order unspecified.
// y may be x (same pointer, strides and dtype): in place.
#pragma once

#include <cstdint>

#include "sieve/core/dtype.h"
#include "sieve/core/status.h"

namespace sieve {

struct LayerNormParams {
    const void* x = nullptr;        // [n_tokens, n_heads, dim], x_type; (t, h, i) at t·x_token_stride + h·x_head_stride + i
    void* y = nullptr;              // [n_tokens, n_heads, dim], y_type; may equal x (in place)
    const float* weight = nullptr;  // [dim] or nullptr (= 1)
    const float* bias = nullptr;    // [dim] or nullptr (= 0)
    int64_t n_tokens = 0, n_heads = 1, dim = 0;
    int64_t x_token_stride = 0, x_head_stride = 0;
    int64_t y_token_stride = 0, y_head_stride = 0;
    float eps = 1e-6f;
    DType x_type = DType::f32;      // f32 | bf16
    DType y_type = DType::f32;      // f32 | bf16
};

// validate never reads memory behind the pointers; check_indices reads index arrays and may only be
// called on host-readable memory (ops/op_common.h).
Status validate(const LayerNormParams& p);
// Nothing to read: no index arrays.
inline Status check_indices(const LayerNormParams&) { return Status::ok(); }

}  // namespace sieve
