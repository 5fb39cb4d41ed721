// DSA on MLA (DeepSeek-V3.2, Tencent Hy4) as a registered model family (models/family.h).
#include <algorithm>

#include "models/dsa_mla/layout.h"
#include "models/dsa_mla/model.h"
#include "sieve/models/family.h"

namespace sieve {

namespace {

const DsaMlaConfig& dsa(const ModelConfig& config) { return *config.dsa_mla(); }

AttentionLayout layout(const ModelConfig& config, NumericsProfile profile) {
    return dsa_mla_attention_layout(dsa(config), profile);
}

Expected<int64_t> topk_tokens_per_index(const ModelConfig&, int64_t) { return 1; }  // token positions

// A shared layer with its source layer (which must run first in the step), else the first layer; dense:
// a top-k as wide as the longest context.
Expected<BenchPlan> bench_plan(const ModelConfig& config, int64_t max_tokens) {
    const DsaMlaConfig& c = dsa(config);
    BenchPlan plan;
    for (size_t l = 0; l < c.layers.size() && plan.layers.empty(); ++l)
        if (c.layers[l].kind == DsaLayerKind::shared)
            plan.layers = {c.layers[l].topk_source_layer, static_cast<int64_t>(l)};
    if (plan.layers.empty()) plan.layers = {0};
    plan.dense_field = "index_topk";
    plan.dense_value = std::min(max_tokens + 1, c.max_position_embeddings);
    return plan;
}

bool contains(std::string_view s, std::string_view part) { return s.find(part) != std::string_view::npos; }

// forward.cpp's stages; kv_b_proj [H·(Dn + Dv), R] is W_UK (with the projections) and W_UV (after
// attention) by rows.
std::vector<WeightShare> weight_stages(const ModelConfig& config, std::string_view name) {
    if (contains(name, "kv_b_proj")) {
        const DsaMlaConfig& c = dsa(config);
        const double uk = static_cast<double>(c.qk_nope_head_dim) /
                          static_cast<double>(c.qk_nope_head_dim + c.v_head_dim);
        return {{Stage::projections, uk}, {Stage::attention, 1 - uk}};
    }
    if (contains(name, "indexer")) return {{Stage::indexer, 1.0}};
    if (contains(name, "o_proj") || contains(name, "gate")) return {{Stage::output, 1.0}};
    return {{Stage::projections, 1.0}};
}

// The top-k latent rows (all visible ones for the dense variant); a full layer scores every position
// once there are more than index_topk (dsa_mla.md §2.7).
TokenWork token_work(const ModelConfig& config, const AttentionLayerLayout& layer, int64_t p, bool dense) {
    const DsaMlaConfig& c = dsa(config);
    TokenWork w;
    const double visible = static_cast<double>(p + 1);
    w.rows = dense ? visible : std::min(visible, static_cast<double>(c.index_topk));
    w.row_bytes = layout_entry_bytes(layer, "latent_kv");
    w.flops_per_row =
        2.0 * static_cast<double>(c.num_attention_heads) * static_cast<double>(c.kv_cache_dim + c.kv_lora_rank);
    if (layer.kind == "dsa_full" && !dense && visible > static_cast<double>(c.index_topk)) {
        w.candidates = visible;
        w.index_flops_per_candidate = 2.0 * static_cast<double>(c.index_n_heads * c.index_head_dim);
    }
    return w;
}

double request_key_bytes(const ModelConfig& config, const AttentionLayerLayout& layer, int64_t end, bool dense) {
    const DsaMlaConfig& c = dsa(config);
    if (layer.kind != "dsa_full" || dense || end <= c.index_topk) return 0;
    return static_cast<double>(end) * layout_entry_bytes(layer, "indexer_keys");
}

constexpr std::string_view kModelTypes[] = {"deepseek_v32", "hy_v4"};

}  // namespace

extern const ModelFamily kDsaMlaFamily = {
    "dsa_mla",     kModelTypes, {0.35, 0.0}, load_dsa_mla_model, layout, topk_tokens_per_index, bench_plan,
    weight_stages, token_work,  request_key_bytes,
};

}  // namespace sieve
