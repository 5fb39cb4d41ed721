// QSA (Qwen3.8-Flash-Next) as a registered model family (models/family.h).
#include <algorithm>

#include "sieve/models/family.h"
#include "models/qsa/layout.h"
#include "models/qsa/model.h"
#include "models/refused_options.h"

namespace sieve {

namespace {

const QsaConfig& qsa(const ModelConfig& config) { return *config.qsa(); }

Expected<std::unique_ptr<AttentionModel>> load(const ModelConfig& config, const Checkpoint& checkpoint,
                                               const ModelOptions& options) {
    SIEVE_RETURN_IF_ERROR(refuse_state_block_size(config.model_type, options));
    SIEVE_RETURN_IF_ERROR(refuse_cache_block_size(config.model_type, options));
    SIEVE_ASSIGN_OR_RETURN(auto model, QsaModel::load(config, checkpoint, options));
    return std::unique_ptr<AttentionModel>(std::move(model));
}

AttentionLayout layout(const ModelConfig& config, NumericsProfile profile) {
    return qsa_attention_layout(qsa(config), profile);
}

Expected<int64_t> topk_tokens_per_index(const ModelConfig&, int64_t) { return 1; }  // token positions

int64_t round_up(int64_t x, int64_t m) { return (x + m - 1) / m * m; }

// The first QSA layer; dense: a token budget covering the longest context, in whole groups, within what
// the config may hold.
Expected<BenchPlan> bench_plan(const ModelConfig& config, int64_t max_tokens) {
    const QsaConfig& c = qsa(config);
    BenchPlan plan;
    for (size_t l = 0; l < c.layers.size(); ++l)
        if (c.layers[l] == QsaLayerKind::qsa) {
            plan.layers = {static_cast<int64_t>(l)};
            break;
        }
    const int64_t ratio = c.indexer_compress_ratio;
    plan.dense_field = "indexer_budget";
    plan.dense_value = std::min(round_up(max_tokens + 1, ratio), c.max_position_embeddings / ratio * ratio);
    return plan;
}

// q|gate, k, v and the index q|k projection run as one linear (layer.cpp).
std::vector<WeightShare> weight_stages(const ModelConfig&, std::string_view name) {
    if (name.find("o_proj") != std::string_view::npos) return {{Stage::output, 1.0}};
    return {{Stage::projections, 1.0}};
}

// The selected token rows (output_width, all visible ones for the dense variant); the indexer scores
// every completed group once the context is wider than the budget (qsa.md §4.4–§4.6).
TokenWork token_work(const ModelConfig& config, const AttentionLayerLayout& layer, int64_t p, bool dense) {
    const QsaConfig& c = qsa(config);
    TokenWork w;
    const double visible = static_cast<double>(p + 1);
    w.rows = dense ? visible : std::min(visible, static_cast<double>(c.output_width));
    w.row_bytes = layout_entry_bytes(layer, "kv");
    w.flops_per_row = 2.0 * static_cast<double>(c.num_attention_heads) * 2.0 * static_cast<double>(c.head_dim);
    if (!dense && visible > static_cast<double>(c.output_width)) {
        w.candidates = static_cast<double>((p + 1) / c.indexer_compress_ratio);
        w.index_flops_per_candidate = 2.0 * static_cast<double>(c.indexer_n_heads * c.indexer_head_dim);
    }
    return w;
}

double request_key_bytes(const ModelConfig& config, const AttentionLayerLayout& layer, int64_t end, bool dense) {
    const QsaConfig& c = qsa(config);
    if (dense || end <= c.output_width) return 0;
    return static_cast<double>(end / c.indexer_compress_ratio) * layout_entry_bytes(layer, "compressed_keys");
}

constexpr std::string_view kModelTypes[] = {"qwen4_exp", "qwen4_exp_text"};

}  // namespace

extern const ModelFamily kQsaFamily = {
    "qsa",         kModelTypes, {0.15, 0.97}, load, layout, topk_tokens_per_index, bench_plan,
    weight_stages, token_work,  request_key_bytes,
};

}  // namespace sieve
