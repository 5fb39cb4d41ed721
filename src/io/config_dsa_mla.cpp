// deepseek_v32 / hy_v4 config.json → DsaMlaConfig (specs/dsa_mla.md "Decisions for sieve", §1–§2).
#include <algorithm>
#include <cmath>
#include <optional>
#include <string>
#include <vector>

#include <fmt/ranges.h>

#include "io/config_parsers.h"

namespace sieve {

const char* dsa_mla_model_name(DsaMlaModel model) {
    switch (model) {
        case DsaMlaModel::deepseek_v32: return "deepseek_v32";
        case DsaMlaModel::hy_v4: return "hy_v4";
    }
    return "?";
}

const char* dsa_layer_kind_name(DsaLayerKind kind) {
    switch (kind) {
        case DsaLayerKind::full: return "full";
        case DsaLayerKind::shared: return "shared";
    }
    return "?";
}

const char* dsa_output_gate_name(DsaOutputGate gate) {
    switch (gate) {
        case DsaOutputGate::none: return "none";
        case DsaOutputGate::elementwise: return "elementwise";
        case DsaOutputGate::headwise: return "headwise";
    }
    return "?";
}

namespace {

// Sparse (DSA) layer types: vLLM's _SPARSE_LAYER_TYPES (dsa_mla.md §1.2, §1.3), plus
// "indexed_attention", the name some transformers versions write for the same layers.
constexpr const char* kSparseLayerTypes[] = {"deepseek_sparse_attention", "sparse_attention", "sparse",
                                             "indexed_attention"};

Status check_layer_types(const ConfigObject& cfg, const DsaMlaConfig& c) {
    std::optional<std::vector<std::string>> types;
    SIEVE_RETURN_IF_ERROR(cfg.read_optional_string_list("layer_types", &types));
    if (!types) return Status::ok();  // every layer is DSA (§1.1, §1.2)
    if (static_cast<int64_t>(types->size()) != c.num_hidden_layers)
        return cfg.field_error(StatusCode::invalid_argument, "layer_types", "{} entries, expected num_hidden_layers = {}",
                               types->size(), c.num_hidden_layers);
    for (size_t i = 0; i < types->size(); ++i) {
        const std::string& type = (*types)[i];
        if (std::find(std::begin(kSparseLayerTypes), std::end(kSparseLayerTypes), type) == std::end(kSparseLayerTypes))
            return cfg.field_error(StatusCode::unsupported, fmt::format("layer_types[{}]", i),
                                   "\"{}\" is not a sparse attention layer; sieve runs {} layers only as DSA "
                                   "(accepted: {})",
                                   type, dsa_mla_model_name(c.model), fmt::join(std::begin(kSparseLayerTypes), std::end(kSparseLayerTypes), ", "));
    }
    return Status::ok();
}

// Which layers are shared: `indexer_types` when present, else vLLM's compute_skip_topk_layers rule
// over index_topk_freq / index_skip_topk_offset / index_topk_pattern (dsa_mla.md §1.3).
Status read_shared_layers(const ConfigObject& cfg, int64_t n, std::vector<bool>* shared) {
    shared->assign(static_cast<size_t>(n), false);
    std::optional<std::vector<std::string>> indexer_types;
    SIEVE_RETURN_IF_ERROR(cfg.read_optional_string_list("indexer_types", &indexer_types));
    if (indexer_types) {
        if (static_cast<int64_t>(indexer_types->size()) != n)
            return cfg.field_error(StatusCode::invalid_argument, "indexer_types",
                                   "{} entries, expected num_hidden_layers = {}", indexer_types->size(), n);
        for (size_t i = 0; i < indexer_types->size(); ++i) {
            const std::string& type = (*indexer_types)[i];
            if (type != "full" && type != "shared")
                return cfg.field_error(StatusCode::invalid_argument, fmt::format("indexer_types[{}]", i),
                                       "\"{}\", expected \"full\" or \"shared\"", type);
            (*shared)[i] = type == "shared";
        }
        return Status::ok();
    }
    int64_t freq = 1;
    int64_t offset = 2;
    std::optional<std::string> pattern;
    SIEVE_RETURN_IF_ERROR(cfg.read_int_or("index_topk_freq", 1, kConfigPositive, &freq));
    SIEVE_RETURN_IF_ERROR(cfg.read_int_or("index_skip_topk_offset", 2, kConfigSigned, &offset));
    SIEVE_RETURN_IF_ERROR(cfg.read_optional_string("index_topk_pattern", &pattern));
    for (int64_t i = 0; i < n; ++i) {
        if (pattern) {
            // "S" at position i = shared; positions past the pattern's end are full.
            (*shared)[static_cast<size_t>(i)] = i < static_cast<int64_t>(pattern->size()) && (*pattern)[i] == 'S';
        } else {
            (*shared)[static_cast<size_t>(i)] = std::max<int64_t>(i - offset + 1, 0) % freq != 0;
        }
    }
    return Status::ok();
}

// Assigns each layer its top-k source; a shared layer needs a full layer before it (§1.3, §7.9).
Status assign_topk_sources(const ConfigObject& cfg, const std::vector<bool>& shared, DsaMlaConfig& c) {
    c.layers.assign(shared.size(), DsaMlaLayer{});
    int64_t last_full = -1;
    for (size_t i = 0; i < shared.size(); ++i) {
        const auto layer = static_cast<int64_t>(i);
        if (!shared[i]) {
            c.layers[i] = {DsaLayerKind::full, layer};
            last_full = layer;
            continue;
        }
        if (last_full < 0) {
            if (cfg.has("indexer_types"))
                return cfg.field_error(StatusCode::invalid_argument, fmt::format("indexer_types[{}]", i),
                                       "\"shared\", but no earlier layer is \"full\": a shared layer reuses the "
                                       "top-k of the nearest preceding full layer (dsa_mla.md §1.3)");
            return cfg.error(StatusCode::invalid_argument,
                             "layer {} is shared by the index_topk_freq / index_skip_topk_offset / "
                             "index_topk_pattern rule, but no earlier layer is full: a shared layer reuses the top-k "
                             "of the nearest preceding full layer (dsa_mla.md §1.3)",
                             layer);
        }
        c.layers[i] = {DsaLayerKind::shared, last_full};
    }
    return Status::ok();
}

Status read_rope(const ConfigObject& cfg, DsaMlaConfig& c) {
    RopeConfig rope;
    rope.rotated_dims = c.qk_rope_head_dim;
    std::optional<ConfigObject> section;
    SIEVE_RETURN_IF_ERROR(cfg.read_optional_object("rope_parameters", &section));
    if (!section) SIEVE_RETURN_IF_ERROR(cfg.read_optional_object("rope_scaling", &section));  // legacy layout
    SIEVE_RETURN_IF_ERROR(read_rope_theta(section ? &*section : nullptr, cfg, "rope_theta", &rope.theta));
    if (section)
        SIEVE_RETURN_IF_ERROR(parse_rope_scaling(*section, c.max_position_embeddings, std::nullopt, &rope.yarn));

    // §2.2: the MLA slice is interleaved on the last Dr dims for both models; the indexer slice is
    // NeoX on the first Dr dims for deepseek_v32, interleaved on the last Dr dims for hy_v4.
    SIEVE_RETURN_IF_ERROR(check_rope_yarn_range(cfg, "RoPE table", rope));
    c.rope_mla = rope;
    c.rope_mla.slice = RopeConfigSlice::last;
    c.rope_mla.pairing = RopeConfigPairing::interleaved;
    c.rope_indexer = rope;
    c.rope_indexer.slice = c.model == DsaMlaModel::deepseek_v32 ? RopeConfigSlice::first : RopeConfigSlice::last;
    c.rope_indexer.pairing = c.model == DsaMlaModel::deepseek_v32 ? RopeConfigPairing::neox : RopeConfigPairing::interleaved;
    return Status::ok();
}

// hy_v4's gate and sink flags (dsa_mla.md §1.2: gated_mla / gating_type, learnable_sink).
Status read_gate_and_sink(const ConfigObject& cfg, DsaMlaConfig& c) {
    if (c.model == DsaMlaModel::deepseek_v32) {
        c.output_gate = DsaOutputGate::none;
        c.has_attention_sink = false;
        return Status::ok();
    }
    bool gated = true;
    SIEVE_RETURN_IF_ERROR(cfg.read_bool_or("gated_mla", true, &gated));
    std::string gating_type = "elementwise";
    if (cfg.has("gating_type")) SIEVE_RETURN_IF_ERROR(cfg.read_string("gating_type", &gating_type));
    if (!gated) {
        c.output_gate = DsaOutputGate::none;
    } else if (gating_type == "elementwise") {
        c.output_gate = DsaOutputGate::elementwise;
    } else if (gating_type == "headwise") {
        c.output_gate = DsaOutputGate::headwise;
    } else {
        return cfg.field_error(StatusCode::invalid_argument, "gating_type",
                               "\"{}\", expected \"elementwise\" or \"headwise\"", gating_type);
    }
    SIEVE_RETURN_IF_ERROR(cfg.read_bool_or("learnable_sink", true, &c.has_attention_sink));
    return Status::ok();
}

}  // namespace

Expected<DsaMlaConfig> parse_dsa_mla_config(const ConfigObject& cfg, DsaMlaModel model) {
    DsaMlaConfig c;
    c.model = model;
    SIEVE_RETURN_IF_ERROR(cfg.read_int("hidden_size", kConfigPositive, &c.hidden_size));
    SIEVE_RETURN_IF_ERROR(cfg.read_int("num_hidden_layers", kConfigLayerCount, &c.num_hidden_layers));
    SIEVE_RETURN_IF_ERROR(cfg.read_int("num_attention_heads", kConfigPositive, &c.num_attention_heads));
    SIEVE_RETURN_IF_ERROR(cfg.read_int("q_lora_rank", kConfigPositive, &c.q_lora_rank));
    SIEVE_RETURN_IF_ERROR(cfg.read_int("kv_lora_rank", kConfigPositive, &c.kv_lora_rank));
    SIEVE_RETURN_IF_ERROR(cfg.read_int("qk_nope_head_dim", kConfigPositive, &c.qk_nope_head_dim));
    SIEVE_RETURN_IF_ERROR(cfg.read_int("qk_rope_head_dim", kConfigPositive, &c.qk_rope_head_dim));
    SIEVE_RETURN_IF_ERROR(cfg.read_int("v_head_dim", kConfigPositive, &c.v_head_dim));
    SIEVE_RETURN_IF_ERROR(cfg.read_int("index_n_heads", kConfigPositive, &c.index_n_heads));
    SIEVE_RETURN_IF_ERROR(cfg.read_int("index_head_dim", kConfigPositive, &c.index_head_dim));
    SIEVE_RETURN_IF_ERROR(cfg.read_int("index_topk", kConfigPositive, &c.index_topk));
    SIEVE_RETURN_IF_ERROR(cfg.read_int("max_position_embeddings", kConfigPositive, &c.max_position_embeddings));
    // Absent: no MTP layer is described.
    SIEVE_RETURN_IF_ERROR(
        cfg.read_int_or("num_nextn_predict_layers", 0, kConfigExtraLayerCount, &c.num_nextn_predict_layers));
    SIEVE_RETURN_IF_ERROR(cfg.read_real("rms_norm_eps", kConfigPositiveReal, &c.rms_norm_eps));

    if (c.qk_rope_head_dim % 2 != 0)
        return cfg.field_error(StatusCode::invalid_argument, "qk_rope_head_dim",
                               "{} must be even (RoPE rotates pairs)", c.qk_rope_head_dim);
    if (c.qk_rope_head_dim > c.index_head_dim)
        return cfg.error(StatusCode::invalid_argument,
                         "field \"qk_rope_head_dim\" = {} exceeds field \"index_head_dim\" = {}: the indexer rotates "
                         "{} of its {} dims with the same table (dsa_mla.md §2.2)",
                         c.qk_rope_head_dim, c.index_head_dim, c.qk_rope_head_dim, c.index_head_dim);
    SIEVE_RETURN_IF_ERROR(cfg.check_within_context("index_topk", c.index_topk, c.max_position_embeddings,
                                                   "a token selects among its causal positions (dsa_mla.md §2.7)"));
    SIEVE_RETURN_IF_ERROR(check_layer_types(cfg, c));

    // deepseek_v32: every layer has its own indexer (§1.1); hy_v4: the shared-top-k schedule (§1.3).
    std::vector<bool> shared(static_cast<size_t>(c.num_hidden_layers), false);
    if (model == DsaMlaModel::hy_v4) SIEVE_RETURN_IF_ERROR(read_shared_layers(cfg, c.num_hidden_layers, &shared));
    SIEVE_RETURN_IF_ERROR(assign_topk_sources(cfg, shared, c));
    c.mtp_layers.resize(static_cast<size_t>(c.num_nextn_predict_layers));
    for (int64_t j = 0; j < c.num_nextn_predict_layers; ++j)
        c.mtp_layers[static_cast<size_t>(j)] = {DsaLayerKind::full, c.num_hidden_layers + j};

    SIEVE_RETURN_IF_ERROR(read_rope(cfg, c));
    SIEVE_RETURN_IF_ERROR(read_gate_and_sink(cfg, c));

    c.qk_head_dim = c.qk_nope_head_dim + c.qk_rope_head_dim;
    c.kv_cache_dim = c.kv_lora_rank + c.qk_rope_head_dim;
    double m = 1.0;
    if (c.rope_mla.yarn && c.rope_mla.yarn->mscale_all_dim.value_or(0.0) != 0.0)
        m = config_yarn_mscale(c.rope_mla.yarn->factor, *c.rope_mla.yarn->mscale_all_dim);  // §2.3
    c.softmax_scale = m * m / std::sqrt(static_cast<double>(c.qk_head_dim));
    if (!(c.softmax_scale > 0.0) || !std::isfinite(c.softmax_scale))
        return cfg.error(StatusCode::invalid_argument,
                         "softmax scale qk_head_dim^-0.5 · m² = {}^-0.5 · {}² = {} (m from YaRN factor {} and "
                         "mscale_all_dim {}), must be > 0",
                         c.qk_head_dim, m, c.softmax_scale, c.rope_mla.yarn->factor,
                         c.rope_mla.yarn->mscale_all_dim.value_or(0.0));
    // "Decisions for sieve": transformers' V3.2 fixes the latent norms at 1e-6; hy_v4 follows vLLM.
    c.latent_norm_eps = model == DsaMlaModel::deepseek_v32 ? 1e-6 : c.rms_norm_eps;
    c.indexer_key_norm_eps = 1e-6;  // "Decisions for sieve": k_norm LayerNorm eps 1e-6 for both
    c.indexer_softmax_scale = 1.0 / std::sqrt(static_cast<double>(c.index_head_dim));
    c.indexer_head_weight_scale = 1.0 / std::sqrt(static_cast<double>(c.index_n_heads));
    return c;
}

}  // namespace sieve
