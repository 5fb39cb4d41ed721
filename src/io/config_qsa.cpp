// qwen4_exp(_text) config.json → QsaConfig (specs/qsa.md "Decisions for sieve", §2.1, §2.2).
#include <cmath>
#include <optional>
#include <string>
#include <vector>

#include <fmt/ranges.h>

#include "io/config_parsers.h"

namespace sieve {

const char* qsa_layer_kind_name(QsaLayerKind kind) {
    switch (kind) {
        case QsaLayerKind::qsa: return "qsa";
        case QsaLayerKind::linear_attention: return "linear_attention";
    }
    return "?";
}

namespace {

// layer_types, or without it: layer i is QSA iff (i + 1) % full_attention_interval == 0 (§2.1).
Status read_layers(const ConfigObject& cfg, QsaConfig& c) {
    std::optional<std::vector<std::string>> types;
    SIEVE_RETURN_IF_ERROR(cfg.read_optional_string_list("layer_types", &types));
    c.layers.clear();
    if (types) {
        if (static_cast<int64_t>(types->size()) != c.num_hidden_layers)
            return cfg.field_error(StatusCode::invalid_argument, "layer_types",
                                   "{} entries, expected num_hidden_layers = {}", types->size(), c.num_hidden_layers);
        for (size_t i = 0; i < types->size(); ++i) {
            const std::string& type = (*types)[i];
            if (type == "linear_attention") {
                c.layers.push_back(QsaLayerKind::linear_attention);
            } else if (type == "qwen_sparse_attention" || type == "full_attention") {
                // full_attention is the older name of the same layer: there is no dense layer type (§2.1).
                c.layers.push_back(QsaLayerKind::qsa);
            } else {
                return cfg.field_error(StatusCode::invalid_argument, fmt::format("layer_types[{}]", i),
                                       "unsupported Qwen4-Exp layer type \"{}\"; expected linear_attention, "
                                       "qwen_sparse_attention or full_attention",
                                       type);
            }
        }
    } else {
        int64_t interval = 4;
        SIEVE_RETURN_IF_ERROR(cfg.read_int_or("full_attention_interval", 4, kConfigPositive, &interval));
        for (int64_t i = 0; i < c.num_hidden_layers; ++i)
            c.layers.push_back((i + 1) % interval == 0 ? QsaLayerKind::qsa : QsaLayerKind::linear_attention);
    }
    c.num_qsa_layers = 0;
    for (QsaLayerKind kind : c.layers) c.num_qsa_layers += kind == QsaLayerKind::qsa ? 1 : 0;
    return Status::ok();
}

// The five indexer fields and their rules (§2.2).
Status read_indexer(const ConfigObject& cfg, QsaConfig& c) {
    struct Field {
        const char* key;
        int64_t* out;
    };
    const Field fields[] = {{"indexer_n_heads", &c.indexer_n_heads},
                            {"indexer_kv_heads", &c.indexer_kv_heads},
                            {"indexer_head_dim", &c.indexer_head_dim},
                            {"indexer_budget", &c.indexer_budget},
                            {"indexer_compress_ratio", &c.indexer_compress_ratio}};
    std::vector<std::string> given;
    std::vector<std::string> missing;
    for (const Field& f : fields) (cfg.has(f.key) ? given : missing).push_back(cfg.field_path(f.key));

    if (given.empty()) {
        c.has_indexer = false;
        if (c.num_qsa_layers == 0 && c.mtp_num_hidden_layers == 0) return Status::ok();
        std::vector<std::string> qsa_layers;  // the first few, for the message
        for (size_t i = 0; i < c.layers.size() && qsa_layers.size() <= 8; ++i)
            if (c.layers[i] == QsaLayerKind::qsa) qsa_layers.push_back(qsa_layers.size() < 8 ? std::to_string(i) : "...");
        return cfg.error(StatusCode::invalid_argument,
                         "the model has QSA layers ({} backbone: [{}], {} MTP) but none of the indexer fields {} is "
                         "given; a QSA layer cannot run without its indexer (qsa.md §2.1, §2.2)",
                         c.num_qsa_layers, fmt::join(qsa_layers, ", "), c.mtp_num_hidden_layers,
                         fmt::join(missing, ", "));
    }
    if (!missing.empty())
        return cfg.error(StatusCode::not_found,
                         "QSA config is missing required fields: {} (given: {}); the five indexer fields come "
                         "together (qsa.md §2.2)",
                         fmt::join(missing, ", "), fmt::join(given, ", "));
    for (const Field& f : fields) SIEVE_RETURN_IF_ERROR(cfg.read_int(f.key, kConfigPositive, f.out));
    c.has_indexer = true;
    SIEVE_RETURN_IF_ERROR(cfg.check_within_context("indexer_budget", c.indexer_budget, c.max_position_embeddings,
                                                   "a token selects among its causal positions (qsa.md §4.5, §4.6)"));
    if (c.indexer_kv_heads != 1)
        return cfg.field_error(StatusCode::invalid_argument, "indexer_kv_heads",
                               "{}; QSA's indexer has exactly one key head (qsa.md §2.2)", c.indexer_kv_heads);
    if (c.indexer_budget % c.indexer_compress_ratio != 0)
        return cfg.error(StatusCode::invalid_argument,
                         "field \"{}\" = {} is not divisible by field \"{}\" = {} (qsa.md §2.2)",
                         cfg.field_path("indexer_budget"), c.indexer_budget, cfg.field_path("indexer_compress_ratio"),
                         c.indexer_compress_ratio);
    // Not enforced: vLLM/SGLang's block_topk ∈ {512, 2048} (their kernels' limit, which "a C++ port can
    // relax") and SGLang's compress_ratio ≥ 2 (guards its DP padding rows), both §2.2.
    c.block_topk = c.indexer_budget / c.indexer_compress_ratio;
    c.output_width = c.indexer_budget + c.indexer_compress_ratio - 1;
    c.indexer_score_scale = 1.0 / std::sqrt(static_cast<double>(c.indexer_head_dim));
    return Status::ok();
}

// θ, partial_rotary_factor and mrope_section: inside rope_parameters in transformers 5.x
// configs, top-level keys in older ones (§2.1). Plain RoPE only.
Status read_rope(const ConfigObject& cfg, QsaConfig& c) {
    std::optional<ConfigObject> section;
    SIEVE_RETURN_IF_ERROR(cfg.read_optional_object("rope_parameters", &section));
    const ConfigObject& rope_keys = section ? *section : cfg;
    if (section) {
        const char* type_key = section->has("rope_type") ? "rope_type" : "type";
        std::optional<std::string> type;
        SIEVE_RETURN_IF_ERROR(section->read_optional_string(type_key, &type));
        if (type && *type != "default")
            return section->field_error(StatusCode::unsupported, type_key,
                                        "RoPE type \"{}\" is not supported for QSA; supported: default", *type);
    }
    if (cfg.has("rope_scaling"))
        return cfg.field_error(StatusCode::unsupported, "rope_scaling",
                               "RoPE scaling is not supported for QSA (plain RoPE only, qsa.md §4.1)");

    RopeConfig rope;
    SIEVE_RETURN_IF_ERROR(read_rope_theta(section ? &*section : nullptr, cfg, "rope_theta", &rope.theta));
    double factor = 1.0;  // absent: full rotary (§2.1)
    const ConfigObject& factor_keys = rope_keys.has("partial_rotary_factor") ? rope_keys : cfg;
    SIEVE_RETURN_IF_ERROR(
        factor_keys.read_real_or("partial_rotary_factor", 1.0, ConfigRealRange{0.0, true, 1.0}, &factor));
    // int(head_dim · factor) as transformers computes it.
    c.rotary_dim = static_cast<int64_t>(static_cast<double>(c.head_dim) * factor);
    if (c.rotary_dim < 2 || c.rotary_dim % 2 != 0)
        return factor_keys.field_error(StatusCode::invalid_argument, "partial_rotary_factor",
                                       "{} gives a rotary dim int(head_dim · factor) = int({} · {}) = {}, must be "
                                       "even and >= 2",
                                       factor, c.head_dim, factor, c.rotary_dim);
    if (c.has_indexer && c.rotary_dim > c.indexer_head_dim)
        return cfg.error(StatusCode::invalid_argument,
                         "rotary dim int(head_dim · partial_rotary_factor) = int({} · {}) = {} exceeds field \"{}\" = "
                         "{}: the indexer reuses the main rotary embedding on its query heads (qsa.md §2.2)",
                         c.head_dim, factor, c.rotary_dim, cfg.field_path("indexer_head_dim"), c.indexer_head_dim);

    std::optional<std::vector<int64_t>> sections;
    SIEVE_RETURN_IF_ERROR(rope_keys.read_optional_int_list("mrope_section", kConfigNonNegative, &sections));
    c.mrope_section = sections ? *sections : std::vector<int64_t>{11, 11, 10};  // §2.1 default

    rope.rotated_dims = c.rotary_dim;
    rope.slice = RopeConfigSlice::first;     // §4.1: the first R dims
    rope.pairing = RopeConfigPairing::neox;  // §4.1: pairs (i, i + R/2)
    c.rope = rope;
    c.rope_indexer = rope;  // §4.2: the same table, not rescaled to Di
    return Status::ok();
}

}  // namespace

Expected<QsaConfig> parse_qsa_config(const ConfigObject& cfg) {
    QsaConfig c;
    SIEVE_RETURN_IF_ERROR(cfg.read_int("hidden_size", kConfigPositive, &c.hidden_size));
    SIEVE_RETURN_IF_ERROR(cfg.read_int("num_hidden_layers", kConfigLayerCount, &c.num_hidden_layers));
    SIEVE_RETURN_IF_ERROR(cfg.read_int("num_attention_heads", kConfigPositive, &c.num_attention_heads));
    SIEVE_RETURN_IF_ERROR(cfg.read_int("num_key_value_heads", kConfigPositive, &c.num_key_value_heads));
    SIEVE_RETURN_IF_ERROR(cfg.read_int("head_dim", kConfigPositive, &c.head_dim));
    SIEVE_RETURN_IF_ERROR(cfg.read_int("max_position_embeddings", kConfigPositive, &c.max_position_embeddings));
    SIEVE_RETURN_IF_ERROR(cfg.read_real("rms_norm_eps", kConfigPositiveReal, &c.rms_norm_eps));
    // Absent: no MTP layer is described (transformers has none, §2.1).
    SIEVE_RETURN_IF_ERROR(cfg.read_int_or("mtp_num_hidden_layers", 0, kConfigExtraLayerCount, &c.mtp_num_hidden_layers));
    bool attention_bias = false;
    SIEVE_RETURN_IF_ERROR(cfg.read_bool_or("attention_bias", false, &attention_bias));
    if (attention_bias)
        return cfg.field_error(StatusCode::unsupported, "attention_bias",
                               "true; QSA layers have no projection biases (qsa.md §3)");
    // Attention variants the QSA layers do not have (the checks of vLLM's QSA path, qsa.md §8): refused
    // rather than silently computed as plain causal attention.
    bool is_causal = true, use_sliding_window = false;
    SIEVE_RETURN_IF_ERROR(cfg.read_bool_or("is_causal", true, &is_causal));
    if (!is_causal)
        return cfg.field_error(StatusCode::unsupported, "is_causal", "false; QSA requires causal decoder attention (qsa.md §8)");
    SIEVE_RETURN_IF_ERROR(cfg.read_bool_or("use_sliding_window", false, &use_sliding_window));
    if (use_sliding_window)
        return cfg.field_error(StatusCode::unsupported, "use_sliding_window",
                               "true; QSA layers have no sliding-window attention (qsa.md §8)");
    if (const nlohmann::json* dual = cfg.find("dual_chunk_attention_config"); dual != nullptr && !dual->is_null())
        return cfg.field_error(StatusCode::unsupported, "dual_chunk_attention_config",
                               "set; QSA layers have no dual-chunk RoPE (qsa.md §8)");
    if (c.num_attention_heads % c.num_key_value_heads != 0)
        return cfg.error(StatusCode::invalid_argument,
                         "field \"{}\" = {} is not a multiple of field \"{}\" = {} (GQA, qsa.md §4.7)",
                         cfg.field_path("num_attention_heads"), c.num_attention_heads,
                         cfg.field_path("num_key_value_heads"), c.num_key_value_heads);
    c.gqa_group_size = c.num_attention_heads / c.num_key_value_heads;

    SIEVE_RETURN_IF_ERROR(read_layers(cfg, c));
    SIEVE_RETURN_IF_ERROR(read_indexer(cfg, c));
    SIEVE_RETURN_IF_ERROR(read_rope(cfg, c));
    c.softmax_scale = 1.0 / std::sqrt(static_cast<double>(c.head_dim));  // §4.7
    return c;
}

}  // namespace sieve
