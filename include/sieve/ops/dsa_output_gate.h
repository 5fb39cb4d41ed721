// ops/dsa_output_gate.h — Hy4's sigmoid output gate on the attention output, before o_proj
// (specs/dsa_mla.md §2.9, "Decisions for sieve": Gate).
//
// Semantics, for token t, head h, value dim i (x, gate widened exactly when bf16; fp32 math):
//   elementwise: g = gate[t, h·head_dim + i]       (gate row of width n_heads · head_dim)
//   headwise:    g = gate[t, h]                    (gate row of width n_heads; vLLM only)
//   y[t, h, i] = x[t, h, i] · (1 / (1 + exp(−g)))  cast to y_type once
// The gate is computed by the caller from the attention input x (linear_gate). y may be x (same pointer,
// strides and dtype): in place.
#pragma once

#include <cstdint>

#include "sieve/core/dtype.h"
#include "sieve/core/status.h"

namespace sieve {

enum class DsaGateMode : uint8_t { elementwise, headwise };

struct DsaOutputGateParams {
    const void* x = nullptr;     // [n_tokens, n_heads, head_dim], x_type; (t, h, i) at t·x_token_stride + h·x_head_stride + i
    const void* gate = nullptr;  // [n_tokens, n_heads · head_dim] (elementwise) or [n_tokens, n_heads] (headwise),
                                 //   gate_type; row t at gate + t·gate_row_stride
    void* y = nullptr;           // [n_tokens, n_heads, head_dim], y_type; may equal x (in place)
    int64_t n_tokens = 0, n_heads = 0, head_dim = 0;
    int64_t x_token_stride = 0, x_head_stride = 0;
    int64_t gate_row_stride = 0;
    int64_t y_token_stride = 0, y_head_stride = 0;
    DsaGateMode mode = DsaGateMode::elementwise;
    DType x_type = DType::f32;     // f32 | bf16
    DType gate_type = DType::f32;  // f32 | bf16
    DType y_type = DType::f32;     // f32 | bf16
};

// validate never reads memory behind the pointers; check_indices reads index arrays and may only be
// called on host-readable memory (ops/op_common.h).
Status validate(const DsaOutputGateParams& p);
// Nothing to read: no index arrays.
inline Status check_indices(const DsaOutputGateParams&) { return Status::ok(); }

}  // namespace sieve
