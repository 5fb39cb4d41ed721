// Typed config of QSA (Qwen Sparse Attention) on Qwen3.8-Flash-Next (model_type "qwen4_exp", its
// text part "qwen4_exp_text"): specs/qsa.md "Decisions for sieve", §2.1, §2.2, §4.1, §4.2, §4.5–§4.7.
#pragma once

#include <cstdint>
#include <vector>

#include "sieve/io/config_rope.h"

namespace sieve {

// A hybrid model: only the QSA layers are sieve's (qsa.md §2.1). Every non-linear layer is QSA.
enum class QsaLayerKind {
    qsa,               // gated GQA + weight-free indexer ("qwen_sparse_attention", alias "full_attention")
    linear_attention,  // GatedDeltaNet: not a QSA layer
};
const char* qsa_layer_kind_name(QsaLayerKind kind);  // "qsa" / "linear_attention"

struct QsaConfig {
    // The fields came from the `text_config` object of the multimodal wrapper (whose checkpoints
    // name the layers model.language_model.layers.{L}, qsa.md §3) rather than from the top level.
    bool from_text_config = false;

    // Fields (§2.1).
    int64_t hidden_size = 0;
    int64_t num_hidden_layers = 0;
    int64_t num_attention_heads = 0;   // Hq
    int64_t num_key_value_heads = 0;   // Hkv
    int64_t head_dim = 0;              // D
    int64_t max_position_embeddings = 0;
    int64_t mtp_num_hidden_layers = 0;  // MTP layers, each a QSA layer (no transformers reference, §2.1)
    double  rms_norm_eps = 0.0;        // every (Gemma-style) RMSNorm of the layer
    // The five indexer fields: all given or none (§2.2); zero when none (then the model has no QSA layer).
    bool    has_indexer = false;
    int64_t indexer_n_heads = 0;         // Hi
    int64_t indexer_kv_heads = 0;        // always 1
    int64_t indexer_head_dim = 0;        // Di
    int64_t indexer_budget = 0;          // token_topk: tokens taken from complete groups
    int64_t indexer_compress_ratio = 0;  // r: tokens per group
    // Interleaved-MRoPE sections (default [11, 11, 10]); text-only input makes them ordinary 1-D
    // RoPE (§4.1), so sieve only records them.
    std::vector<int64_t> mrope_section;

    // Derived.
    int64_t rotary_dim = 0;      // R = int(D · partial_rotary_factor)
    int64_t gqa_group_size = 0;  // Hq / Hkv; query head h reads KV head h / (Hq/Hkv) (§4.7)
    int64_t block_topk = 0;      // budget / r groups
    int64_t output_width = 0;    // budget + r − 1 token slots per row (§4.6)
    double  softmax_scale = 0.0;        // D^-0.5, no sink, no softcap (§4.7)
    double  indexer_score_scale = 0.0;  // Di^-0.5 (§4.4)
    RopeConfig rope;          // main q and k: first R dims, NeoX pairs (§4.1)
    RopeConfig rope_indexer;  // the same table on the first R of the Di dims of each index-query head (§4.2)

    std::vector<QsaLayerKind> layers;  // [num_hidden_layers]
    int64_t num_qsa_layers = 0;        // backbone layers of kind qsa

    // Layer ids: the main layers 0 … num_hidden_layers − 1, then the MTP layers (num_hidden_layers + j),
    // each a QSA layer with its own indexer and caches (§7).
    int64_t n_layers_with_mtp() const { return num_hidden_layers + mtp_num_hidden_layers; }
    bool is_mtp_layer(int64_t id) const { return id >= num_hidden_layers && id < n_layers_with_mtp(); }
    bool is_qsa_layer(int64_t id) const {
        return is_mtp_layer(id) || (id >= 0 && id < num_hidden_layers && layers[static_cast<size_t>(id)] == QsaLayerKind::qsa);
    }
};

}  // namespace sieve
