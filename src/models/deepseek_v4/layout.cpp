// DeepSeek-V4 attention tensors (specs/deepseek_v4.md §6) and caches (§4).
#include <fmt/format.h>

#include "models/attention_layout.h"

namespace sieve {

namespace {

// fp8_ds_mla record (§4.1): fp8 nope dims, bf16 rope dims, one UE8M0 byte per 64 nope dims padded
// to 8 bytes (584 B for d = 512, r = 64).
int64_t fp8_ds_mla_record_bytes(int64_t head_dim, int64_t rope_dim) {
    const int64_t nope = head_dim - rope_dim;
    const int64_t scale_bytes = (nope + 63) / 64;
    return nope + 2 * rope_dim + (scale_bytes + 7) / 8 * 8;
}

}  // namespace

AttentionLayout deepseek_v4_attention_layout(const DeepseekV4Config& c, NumericsProfile profile) {
    const bool exact = profile == NumericsProfile::exact;
    const int64_t D = c.hidden_size, H = c.num_attention_heads, d = c.head_dim;
    const int64_t G = c.o_groups, Ro = c.o_lora_rank, Rq = c.q_lora_rank;
    const int64_t HI = c.index_n_heads, cI = c.index_head_dim;
    const int64_t kv_entry = exact ? d * 4 : fp8_ds_mla_record_bytes(d, c.rope_head_dim);
    const std::string kv_format = exact ? fmt::format("f32 [{}]", d) : "fp8_ds_mla record";

    AttentionLayout layout;
    for (size_t i = 0; i < c.layers.size(); ++i) {
        const DeepseekV4Layer& l = c.layers[i];
        AttentionLayerLayout out;
        out.layer = static_cast<int64_t>(i);
        out.kind = deepseek_v4_layer_kind_name(l.kind);
        const std::string p = fmt::format("layers.{}.attn.", i);
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
            // Indexer keys: exact f32; deployed 128 fp8 + one fp32 scale (§4.3).
            out.caches.push_back({"indexer_keys", exact ? fmt::format("f32 [{}]", cI) : "fp8 + f32 scale",
                                  exact ? cI * 4 : cI + 4, l.compress_ratio, 0});
            out.caches.push_back({"indexer_compressor_state", fmt::format("f32 [{}]", 4 * cI), 4 * cI * 4, 1,
                                  2 * l.compress_ratio});
            out.detail += fmt::format(", indexer top-{}", c.index_topk);
        }
        if (l.kind == DeepseekV4LayerKind::swa) out.detail = fmt::format("window {}", c.sliding_window);
        layout.layers.push_back(std::move(out));
    }
    // Dense MQA over the same shared K=V vector per token, one per layer.
    layout.dense_cache_bytes_per_token = static_cast<double>(kv_entry) * static_cast<double>(c.layers.size());
    return layout;
}

}  // namespace sieve
