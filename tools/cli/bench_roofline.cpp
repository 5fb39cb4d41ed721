#include "bench_roofline.h"

#include <algorithm>
#include <string>
#include <string_view>

namespace sieve::cli {

namespace {

StageWork& at(StepWork& w, Stage s) { return w[static_cast<size_t>(s)]; }

bool contains(std::string_view s, std::string_view part) { return s.find(part) != std::string_view::npos; }

// Stored bytes of a weight and of its FP8 block scales, if any (io/weights.h names both siblings).
double stored_bytes(const Checkpoint& checkpoint, const AttentionTensor& t) {
    double bytes = 0;
    if (auto v = checkpoint.find(t.name)) {
        bytes += static_cast<double>(v->bytes.size());
    } else {
        int64_t n = 1;
        for (int64_t d : t.shape) n *= d;
        bytes += 2.0 * static_cast<double>(n);  // not stored under its canonical name: count it as bf16
    }
    const std::string_view name = t.name;
    if (name.size() > 7 && name.substr(name.size() - 7) == ".weight") {
        const std::string base(name.substr(0, name.size() - 7));
        for (const char* suffix : {".scale", ".weight_scale_inv"})
            if (auto s = checkpoint.find(base + suffix)) bytes += static_cast<double>(s->bytes.size());
    }
    return bytes;
}

// The stage whose timer runs a weight, by family (models/<family>/ forward code).
Stage weight_stage(const ModelConfig& config, std::string_view name) {
    if (config.deepseek_v4()) {
        if (contains(name, "compressor")) return Stage::compressor;
        if (contains(name, "indexer")) return Stage::indexer;
        if (contains(name, "wo_a") || contains(name, "wo_b")) return Stage::output;
        return Stage::projections;
    }
    if (config.dsa_mla()) {
        if (contains(name, "indexer")) return Stage::indexer;
        if (contains(name, "o_proj") || contains(name, "gate")) return Stage::output;
        return Stage::projections;  // kv_b_proj is split between projections (W_UK) and attention (W_UV) below
    }
    if (contains(name, "o_proj")) return Stage::output;
    return Stage::projections;  // QSA: q|gate, k, v and the index q|k projection run as one linear
}

const CacheSpec* find_cache(const AttentionLayerLayout& layer, std::string_view name) {
    for (const CacheSpec& c : layer.caches)
        if (c.name == name) return &c;
    return nullptr;
}

double entry_bytes(const AttentionLayerLayout& layer, std::string_view name) {
    const CacheSpec* c = find_cache(layer, name);
    return c ? static_cast<double>(c->entry_bytes) : 0.0;
}

}  // namespace

Expected<StepWork> layer_step_work(const ModelConfig& config, const AttentionLayerLayout& layer,
                                   const Checkpoint& checkpoint, const std::vector<StepRequestShape>& step, bool dense) {
    StepWork w{};
    int64_t n_tokens = 0;
    for (const StepRequestShape& r : step) n_tokens += r.n_tokens;
    const double N = static_cast<double>(n_tokens);

    // Weights: stored bytes once per step, 2 flops per weight element and token.
    const DsaMlaConfig* dsa = config.dsa_mla();
    for (const AttentionTensor& t : layer.tensors) {
        if (t.shape.size() != 2) continue;  // norms, sinks, biases: negligible
        const double elements = static_cast<double>(t.shape[0]) * static_cast<double>(t.shape[1]);
        const double bytes = stored_bytes(checkpoint, t);
        if (dsa && contains(t.name, "kv_b_proj")) {
            // [H·(Dn + Dv), R]: the W_UK rows run with the projections, the W_UV rows after attention.
            const double uk = static_cast<double>(dsa->qk_nope_head_dim) /
                              static_cast<double>(dsa->qk_nope_head_dim + dsa->v_head_dim);
            at(w, Stage::projections).weight_bytes += uk * bytes;
            at(w, Stage::projections).weight_flops += 2 * uk * elements * N;
            at(w, Stage::attention).weight_bytes += (1 - uk) * bytes;
            at(w, Stage::attention).weight_flops += 2 * (1 - uk) * elements * N;
            continue;
        }
        const Stage stage = weight_stage(config, t.name);
        if (dense && stage == Stage::indexer) continue;  // the dense variant runs no indexer
        StageWork& s = at(w, stage);
        s.weight_bytes += bytes;
        s.weight_flops += 2 * elements * N;
    }
    for (StageWork& s : w) s.bytes = s.weight_bytes, s.flops = s.weight_flops;
    at(w, Stage::indexer).matrix_math = true;

    // Per-request cache streams.
    for (const StepRequestShape& r : step) {
        const int64_t end = r.start + r.n_tokens;
        for (int64_t p = r.start; p < end; ++p) {
            double rows = 0, row_bytes = 0, flops_per_row = 0;
            double candidates = 0, index_flops_per_candidate = 0;
            if (const DeepseekV4Config* c = config.deepseek_v4()) {
                const DeepseekV4Layer& l = c->layers[static_cast<size_t>(layer.layer)];
                const double window = static_cast<double>(std::min<int64_t>(c->sliding_window, p + 1));
                const double entries = l.compress_ratio ? static_cast<double>((p + 1) / l.compress_ratio) : 0.0;
                double selected = 0;
                if (l.kind == DeepseekV4LayerKind::hca || (l.kind == DeepseekV4LayerKind::csa && dense)) {
                    selected = entries;
                } else if (l.kind == DeepseekV4LayerKind::csa) {
                    selected = std::min(entries, static_cast<double>(c->index_topk));
                    if (entries > static_cast<double>(c->index_topk)) {  // else the unscored short-context path
                        candidates = entries;
                        index_flops_per_candidate = 2.0 * static_cast<double>(c->index_n_heads * c->index_head_dim);
                    }
                }
                rows = window + selected;
                row_bytes = entry_bytes(layer, "swa_kv");
                flops_per_row = 2.0 * static_cast<double>(c->num_attention_heads) * 2.0 * static_cast<double>(c->head_dim);
            } else if (dsa) {
                const double visible = static_cast<double>(p + 1);
                rows = dense ? visible : std::min(visible, static_cast<double>(dsa->index_topk));
                row_bytes = entry_bytes(layer, "latent_kv");
                flops_per_row = 2.0 * static_cast<double>(dsa->num_attention_heads) *
                                static_cast<double>(dsa->kv_cache_dim + dsa->kv_lora_rank);
                if (layer.kind == "dsa_full" && !dense && visible > static_cast<double>(dsa->index_topk)) {
                    candidates = visible;
                    index_flops_per_candidate = 2.0 * static_cast<double>(dsa->index_n_heads * dsa->index_head_dim);
                }
            } else if (const QsaConfig* q = config.qsa()) {
                const double visible = static_cast<double>(p + 1);
                rows = dense ? visible : std::min(visible, static_cast<double>(q->output_width));
                row_bytes = entry_bytes(layer, "kv");
                flops_per_row = 2.0 * static_cast<double>(q->num_attention_heads) * 2.0 * static_cast<double>(q->head_dim);
                if (!dense && visible > static_cast<double>(q->output_width)) {
                    candidates = static_cast<double>((p + 1) / q->indexer_compress_ratio);
                    index_flops_per_candidate = 2.0 * static_cast<double>(q->indexer_n_heads * q->indexer_head_dim);
                }
            }
            at(w, Stage::attention).bytes += rows * row_bytes;
            at(w, Stage::attention).flops += rows * flops_per_row;
            at(w, Stage::indexer).flops += candidates * index_flops_per_candidate;
            at(w, Stage::topk).bytes += 4.0 * candidates;
        }
        // Each request's indexer keys, read once for all its tokens.
        double keys = 0, key_bytes = 0;
        if (const DeepseekV4Config* c = config.deepseek_v4()) {
            const DeepseekV4Layer& l = c->layers[static_cast<size_t>(layer.layer)];
            if (l.kind == DeepseekV4LayerKind::csa && !dense && end / l.compress_ratio > c->index_topk) {
                keys = static_cast<double>(end / l.compress_ratio);
                key_bytes = entry_bytes(layer, "indexer_keys");
            }
        } else if (dsa) {
            if (layer.kind == "dsa_full" && !dense && end > dsa->index_topk) {
                keys = static_cast<double>(end);
                key_bytes = entry_bytes(layer, "indexer_keys");
            }
        } else if (const QsaConfig* q = config.qsa()) {
            if (!dense && end > q->output_width) {
                keys = static_cast<double>(end / q->indexer_compress_ratio);
                key_bytes = entry_bytes(layer, "compressed_keys");
            }
        }
        at(w, Stage::indexer).bytes += keys * key_bytes;
    }
    return w;
}

}  // namespace sieve::cli
