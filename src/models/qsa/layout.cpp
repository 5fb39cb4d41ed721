// QSA attention tensors (specs/qsa.md §3) and caches (§5).
#include <fmt/format.h>

#include "models/qsa/layout.h"

namespace sieve {

QsaCacheLayouts qsa_cache_layouts(const QsaConfig& c, NumericsProfile profile) {
    // exact f32, deployed bf16 (§5.1–§5.3, "Decisions for sieve").
    const CacheRecordFormat f = profile == NumericsProfile::exact ? CacheRecordFormat::f32 : CacheRecordFormat::bf16;
    return {{f, 2 * c.num_key_value_heads * c.head_dim, 0}, {f, c.indexer_head_dim, 0}};
}

std::string qsa_attention_prefix(const QsaConfig& c, int64_t layer) {
    return c.is_mtp_layer(layer) ? fmt::format("mtp.layers.{}.self_attn", layer - c.num_hidden_layers)
                                 : fmt::format("model.layers.{}.self_attn", layer);
}

AttentionLayout qsa_attention_layout(const QsaConfig& c, NumericsProfile profile) {
    const int64_t H = c.hidden_size, Hq = c.num_attention_heads, Hkv = c.num_key_value_heads, D = c.head_dim;
    const int64_t Hi = c.indexer_n_heads, Di = c.indexer_head_dim, r = c.indexer_compress_ratio;
    const QsaCacheLayouts records = qsa_cache_layouts(c, profile);
    const std::string_view dtype = cache_record_format_name(records.kv.format);

    AttentionLayout layout;
    int64_t qsa_layers = 0;
    for (int64_t i = 0; i < c.n_layers_with_mtp(); ++i) {
        AttentionLayerLayout out;
        out.layer = i;
        out.mtp = c.is_mtp_layer(i);
        out.kind = qsa_layer_kind_name(c.is_qsa_layer(i) ? QsaLayerKind::qsa : QsaLayerKind::linear_attention);
        if (!c.is_qsa_layer(i)) {
            out.sieve_runs = false;
            out.detail = "not a sparse-attention layer; skipped by run and check";
            layout.layers.push_back(std::move(out));
            continue;
        }
        qsa_layers += !out.mtp;
        out.detail = fmt::format("{}budget {} tokens in groups of {}", out.mtp ? "MTP layer, " : "", c.indexer_budget, r);
        const std::string p = qsa_attention_prefix(c, i) + ".";
        auto add = [&](std::string leaf, Shape shape) { out.tensors.push_back({p + leaf, std::move(shape), false}); };
        add("q_proj.weight", {2 * Hq * D, H});
        add("k_proj.weight", {Hkv * D, H});
        add("v_proj.weight", {Hkv * D, H});
        add("o_proj.weight", {H, Hq * D});
        add("q_norm.weight", {D});
        add("k_norm.weight", {D});
        add("indexer.index_qk_proj.weight", {(Hi + 1) * Di, H});
        add("indexer.q_layernorm.weight", {Di});
        add("indexer.k_layernorm.weight", {Di});
        out.caches.push_back({"kv", fmt::format("{} K|V [{}, 2·{}]", dtype, Hkv, D), records.kv.entry_bytes(), 1, 0});
        out.caches.push_back({"compressed_keys", cache_format_text(records.keys), records.keys.entry_bytes(), r, 0});
        // Raw index keys of the unfinished group (§5.2; capacity r without speculative decoding).
        out.caches.push_back({"raw_key_ring", cache_format_text(records.keys), records.keys.entry_bytes(), 1, r});
        layout.layers.push_back(std::move(out));
    }
    layout.dense_cache_bytes_per_token = static_cast<double>(records.kv.entry_bytes() * qsa_layers);
    return layout;
}

}  // namespace sieve
