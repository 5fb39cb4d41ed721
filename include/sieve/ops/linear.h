// ops/linear.h — y = x·Wᵀ (+ b): the projections of every family (deepseek_v4.md §2.7, §3.1;
// dsa_mla.md §2.1, §3.6; qsa.md §4.1).
//
// Semantics. For token t and output o, with K = in_features:
//   y[t, o] = Σ_{i<K} X[t, i] · W[o, i]  (+ B[o])       fp32 products and accumulation, order unspecified;
//                                                      bias added in fp32; cast to y_type once (bf16: RNE)
// W is the weight as the math sees it, by weight_type:
//   f32      W = weight
//   bf16     W = widen(weight)                                   (exact)
//   f8_e4m3  W[o, i] = e4m3(weight[o, i]) · block_scale[⌊o/128⌋, ⌊i/128⌋]     (one fp32 rounding; exact for
//            power-of-two scales). 128×128 blocks, partial at the bottom/right edges. block_scale holds
//            multipliers: decoded ue8m0 `.scale` bytes 2^(S−127) for DeepSeek-V4 (deepseek_v4.md "Decisions"),
//            `weight_scale_inv` as stored for V3.2 (dsa_mla.md §3.6: "despite the name, it is a multiplier").
// X (and W) by `math`, fixed at prepare time because it decides how weights are packed:
//   f32   the `exact` profile: X = widen(x), W as above. No activation quantization (deepseek_v4.md
//         "Decisions": FP8 weights act as if dequantized once to fp32).
//   bf16  the `deployed` profile, vLLM CPU's W8A16 (deepseek_v4.md §2.7 [vllm-cpu] gemm_fp8.cpp):
//         X = round_bf16(x) and W = round_bf16(W) — the latter exact for bf16 weights and for FP8 weights
//         with power-of-two scales — so every product is exact in fp32 and only the accumulation order varies.
// The [ref] FP8 path with FP8-quantized activations (act_quant + fp8_gemm) is not offered.
//
// Groups (a block-diagonal map: DeepSeek-V4's grouped wo_a, deepseek_v4.md §3.9). With G = groups, the outputs
// fall into G equal groups of out_features / G rows, x's rows into G groups of K = in_features values, and
// output o of group g = ⌊o·G / out_features⌋ reads x's group g only:
//   y[t, o] = Σ_{i<K} X[t, g·K + i] · W[o, i]  (+ B[o])
// so x rows hold G·in_features values (PreparedLinear::x_features()) and the weight keeps its stored shape
// [out_features, in_features]. G = 1 is the plain linear; G separate linears over the groups give the same
// values. FP8 weights: each group's rows are whole 128-row scale blocks ((out_features / G) % 128 = 0).
//
// A backend prepares weights once (load time: widen, dequantize, repack), plans per batch shape
// (workspace size, GEMM primitives) and runs without allocating; see backends/backend.h.
#pragma once

#include <cstdint>
#include <string_view>

#include "sieve/core/dtype.h"
#include "sieve/core/status.h"

namespace sieve {

inline constexpr int64_t kLinearFp8Block = 128;  // weight_block_size [128, 128] (dsa_mla.md §3.6, deepseek_v4.md §2.7)

enum class LinearMath : uint8_t { f32, bf16 };

std::string_view linear_math_name(LinearMath m);

struct LinearWeights {
    const void* weight = nullptr;       // [out_features, in_features], weight_type; row o at weight + o·weight_row_stride
    const float* block_scale = nullptr; // [ceil(out/128), ceil(in/128)] row-major; f8_e4m3 only, else nullptr
    const void* bias = nullptr;         // [out_features], bias_type; or nullptr
    int64_t out_features = 0, in_features = 0;
    int64_t groups = 1;                 // ≥ 1, dividing out_features: x rows hold groups·in_features values (Groups)
    int64_t weight_row_stride = 0;      // elements, ≥ in_features
    DType weight_type = DType::f32;     // f32 | bf16 | f8_e4m3
    DType bias_type = DType::f32;       // f32 | bf16
    LinearMath math = LinearMath::f32;
};

// validate never reads memory behind the pointers; check_indices reads index arrays and may only be
// called on host-readable memory (ops/op_common.h).
Status validate(const LinearWeights& w);
// W[o, i] as the math sees it (the weight_type table above), rounded to bf16 for LinearMath::bf16: what a
// backend packs at prepare time. Reads the (host) weight memory.
float linear_weight_value(const LinearWeights& w, int64_t o, int64_t i);
// Nothing to read: weights, no index arrays.
inline Status check_indices(const LinearWeights&) { return Status::ok(); }

struct LinearParams {
    const void* x = nullptr;  // [n_tokens, groups·in_features], x_type; row t at x + t·x_row_stride
    void* y = nullptr;        // [n_tokens, out_features], y_type; row t at y + t·y_row_stride
    int64_t n_tokens = 0;
    int64_t x_row_stride = 0;  // elements, ≥ 0
    int64_t y_row_stride = 0;  // elements, ≥ out_features when n_tokens > 1
    DType x_type = DType::f32;  // f32 | bf16
    DType y_type = DType::f32;  // f32 | bf16
};

// Against the prepared weights' x_features (groups·in_features) and out_features. With check_pointers =
// false only the shapes, strides and dtypes are checked (what a plan needs); x and y must not overlap.
// validate never reads memory behind the pointers.
Status validate(const LinearParams& p, int64_t in_features, int64_t out_features, bool check_pointers = true);
// Nothing to read: no index arrays.
inline Status check_indices(const LinearParams&) { return Status::ok(); }

}  // namespace sieve
