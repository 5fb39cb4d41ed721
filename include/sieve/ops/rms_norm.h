// ops/rms_norm.h — RMSNorm over the last dim of [n_tokens, n_heads, dim] rows.
//
// Semantics, for each row v (dim values), in fp32 (x widened exactly when bf16):
//   ms  = (Σ_i v_i²) / dim                    (fp32 accumulation, order unspecified)
//   inv = 1 / sqrt(ms + eps)                   (fp32)
//   y_i = (v_i · inv) · g_i                    then cast to y_type once (bf16: round to nearest even)
// with g by weight_mode:
//   multiply: g_i = weight[i]          deepseek_v4.md §2.1 `w * (x * rsqrt(mean(x²) + eps))`, dsa_mla.md §2.1
//   none:     g_i = 1                  deepseek_v4.md §2.2 weight-free per-head Q norm
//   one_plus: g_i = 1 + weight[i]      qsa.md §4.1 GemmaRMSNorm `(x·rsqrt(mean(x²)+eps))·(1 + w)`, 1 + w in fp32
// Per-head use (deepseek_v4.md §2.2, qsa.md §4.1): pass n_heads > 1 with the head stride; each
// (token, head) row of dim values is normalized on its own.
// Weights are fp32 (bf16 checkpoint norms are widened once at load, deepseek_v4.md §2.1 "held as
// fp32"). Rows of any length ≥ 1. y may be x (same pointer, strides and dtype): in place.
#pragma once

#include <cstdint>

#include "sieve/core/dtype.h"
#include "sieve/core/status.h"

namespace sieve {

enum class RmsNormWeight : uint8_t { none, multiply, one_plus };

struct RmsNormParams {
    const void* x = nullptr;       // [n_tokens, n_heads, dim], x_type; (t, h, i) at t·x_token_stride + h·x_head_stride + i
    void* y = nullptr;             // [n_tokens, n_heads, dim], y_type; y strides; may equal x (in place)
    const float* weight = nullptr; // [dim]; nullptr iff weight_mode == none
    int64_t n_tokens = 0, n_heads = 1, dim = 0;
    int64_t x_token_stride = 0, x_head_stride = 0;
    int64_t y_token_stride = 0, y_head_stride = 0;
    float eps = 1e-6f;             // the caller's (config rms_norm_eps, or 1e-6 fixed: dsa_mla.md "Decisions")
    RmsNormWeight weight_mode = RmsNormWeight::multiply;
    DType x_type = DType::f32;     // f32 | bf16
    DType y_type = DType::f32;     // f32 | bf16
};

// Shapes, dtypes, strides (int64 overflow, output rows disjoint), weight presence, eps finite ≥ 0,
// x/y either the same view or disjoint.
// validate never reads memory behind the pointers; check_indices reads index arrays and may only be
// called on host-readable memory (ops/op_common.h).
Status validate(const RmsNormParams& p);
// Nothing to read: no index arrays.
inline Status check_indices(const RmsNormParams&) { return Status::ok(); }

}  // namespace sieve
