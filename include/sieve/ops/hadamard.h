// ops/hadamard.h — natural-order (Sylvester) Walsh–Hadamard transform of the last dim, times a
// scale: the indexer rotation of deepseek_v4.md §2.6 and dsa_mla.md §3.5 (dim 128, scale 128^-0.5,
// bf16 in/out in [ref]; an option of the indexer, off in `exact`: specs/README.md "Open points settled").
//
// Semantics, for each row v of dim = 2^m values (fp32; bf16 widened exactly):
//   H_1 = [1],  H_2n = [[H_n, H_n], [H_n, −H_n]]      so (H v)_j = Σ_i (−1)^popcount(i & j) · v_i
//   y = scale · (H_dim · v), cast to y_type once.
// Evaluation order, fixed so that every backend produces the same bits: butterflies over
// h = 1, 2, 4, …, dim/2, each mapping the pair (v[j], v[j+h]) with (j & h) == 0 to
// (v[j] + v[j+h], v[j] − v[j+h]) in fp32; then one fp32 multiply by scale.
// y may be x (same pointer, strides and dtype): in place.
#pragma once

#include <cstdint>

#include "sieve/core/dtype.h"
#include "sieve/core/status.h"

namespace sieve {

inline constexpr int64_t kHadamardMaxDim = int64_t{1} << 14;  // a row fits a 64 KiB stack buffer

struct HadamardParams {
    const void* x = nullptr;   // [n_tokens, n_heads, dim], x_type; (t, h, i) at t·x_token_stride + h·x_head_stride + i
    void* y = nullptr;         // [n_tokens, n_heads, dim], y_type; may equal x (in place)
    int64_t n_tokens = 0, n_heads = 1, dim = 128;  // dim: a power of two in [1, kHadamardMaxDim]
    int64_t x_token_stride = 0, x_head_stride = 0;
    int64_t y_token_stride = 0, y_head_stride = 0;
    float scale = 0.08838834764831845f;  // 1/sqrt(128) (deepseek_v4.md §2.6: ×0.08838834764831845)
    DType x_type = DType::f32;  // f32 | bf16
    DType y_type = DType::f32;  // f32 | bf16
};

// validate never reads memory behind the pointers; check_indices reads index arrays and may only be
// called on host-readable memory (ops/op_common.h).
Status validate(const HadamardParams& p);
// Nothing to read: no index arrays.
inline Status check_indices(const HadamardParams&) { return Status::ok(); }

}  // namespace sieve
