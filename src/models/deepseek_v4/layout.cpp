// DeepSeek-V4 attention tensors (specs/deepseek_v4.md §6) and caches (§4).
#include <fmt/format.h>

#include "models/deepseek_v4/layout.h"

namespace sieve {

DeepseekV4CacheLayouts deepseek_v4_cache_layouts(const DeepseekV4Config& c, NumericsProfile profile) {
    const bool exact = profile == NumericsProfile::exact;
    // exact: f32 rows (§3.10); deployed: the 584-byte record (§4.1) and 132-byte FP8 indexer keys (§4.3).
    return {{exact ? CacheRecordFormat::f32 : CacheRecordFormat::fp8_model1, c.head_dim, c.rope_head_dim},
            {exact ? CacheRecordFormat::f32 : CacheRecordFormat::fp8_row_scale, c.index_head_dim, 0}};
}

std::string deepseek_v4_attention_prefix(const DeepseekV4Config& c, int64_t layer) {
    const int64_t n = static_cast<int64_t>(c.layers.size());
    return layer < n ? fmt::format("layers.{}.attn", layer) : fmt::format("mtp.{}.attn", layer - n);
}

AttentionLayout deepseek_v4_attention_layout(const DeepseekV4Config& c, NumericsProfile profile) {
    const int64_t D = c.hidden_size, H = c.num_attention_heads, d = c.head_dim;
    const int64_t G = c.o_groups, Ro = c.o_lora_rank, Rq = c.q_lora_rank;
    const int64_t HI = c.index_n_heads, cI = c.index_head_dim;
    const DeepseekV4CacheLayouts records = deepseek_v4_cache_layouts(c, profile);
    const int64_t kv_entry = records.kv.entry_bytes();
    const std::string kv_format = cache_format_text(records.kv);

    AttentionLayout layout;
    for (int64_t i = 0; i < c.n_layers_with_mtp(); ++i) {
        const DeepseekV4Layer& l = c.layer(i);
        AttentionLayerLayout out;
        out.layer = i;
        out.kind = deepseek_v4_layer_kind_name(l.kind);
        out.mtp = c.is_mtp_layer(i);
        const std::string p = deepseek_v4_attention_prefix(c, i) + ".";
        auto add = [&](std::string leaf, Shape shape, bool fp8 = false) {
            out.tensors.push_back({p + leaf, std::move(shape), fp8});
        };
        add("attn_sink", {H});
        add("wq_a.weight", {Rq, D}, true);
        add("q_norm.weight", {Rq});
        add("wq_b.weight", {H * d, Rq}, true);
        add("wkv.weight", {d, D}, true);
        add("kv_norm.weight", {d});
        add("wo_a.weight", {G * Ro, H / G * d}, true);
        add("wo_b.weight", {D, G * Ro}, true);
        out.caches.push_back({"swa_kv", kv_format, kv_entry, 1, c.sliding_window});
        if (l.kind != DeepseekV4LayerKind::swa) {
            const int64_t m = l.compress_ratio, coff = l.compressor_overlap ? 2 : 1;
            add("compressor.ape", {m, coff * d});
            add("compressor.wkv.weight", {coff * d, D});
            add("compressor.wgate.weight", {coff * d, D});
            add("compressor.norm.weight", {d});
            out.caches.push_back({"compressed_kv", kv_format, kv_entry, m, 0});
            // [a_s | b_s + ape] fp32 rows of the unfinished block (and, overlapping, the previous
            // one) in both profiles (§3.4, §4.4).
            out.caches.push_back({"compressor_state", fmt::format("f32 [{}]", 2 * coff * d), 2 * coff * d * 4, 1, coff * m});
            out.detail = fmt::format("compress ratio {}", m);
        }
        if (l.has_indexer) {
            add("indexer.wq_b.weight", {HI * cI, Rq}, true);
            add("indexer.weights_proj.weight", {HI, D});
            add("indexer.compressor.ape", {l.compress_ratio, 2 * cI});
            add("indexer.compressor.wkv.weight", {2 * cI, D});
            add("indexer.compressor.wgate.weight", {2 * cI, D});
            add("indexer.compressor.norm.weight", {cI});
            out.caches.push_back({"indexer_keys", cache_format_text(records.keys), records.keys.entry_bytes(),
                                  l.compress_ratio, 0});
            out.caches.push_back({"indexer_compressor_state", fmt::format("f32 [{}]", 4 * cI), 4 * cI * 4, 1,
                                  2 * l.compress_ratio});
            out.detail += fmt::format(", indexer top-{}", c.index_topk);
        }
        if (l.kind == DeepseekV4LayerKind::swa) out.detail = fmt::format("window {}", c.sliding_window);
        if (out.mtp) out.detail = "MTP layer, " + out.detail;
        layout.layers.push_back(std::move(out));
    }
    // Dense MQA over the same shared K=V vector per token, one per layer.
    layout.dense_cache_bytes_per_token = static_cast<double>(kv_entry) * static_cast<double>(c.layers.size());
    return layout;
}

}  // namespace sieve
