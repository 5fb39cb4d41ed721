// Typed config of DeepSeek Sparse Attention on MLA: DeepSeek-V3.2 (model_type "deepseek_v32")
// and Tencent Hy4 (model_type "hy_v4"), specs/dsa_mla.md "Decisions for sieve", §1, §2.2, §2.3, §2.9.
#pragma once

#include <cstdint>
#include <vector>

#include "sieve/io/config_rope.h"

namespace sieve {

enum class DsaMlaModel {
    deepseek_v32,
    hy_v4,
};
const char* dsa_mla_model_name(DsaMlaModel model);  // the model_type string

enum class DsaLayerKind {
    full,    // runs its own Lightning Indexer and writes the top-k
    shared,  // no indexer: reuses the top-k of the nearest preceding full layer (dsa_mla.md §1.3)
};
const char* dsa_layer_kind_name(DsaLayerKind kind);  // "full" / "shared"

// Sigmoid output gate on the attention output, before o_proj (dsa_mla.md §2.9).
enum class DsaOutputGate {
    none,
    elementwise,  // gate [T, H·Dv] from linear_gate [H·Dv, D]
    headwise,     // gate [T, H] from linear_gate [H, D] (vLLM only)
};
const char* dsa_output_gate_name(DsaOutputGate gate);  // "none" / "elementwise" / "headwise"

struct DsaMlaLayer {
    DsaLayerKind kind = DsaLayerKind::full;
    int64_t topk_source_layer = 0;  // full: the layer itself; shared: the full layer whose top-k it reads
};

struct DsaMlaConfig {
    DsaMlaModel model = DsaMlaModel::deepseek_v32;

    // Fields (§1.1, §1.2).
    int64_t hidden_size = 0;          // D
    int64_t num_hidden_layers = 0;
    int64_t num_attention_heads = 0;  // H
    int64_t q_lora_rank = 0;          // Rq (the indexer reads the q_a_layernorm output)
    int64_t kv_lora_rank = 0;         // R
    int64_t qk_nope_head_dim = 0;     // Dn
    int64_t qk_rope_head_dim = 0;     // Dr: the MLA rope slice and the indexer rope slice
    int64_t v_head_dim = 0;           // Dv
    int64_t index_n_heads = 0;        // Hi
    int64_t index_head_dim = 0;       // Di
    int64_t index_topk = 0;           // K
    int64_t max_position_embeddings = 0;
    int64_t num_nextn_predict_layers = 0;  // MTP layers; each runs a full indexer (§1.3)
    double  rms_norm_eps = 0.0;

    // Derived.
    int64_t qk_head_dim = 0;     // Dqk = Dn + Dr
    int64_t kv_cache_dim = 0;    // R + Dr: one latent cache entry [c | RoPE(kr)] (§2.5)
    // Dqk^-0.5 · m², m = YaRN mscale(factor, mscale_all_dim) when YaRN gives mscale_all_dim ≠ 0, else 1
    // (§2.3); the same for the naive and the absorbed form.
    double softmax_scale = 0.0;
    double latent_norm_eps = 0.0;       // q_a / kv_a RMSNorm: 1e-6 for deepseek_v32, rms_norm_eps for hy_v4
    double indexer_key_norm_eps = 0.0;  // indexer k_norm LayerNorm: 1e-6 for both ("Decisions for sieve")
    double indexer_softmax_scale = 0.0;      // Di^-0.5, no mscale (§2.6, §7.11)
    double indexer_head_weight_scale = 0.0;  // Hi^-0.5 on weights_proj's output (§2.6)
    // One frequency table of width Dr serves both slices (§2.2).
    RopeConfig rope_mla;      // q_pe (last Dr dims of each Dqk head) and kr: interleaved
    RopeConfig rope_indexer;  // deepseek_v32: first Dr dims, NeoX; hy_v4: last Dr dims, interleaved
    // What the config announces; the checkpoint decides in the end ("Decisions for sieve": gate
    // when linear_gate.weight exists, headwise when its width is H; sink when learnable_sink_param
    // exists), so the weight loader checks the tensors against these.
    DsaOutputGate output_gate = DsaOutputGate::none;
    bool has_attention_sink = false;

    std::vector<DsaMlaLayer> layers;      // [num_hidden_layers]
    std::vector<DsaMlaLayer> mtp_layers;  // [num_nextn_predict_layers], all full, ids num_hidden_layers + j

    // Layer ids: the main layers 0 … num_hidden_layers − 1, then the MTP layers (num_hidden_layers + j, §1.3).
    int64_t n_layers_with_mtp() const { return static_cast<int64_t>(layers.size() + mtp_layers.size()); }
    bool is_mtp_layer(int64_t id) const {
        return id >= static_cast<int64_t>(layers.size()) && id < n_layers_with_mtp();
    }
    // The layer with id `id` (0 ≤ id < n_layers_with_mtp()).
    const DsaMlaLayer& layer(int64_t id) const {
        const size_t n = layers.size(), i = static_cast<size_t>(id);
        return i < n ? layers[i] : mtp_layers[i - n];
    }
};

}  // namespace sieve
