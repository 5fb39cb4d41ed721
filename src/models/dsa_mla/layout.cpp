// DSA-on-MLA attention tensors (specs/dsa_mla.md §6) and caches (§3.3, §3.4, §4.1).
#include <fmt/format.h>

#include "models/dsa_mla/layout.h"

namespace sieve {

DsaMlaCacheLayouts dsa_mla_cache_layouts(const DsaMlaConfig& c, NumericsProfile profile) {
    const bool exact = profile == NumericsProfile::exact;
    // Latent entry [c | RoPE(kr)]: exact f32; deployed the 656-byte FlashMLA record (§3.4). Indexer keys:
    // exact f32; deployed 128 fp8 + one fp32 scale (§3.3).
    return {{exact ? CacheRecordFormat::f32 : CacheRecordFormat::fp8_v32, c.kv_lora_rank + c.qk_rope_head_dim,
             c.qk_rope_head_dim},
            {exact ? CacheRecordFormat::f32 : CacheRecordFormat::fp8_row_scale, c.index_head_dim, 0}};
}

std::string dsa_mla_attention_prefix(const DsaMlaConfig& c, int64_t layer) {
    // Hy4 keeps its MTP layers apart (§1.2); DeepSeek-V3.2's MTP layer is model.layers.61 (§1.1, §6.1).
    if (c.model == DsaMlaModel::hy_v4 && c.is_mtp_layer(layer))
        return fmt::format("model.mtp_layers.{}.self_attn", layer - c.num_hidden_layers);
    return fmt::format("model.layers.{}.self_attn", layer);
}

AttentionLayout dsa_mla_attention_layout(const DsaMlaConfig& c, NumericsProfile profile) {
    const int64_t D = c.hidden_size, H = c.num_attention_heads, Rq = c.q_lora_rank, R = c.kv_lora_rank;
    const int64_t Dr = c.qk_rope_head_dim, Dqk = c.qk_head_dim, Dn = c.qk_nope_head_dim, Dv = c.v_head_dim;
    const int64_t Hi = c.index_n_heads, Di = c.index_head_dim;
    const DsaMlaCacheLayouts records = dsa_mla_cache_layouts(c, profile);
    const int64_t latent_entry = records.latent.entry_bytes();
    const std::string latent_format = cache_format_text(records.latent);

    AttentionLayout layout;
    for (int64_t i = 0; i < c.n_layers_with_mtp(); ++i) {
        const DsaMlaLayer& l = c.layer(i);
        AttentionLayerLayout out;
        out.layer = i;
        out.mtp = c.is_mtp_layer(i);
        const bool full = l.kind == DsaLayerKind::full;
        out.kind = full ? "dsa_full" : "dsa_shared";
        out.detail = full ? fmt::format("{}indexer top-{}", out.mtp ? "MTP layer, " : "", c.index_topk)
                          : fmt::format("top-k from layer {}", l.topk_source_layer);
        const std::string p = dsa_mla_attention_prefix(c, i) + ".";
        auto add = [&](std::string leaf, Shape shape, bool fp8 = false) {
            out.tensors.push_back({p + leaf, std::move(shape), fp8});
        };
        add("q_a_proj.weight", {Rq, D}, true);
        add("q_a_layernorm.weight", {Rq});
        add("q_b_proj.weight", {H * Dqk, Rq}, true);
        add("kv_a_proj_with_mqa.weight", {R + Dr, D}, true);
        add("kv_a_layernorm.weight", {R});
        add("kv_b_proj.weight", {H * (Dn + Dv), R}, true);
        add("o_proj.weight", {D, H * Dv}, true);
        if (c.output_gate == DsaOutputGate::elementwise) add("linear_gate.weight", {H * Dv, D});
        if (c.output_gate == DsaOutputGate::headwise) add("linear_gate.weight", {H, D});
        if (c.has_attention_sink) add("learnable_sink_param", {H});
        out.caches.push_back({"latent_kv", latent_format, latent_entry, 1, 0});
        if (full) {
            add("indexer.wq_b.weight", {Hi * Di, Rq}, true);
            add("indexer.wk.weight", {Di, D}, true);
            add("indexer.k_norm.weight", {Di});
            add("indexer.k_norm.bias", {Di});
            add("indexer.weights_proj.weight", {Hi, D});
            out.caches.push_back({"indexer_keys", cache_format_text(records.keys), records.keys.entry_bytes(), 1, 0});
        }
        layout.layers.push_back(std::move(out));
    }
    // Dense MLA over the same latent cache (absorbed attention reads the same entries).
    layout.dense_cache_bytes_per_token = static_cast<double>(latent_entry) * static_cast<double>(c.layers.size());
    return layout;
}

}  // namespace sieve
