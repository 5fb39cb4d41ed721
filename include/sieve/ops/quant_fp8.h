// ops/quant_fp8.h — per-group FP8 e4m3 quantization with UE8M0 (power-of-two) scales, and its
// "fake quant" form that writes the dequantized values back (deepseek_v4.md §2.4, dsa_mla.md §3.2).
//
// Semantics. Each row [n_tokens, n_heads, dim] is cut into dim / group_size groups of group_size
// contiguous values (group_size 64 for the DeepSeek-V4 KV nope dims, 128 for activations and indexer
// keys). For a group g with values x_j (fp32; bf16 widened exactly):
//   amax = max_j |x_j|
//   if amax is finite:
//     s   = ue8m0_scale_for_amax(amax) = 2^ceil(log2(max(amax, 1e-4) · (1/448)))   (core/dtype.h; the model
//           authors' act_quant: clamp on amax, specs/README.md "Open points settled")
//     q_j = f32_to_fp8_e4m3(clamp(x_j / s, −448, 448))   (saturating, round to nearest even, subnormals kept;
//           x_j / s is exact because s is a power of two)
//     scale byte = log2(s) + 127 (ue8m0), scale_f32 = s, dequant_j = fp8_e4m3_to_f32(q_j) · s (exact in
//           fp32 and in bf16)
//   else (a NaN or an infinity in the group; sieve's choice, no reference defines it): no finite scale
//     represents the group, so it is poisoned loudly: scale byte 0xFF (NaN), scale_f32 = NaN,
//     q_j = 0x7F | sign(x_j) (e4m3 NaN), dequant_j = NaN.
// Every backend produces the same bytes. Outputs are optional (nullptr = not written) but at least one
// of q, scale_ue8m0, scale_f32, dequant must be given. dequant may equal x (same pointer, strides and
// dtype): the in-place fake quant of deepseek_v4.md §2.4 "inplace".
#pragma once

#include <cstdint>

#include "sieve/core/dtype.h"
#include "sieve/core/status.h"

namespace sieve {

struct QuantFp8Params {
    const void* x = nullptr;       // [n_tokens, n_heads, dim], x_type; (t, h, i) at t·x_token_stride + h·x_head_stride + i
    uint8_t* q = nullptr;          // [n_tokens, n_heads, dim] e4m3 bytes, q strides; or nullptr
    uint8_t* scale_ue8m0 = nullptr;  // [n_tokens, n_heads, dim / group_size] ue8m0 bytes, scale strides; or nullptr
    float* scale_f32 = nullptr;    // [n_tokens, n_heads, dim / group_size] scales as f32, scale strides; or nullptr
    void* dequant = nullptr;       // [n_tokens, n_heads, dim], dequant_type, dequant strides; or nullptr
    int64_t n_tokens = 0, n_heads = 1, dim = 0, group_size = 128;
    int64_t x_token_stride = 0, x_head_stride = 0;
    int64_t q_token_stride = 0, q_head_stride = 0;
    int64_t scale_token_stride = 0, scale_head_stride = 0;  // shared by scale_ue8m0 and scale_f32 (elements)
    int64_t dequant_token_stride = 0, dequant_head_stride = 0;
    DType x_type = DType::f32;        // f32 | bf16
    DType dequant_type = DType::f32;  // f32 | bf16
};

// group_size ≥ 1 dividing dim; at least one output; output layouts disjoint from each other and
// from x (dequant may be x itself).
// validate never reads memory behind the pointers; check_indices reads index arrays and may only be
// called on host-readable memory (ops/op_common.h).
Status validate(const QuantFp8Params& p);
// Nothing to read: no index arrays.
inline Status check_indices(const QuantFp8Params&) { return Status::ok(); }

}  // namespace sieve
