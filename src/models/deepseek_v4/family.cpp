// DeepSeek-V4 as a registered model family (models/family.h).
#include <algorithm>

#include "models/deepseek_v4/layout.h"
#include "models/deepseek_v4/model.h"
#include "models/refused_options.h"
#include "sieve/models/family.h"

namespace sieve {

namespace {

const DeepseekV4Config& v4(const ModelConfig& config) { return *config.deepseek_v4(); }

Expected<std::unique_ptr<AttentionModel>> load(const ModelConfig& config, const Checkpoint& checkpoint,
                                               const ModelOptions& options) {
    SIEVE_RETURN_IF_ERROR(refuse_cache_block_size(config.model_type, options));
    DeepseekV4Options o;
    o.profile = options.profile;
    o.backend = options.backend;
    o.layers = options.layers;
    o.state_block_size = options.state_block_size;
    return load_deepseek_v4_model(v4(config), checkpoint, o);
}

AttentionLayout layout(const ModelConfig& config, NumericsProfile profile) {
    return deepseek_v4_attention_layout(v4(config), profile);
}

// CSA layers select compressed entries: index k stands for tokens [k·m, k·m + m) (deepseek_v4.md §3.6).
Expected<int64_t> topk_tokens_per_index(const ModelConfig& config, int64_t layer) {
    const DeepseekV4Config& c = v4(config);
    if (layer < 0 || layer >= c.n_layers_with_mtp())
        return corrupt_error("layer {} is not a layer of the {}-layer model ({} MTP layers after them)", layer,
                             c.layers.size(), c.mtp_layers.size());
    const DeepseekV4Layer& l = c.layer(layer);
    if (!l.has_indexer)
        return corrupt_error("layer {} is a {} layer, which selects nothing (deepseek_v4.md §3)", layer,
                             deepseek_v4_layer_kind_name(l.kind));
    return l.compress_ratio;
}

// The first SWA-only, CSA and HCA layers; dense: as many entries as a token can see, within what the
// config may hold (index_topk ≤ max_position_embeddings, config validation).
Expected<BenchPlan> bench_plan(const ModelConfig& config, int64_t max_tokens) {
    const DeepseekV4Config& c = v4(config);
    BenchPlan plan;
    for (DeepseekV4LayerKind kind : {DeepseekV4LayerKind::swa, DeepseekV4LayerKind::csa, DeepseekV4LayerKind::hca})
        for (size_t l = 0; l < c.layers.size(); ++l)
            if (c.layers[l].kind == kind) {
                plan.layers.push_back(static_cast<int64_t>(l));
                break;
            }
    std::sort(plan.layers.begin(), plan.layers.end());
    plan.dense_field = "index_topk";
    plan.dense_value = std::min(max_tokens / 4 + 1, c.max_position_embeddings);
    return plan;
}

bool contains(std::string_view s, std::string_view part) { return s.find(part) != std::string_view::npos; }

// The stage whose timer runs a weight (layer.cpp, layer_compressor.cpp, layer_indexer.cpp).
std::vector<WeightShare> weight_stages(const ModelConfig&, std::string_view name) {
    if (contains(name, "compressor")) return {{Stage::compressor, 1.0}};
    if (contains(name, "indexer")) return {{Stage::indexer, 1.0}};
    if (contains(name, "wo_a") || contains(name, "wo_b")) return {{Stage::output, 1.0}};
    return {{Stage::projections, 1.0}};
}

// Window rows plus the compressed entries attended (all of them for HCA and the dense variant, the top-k
// for CSA, which scores every entry once there are more than index_topk: §3.6, §3.7).
TokenWork token_work(const ModelConfig& config, const AttentionLayerLayout& layer, int64_t p, bool dense) {
    const DeepseekV4Config& c = v4(config);
    const DeepseekV4Layer& l = c.layer(layer.layer);
    TokenWork w;
    const double window = static_cast<double>(std::min<int64_t>(c.sliding_window, p + 1));
    const double entries = l.compress_ratio ? static_cast<double>((p + 1) / l.compress_ratio) : 0.0;
    double selected = 0;
    if (l.kind == DeepseekV4LayerKind::hca || (l.kind == DeepseekV4LayerKind::csa && dense)) {
        selected = entries;
    } else if (l.kind == DeepseekV4LayerKind::csa) {
        selected = std::min(entries, static_cast<double>(c.index_topk));
        if (entries > static_cast<double>(c.index_topk)) {  // else the unscored short-context path
            w.candidates = entries;
            w.index_flops_per_candidate = 2.0 * static_cast<double>(c.index_n_heads * c.index_head_dim);
        }
    }
    w.rows = window + selected;
    w.row_bytes = layout_entry_bytes(layer, "swa_kv");
    w.flops_per_row = 2.0 * static_cast<double>(c.num_attention_heads) * 2.0 * static_cast<double>(c.head_dim);
    return w;
}

double request_key_bytes(const ModelConfig& config, const AttentionLayerLayout& layer, int64_t end, bool dense) {
    const DeepseekV4Config& c = v4(config);
    const DeepseekV4Layer& l = c.layer(layer.layer);
    if (l.kind != DeepseekV4LayerKind::csa || dense || end / l.compress_ratio <= c.index_topk) return 0;
    return static_cast<double>(end / l.compress_ratio) * layout_entry_bytes(layer, "indexer_keys");
}

constexpr std::string_view kModelTypes[] = {"deepseek_v4"};

}  // namespace

extern const ModelFamily kDeepseekV4Family = {
    "deepseek_v4",        kModelTypes,  {0.12, 0.85}, load, layout, topk_tokens_per_index, bench_plan,
    weight_stages,        token_work,   request_key_bytes,
};

}  // namespace sieve
