// Loading one DSA-on-MLA layer's attention weights (specs/dsa_mla.md §6) through the WeightStore and
// preparing them for the backend: the q_a / kv_a projections (§2.1), the per-head absorbed
// W_UKᵀ and W_UV split out of kv_b_proj (§2.5), o_proj, Hy4's gate and sink (§2.8, §2.9) and the
// indexer (§2.6; full layers only, wk and weights_proj fused as vLLM-HY does).
//
// Two checkpoint name layouts are accepted, per layer (exactly one must be present):
//   HF        model.layers.N.self_attn.{q_a_proj, q_a_layernorm, q_b_proj, kv_a_proj_with_mqa,
//             kv_a_layernorm, kv_b_proj, o_proj, linear_gate, learnable_sink_param, indexer.*}
//             (transformers' save_pretrained, the released V3.2 / Hy4 checkpoints; §6.1, §6.2)
//   DeepSeek  layers.N.attn.{wq_a, q_norm, wq_b, wkv_a, kv_norm, wkv_b, wo, indexer.*} (DS-ref
//             inference/convert.py renames, §6.1)
// FP8 e4m3 weights with 128×128 block scales (`.weight_scale_inv` or `.scale`) stay packed for the
// backend where it can consume them; kv_b_proj is dequantized once for the absorbed path (§3.6).
#pragma once

#include <cstdint>
#include <vector>

#include "sieve/backends/backend.h"
#include "sieve/core/tensor.h"
#include "sieve/io/config_dsa_mla.h"
#include "io/weights.h"
#include "sieve/kv/cache_spec.h"
#include "models/device_tensor.h"
#include "models/planned_linear.h"

namespace sieve::dsa_mla {

struct LayerWeights {
    int64_t layer = 0;                // the model's layer index
    DsaLayerKind kind = DsaLayerKind::full;
    int64_t topk_source_layer = 0;    // the layer whose top-k a shared layer reuses
    // q_a_proj and kv_a_proj_with_mqa stay two GEMMs (vLLM fuses them, §2.1): the q_c output then is a
    // contiguous [T, Rq] input for q_b_proj and the indexer's wq_b.
    PlannedLinear q_a;                 // [Rq, D]
    PlannedLinear kv_a;                // [R + Dr, D]
    DeviceTensor q_a_norm;            // [Rq] f32
    DeviceTensor kv_a_norm;           // [R] f32
    PlannedLinear q_b;                 // [H·Dqk, Rq]
    // Absorbed per-head weights for ops/mla_head_proj.h ([n_heads, in, out]; f32 for exact, bf16 for deployed):
    DeviceTensor w_uk;                // [H, Dn, R]: q_lat[t, h] = W_UK[h]ᵀ·q_nope[t, h] (§2.5)
    DeviceTensor w_uv;                // [H, R, Dv]: o[t, h] = W_UV[h]·o_lat[t, h] (§2.5), W_UV transposed
    PlannedLinear o_proj;              // [D, H·Dv]
    DsaOutputGate gate_mode = DsaOutputGate::none;
    PlannedLinear gate;                // [H·Dv, D] (elementwise) or [H, D] (headwise); empty without a gate
    DeviceTensor sink;                // [H] f32 natural-log sink logits, or empty (§2.8)
    // Indexer (full layers).
    PlannedLinear indexer_wq_b;        // [Hi·Di, Rq]
    PlannedLinear indexer_wk_weights;  // [Di + Hi, D]: indexer.wk ; indexer.weights_proj (§2.6, vLLM-HY)
    DeviceTensor k_norm_weight;       // [Di] f32
    DeviceTensor k_norm_bias;         // [Di] f32
};

// Reads and prepares layer `layer` of `config` for `profile` (exact: f32 math; deployed: bf16 math).
// Errors name the tensor and the values: a missing tensor, a wrong shape or dtype, a gate or sink that
// contradicts the config, both name layouts present.
Expected<LayerWeights> load_layer_weights(const DsaMlaConfig& config, int64_t layer, WeightStore& store,
                                          Backend& backend, NumericsProfile profile);

}  // namespace sieve::dsa_mla
