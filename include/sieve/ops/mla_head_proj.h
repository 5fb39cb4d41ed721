// ops/mla_head_proj.h — one small linear map per attention head, all heads in one call: the weight
// absorption of MLA (specs/dsa_mla.md §2.5): q_lat[t, h] = W_UK[h]ᵀ·q_nope[t, h] and
// o[t, h] = W_UV[h]·o_lat[t, h], with W_UK, W_UV the per-head halves of kv_b_proj.
//
// Semantics, for token t, head h, output o (in = in_features):
//   y[t, h, o] = Σ_{i<in} X(x[t, h, i]) · W[h, i, o]       fp32 products and sums, order unspecified; cast once
// with the weight given TRANSPOSED per head ([n_heads, in, out], prepared once at load time) and, by `math`
// (ops/linear.h's rule):
//   f32   X = widen(x), W = widen(w)                       (`exact` profile)
//   bf16  X = round_bf16(x), w must be bf16                (`deployed`: every product exact in fp32)
// A separate op from linear because a model has n_heads of these per layer: one call keeps the per-call
// overhead (planning, threading) out of the per-head loop.
#pragma once

#include <cstdint>

#include "sieve/core/dtype.h"
#include "sieve/core/status.h"
#include "sieve/ops/linear.h"

namespace sieve {

struct MlaHeadProjParams {
    const void* x = nullptr;  // [n_tokens, n_heads, in_features], x_type; (t, h, i) at t·x_token_stride + h·x_head_stride + i
    const void* w = nullptr;  // [n_heads, in_features, out_features], w_type, contiguous: (h, i, o) at (h·in + i)·out + o
    void* y = nullptr;        // [n_tokens, n_heads, out_features], y_type; (t, h, o) at t·y_token_stride + h·y_head_stride + o
    int64_t n_tokens = 0, n_heads = 0, in_features = 0, out_features = 0;
    int64_t x_token_stride = 0, x_head_stride = 0;
    int64_t y_token_stride = 0, y_head_stride = 0;
    LinearMath math = LinearMath::f32;
    DType x_type = DType::f32;  // f32 | bf16
    DType w_type = DType::f32;  // f32 | bf16 (bf16 required for LinearMath::bf16)
    DType y_type = DType::f32;  // f32 | bf16
};

// Shapes, strides (y rows disjoint), dtypes, y disjoint from x and w.
// validate never reads memory behind the pointers; check_indices reads index arrays and may only be
// called on host-readable memory (ops/op_common.h).
Status validate(const MlaHeadProjParams& p);
// Nothing to read: no index arrays.
inline Status check_indices(const MlaHeadProjParams&) { return Status::ok(); }

}  // namespace sieve
