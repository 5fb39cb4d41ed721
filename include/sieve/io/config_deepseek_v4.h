// Typed config of DeepSeek-V4 (Flash / Pro, model_type "deepseek_v4"): the fields of
// specs/deepseek_v4.md §1 and what they imply per layer (kind, compress ratio, RoPE table).
#pragma once

#include <cstdint>
#include <vector>

#include "sieve/io/config_rope.h"

namespace sieve {

enum class DeepseekV4LayerKind {
    swa,  // sliding window only (compress ratio 0; also every MTP layer)
    csa,  // sliding window + overlapping compressor (ratio 4 in the release) + Lightning Indexer top-k
    hca,  // sliding window + non-overlapping compressor (ratio 128 in the release), all entries
};
const char* deepseek_v4_layer_kind_name(DeepseekV4LayerKind kind);  // "swa" / "csa" / "hca"

// Which of the two config.json layouts the file uses (deepseek_v4.md §1.4).
enum class DeepseekV4ConfigLayout {
    original,      // compress_ratios (+ MTP entry), qk_rope_head_dim, rope_theta / compress_rope_theta / rope_scaling
    transformers,  // layer_types + compress_rates, partial_rotary_factor, rope_parameters {main, compress}
};

struct DeepseekV4Layer {
    DeepseekV4LayerKind kind = DeepseekV4LayerKind::swa;
    int64_t compress_ratio = 0;       // m: 0 for swa, else source tokens per compressed entry
    bool    compressor_overlap = false;  // csa: coff = 2, each entry pools 2m tokens (§3.4)
    bool    has_indexer = false;         // csa only (§3.6)
    // The one table of every rotation in the layer (q, kv, compressed entries, indexer q/k and the
    // inverse rotation of the output): main for swa, compress for csa/hca (§1.3). Always the last
    // r dims, interleaved pairs (§2.3).
    RopeConfig rope;
};

struct DeepseekV4Config {
    DeepseekV4ConfigLayout layout = DeepseekV4ConfigLayout::original;

    // Fields (§1.1).
    int64_t hidden_size = 0;
    int64_t num_hidden_layers = 0;
    int64_t num_attention_heads = 0;   // H
    int64_t num_key_value_heads = 1;   // always 1: one shared K=V head
    int64_t head_dim = 0;              // d (512)
    int64_t q_lora_rank = 0;
    int64_t o_lora_rank = 0;
    int64_t o_groups = 0;              // G
    int64_t sliding_window = 0;        // w: window entries including the query's own token (§3.2)
    int64_t index_n_heads = 0;         // H_I
    int64_t index_head_dim = 0;        // c_I
    int64_t index_topk = 0;            // indexer top-k width ("Decisions for sieve")
    int64_t max_position_embeddings = 0;
    int64_t num_nextn_predict_layers = 0;  // MTP layers
    double  rms_norm_eps = 0.0;

    // Derived (§1.2, §1.3).
    int64_t rope_head_dim = 0;      // r: rotated width, the last r dims of every rotated vector
    int64_t nope_head_dim = 0;      // d − r
    int64_t heads_per_group = 0;    // H / G, heads per output-projection group (§3.9)
    double  softmax_scale = 0.0;    // d^-0.5, no YaRN mscale (§1.2)
    double  index_score_scale = 0.0;  // c_I^-0.5 · H_I^-0.5 on the indexer head weights (§3.6)
    RopeConfig rope_main;           // θ = rope_theta, plain RoPE
    RopeConfig rope_compress;       // θ = compress_rope_theta, YaRN when the config scales it

    std::vector<DeepseekV4Layer> layers;      // [num_hidden_layers]
    std::vector<DeepseekV4Layer> mtp_layers;  // [num_nextn_predict_layers], all swa ("Decisions for sieve")

    // Layer ids: the main layers 0 … num_hidden_layers − 1, then the MTP layers (num_hidden_layers + j,
    // vLLM's numbering, §1.1).
    int64_t n_layers_with_mtp() const { return static_cast<int64_t>(layers.size() + mtp_layers.size()); }
    bool is_mtp_layer(int64_t id) const {
        return id >= static_cast<int64_t>(layers.size()) && id < n_layers_with_mtp();
    }
    // The layer with id `id` (0 ≤ id < n_layers_with_mtp()).
    const DeepseekV4Layer& layer(int64_t id) const {
        const size_t n = layers.size(), i = static_cast<size_t>(id);
        return i < n ? layers[i] : mtp_layers[i - n];
    }
};

}  // namespace sieve
