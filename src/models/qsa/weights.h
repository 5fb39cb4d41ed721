// Loading one QSA layer's weights (specs/qsa.md §3) through the WeightStore: the nine tensors of
// `model.layers.{L}.self_attn.` (text-only checkpoints) or `model.language_model.layers.{L}.self_attn.`
// (the multimodal layout; io/weights.h resolves the alias), fp32 / bf16 / fp16, or FP8 e4m3 with a
// 128×128 block-scale sibling (dequantized once at load: the linear op's FP8 rule, ops/linear.h).
#pragma once

#include <cstdint>

#include "sieve/core/status.h"
#include "sieve/core/tensor.h"
#include "sieve/io/config_qsa.h"
#include "io/weights.h"

namespace sieve::qsa {

// Row offsets of the fused input projection [q_gate | k | v | index_q | index_k] (qsa.md §3, §4.1,
// §4.2): one GEMM per layer instead of four (vLLM fuses q/k/v the same way; the indexer is appended).
struct ProjectionLayout {
    int64_t q_gate = 0;   // [Hq, 2·D]: per head h, q_h = [h·2D, h·2D + D), gate_h = [h·2D + D, (h+1)·2D) (§3)
    int64_t k = 0;        // [Hkv, D]
    int64_t v = 0;        // [Hkv, D]
    int64_t index_q = 0;  // [Hi, Di], head-major
    int64_t index_k = 0;  // [Di], the raw index key (§4.2)
    int64_t total = 0;    // 2·Hq·D + 2·Hkv·D + (Hi + 1)·Di
};
ProjectionLayout projection_layout(const QsaConfig& c);

struct LayerWeights {
    int64_t layer = 0;  // the model's layer index L
    Tensor input_proj;  // [layout.total, hidden] rows q_proj | k_proj | v_proj | index_qk_proj, `dtype`
    Tensor o_proj;      // [hidden, Hq·D], `dtype`
    Tensor q_norm;      // [D] f32, Gemma (1 + w) (§4.1)
    Tensor k_norm;      // [D] f32
    Tensor index_q_norm;  // [Di] f32 (indexer.q_layernorm, §4.2)
    Tensor index_k_norm;  // [Di] f32 (indexer.k_layernorm, applied to the pooled key, §4.3)
};

// Reads and checks layer L (a QSA layer of `c`) with linear weights converted to `dtype` (f32 for
// the exact profile; bf16 for deployed). Errors name the tensor, its shape and the expected one.
Expected<LayerWeights> load_layer_weights(WeightStore& store, const QsaConfig& c, int64_t layer, DType dtype);

}  // namespace sieve::qsa
