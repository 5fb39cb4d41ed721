// DeepSeek-V4 config.json → DeepseekV4Config (specs/deepseek_v4.md "Decisions for sieve", §1).
#include <cmath>
#include <optional>
#include <string>
#include <vector>

#include "io/config_parsers.h"

namespace sieve {

const char* deepseek_v4_layer_kind_name(DeepseekV4LayerKind kind) {
    switch (kind) {
        case DeepseekV4LayerKind::swa: return "swa";
        case DeepseekV4LayerKind::csa: return "csa";
        case DeepseekV4LayerKind::hca: return "hca";
    }
    return "?";
}

namespace {

constexpr const char* kTypeSliding = "sliding_attention";
constexpr const char* kTypeCsa = "compressed_sparse_attention";
constexpr const char* kTypeHca = "heavily_compressed_attention";

DeepseekV4Layer make_layer(DeepseekV4LayerKind kind, int64_t ratio) {
    DeepseekV4Layer layer;
    layer.kind = kind;
    layer.compress_ratio = kind == DeepseekV4LayerKind::swa ? 0 : ratio;
    layer.compressor_overlap = kind == DeepseekV4LayerKind::csa;
    layer.has_indexer = kind == DeepseekV4LayerKind::csa;
    return layer;
}

// r (§1.4): `partial_rotary_factor` wins, then `qk_rope_head_dim`, else head_dim · 64/512.
Status read_rope_head_dim(const ConfigObject& cfg, DeepseekV4Config& c) {
    if (cfg.has("partial_rotary_factor")) {
        double factor = 0.0;
        SIEVE_RETURN_IF_ERROR(cfg.read_real("partial_rotary_factor", ConfigRealRange{0.0, true, 1.0}, &factor));
        // int(head_dim · factor) as transformers computes it.
        c.rope_head_dim = static_cast<int64_t>(static_cast<double>(c.head_dim) * factor);
        if (c.rope_head_dim < 2 || c.rope_head_dim % 2 != 0)
            return cfg.field_error(StatusCode::invalid_argument, "partial_rotary_factor",
                                   "{} gives a rotated width int(head_dim · factor) = int({} · {}) = {}, must be even "
                                   "and >= 2",
                                   factor, c.head_dim, factor, c.rope_head_dim);
    } else if (cfg.has("qk_rope_head_dim")) {
        SIEVE_RETURN_IF_ERROR(cfg.read_int("qk_rope_head_dim", kConfigPositive, &c.rope_head_dim));
        if (c.rope_head_dim % 2 != 0 || c.rope_head_dim > c.head_dim)
            return cfg.field_error(StatusCode::invalid_argument, "qk_rope_head_dim",
                                   "{} must be even and <= head_dim = {}", c.rope_head_dim, c.head_dim);
    } else {
        // Neither key: the release ratio 64/512 (§1.4).
        c.rope_head_dim = c.head_dim * 64 / 512;
        if (c.rope_head_dim < 2 || c.rope_head_dim % 2 != 0)
            return cfg.error(StatusCode::invalid_argument,
                             "no \"partial_rotary_factor\" or \"qk_rope_head_dim\": the default rotated width "
                             "head_dim · 64/512 = {} · 64/512 = {} must be even and >= 2",
                             c.head_dim, c.rope_head_dim);
    }
    if (c.rope_head_dim > c.index_head_dim)
        return cfg.error(StatusCode::invalid_argument,
                         "rotated width {} exceeds index_head_dim = {}: the indexer rotates the last {} dims of "
                         "its {}-dim heads (deepseek_v4.md §1.3)",
                         c.rope_head_dim, c.index_head_dim, c.rope_head_dim, c.index_head_dim);
    return Status::ok();
}

// A nested table's own partial_rotary_factor must give the same r: every rotation of a layer
// uses one width (§1.3).
Status check_nested_rotary_width(const ConfigObject& table, const DeepseekV4Config& c) {
    if (!table.has("partial_rotary_factor")) return Status::ok();
    double factor = 0.0;
    SIEVE_RETURN_IF_ERROR(table.read_real("partial_rotary_factor", ConfigRealRange{0.0, true, 1.0}, &factor));
    auto width = static_cast<int64_t>(static_cast<double>(c.head_dim) * factor);
    if (width != c.rope_head_dim)
        return table.field_error(StatusCode::invalid_argument, "partial_rotary_factor",
                                 "{} gives a rotated width int({} · {}) = {}, but the model's is {}", factor,
                                 c.head_dim, factor, width, c.rope_head_dim);
    return Status::ok();
}

// The main and compress RoPE tables (§1.3, §1.4).
Status read_rope_tables(const ConfigObject& cfg, DeepseekV4Config& c) {
    RopeConfig base;
    base.rotated_dims = c.rope_head_dim;
    base.slice = RopeConfigSlice::last;             // §1.3: always the last r dims
    base.pairing = RopeConfigPairing::interleaved;  // §2.3: GPT-J pairs
    c.rope_main = base;
    c.rope_compress = base;

    std::optional<ConfigObject> rope_parameters;
    SIEVE_RETURN_IF_ERROR(cfg.read_optional_object("rope_parameters", &rope_parameters));
    std::optional<ConfigObject> main_table;
    std::optional<ConfigObject> compress_table;
    if (rope_parameters) {
        SIEVE_RETURN_IF_ERROR(rope_parameters->read_optional_object("main", &main_table));
        SIEVE_RETURN_IF_ERROR(rope_parameters->read_optional_object("compress", &compress_table));
        if (main_table.has_value() != compress_table.has_value())
            return cfg.field_error(StatusCode::invalid_argument, "rope_parameters",
                                   "has \"{}\" but not \"{}\"; the nested form needs both tables",
                                   main_table ? "main" : "compress", main_table ? "compress" : "main");
    }

    if (main_table) {
        // transformers layout: each table is complete, its attention_factor as written
        // (absent: YaRN's 0.1·ln(factor) + 1, as transformers computes it, §1.4).
        SIEVE_RETURN_IF_ERROR(check_nested_rotary_width(*main_table, c));
        SIEVE_RETURN_IF_ERROR(check_nested_rotary_width(*compress_table, c));
        SIEVE_RETURN_IF_ERROR(read_rope_theta(&*main_table, cfg, "rope_theta", &c.rope_main.theta));
        SIEVE_RETURN_IF_ERROR(parse_rope_scaling(*main_table, c.max_position_embeddings, std::nullopt, &c.rope_main.yarn));
        SIEVE_RETURN_IF_ERROR(read_rope_theta(&*compress_table, cfg, "compress_rope_theta", &c.rope_compress.theta));
        SIEVE_RETURN_IF_ERROR(
            parse_rope_scaling(*compress_table, c.max_position_embeddings, std::nullopt, &c.rope_compress.yarn));
        return Status::ok();
    }

    // Original layout (or a flat rope_parameters dict): the main table is plain RoPE with
    // rope_theta; the scaling dict applies only to the compress table, whose θ is
    // compress_rope_theta, and YaRN's attention_factor defaults to 1.0 (§1.4).
    SIEVE_RETURN_IF_ERROR(read_rope_theta(nullptr, cfg, "rope_theta", &c.rope_main.theta));
    SIEVE_RETURN_IF_ERROR(read_rope_theta(nullptr, cfg, "compress_rope_theta", &c.rope_compress.theta));
    std::optional<ConfigObject> scaling = rope_parameters;
    if (!scaling) SIEVE_RETURN_IF_ERROR(cfg.read_optional_object("rope_scaling", &scaling));
    if (scaling)
        SIEVE_RETURN_IF_ERROR(parse_rope_scaling(*scaling, c.max_position_embeddings, 1.0, &c.rope_compress.yarn));
    return Status::ok();
}

// transformers layout: layer_types + compress_rates (§1.4).
Status read_layer_types(const ConfigObject& cfg, const std::vector<std::string>& types, DeepseekV4Config& c) {
    if (static_cast<int64_t>(types.size()) != c.num_hidden_layers)
        return cfg.field_error(StatusCode::invalid_argument, "layer_types", "{} entries, expected num_hidden_layers = {}",
                               types.size(), c.num_hidden_layers);
    // Defaults 4 and 128; the legacy scalar keys override compress_rates (§1.4).
    int64_t csa_rate = 4;
    int64_t hca_rate = 128;
    std::optional<ConfigObject> rates;
    SIEVE_RETURN_IF_ERROR(cfg.read_optional_object("compress_rates", &rates));
    if (rates) {
        SIEVE_RETURN_IF_ERROR(rates->read_int_or(kTypeCsa, csa_rate, kConfigPositive, &csa_rate));
        SIEVE_RETURN_IF_ERROR(rates->read_int_or(kTypeHca, hca_rate, kConfigPositive, &hca_rate));
    }
    SIEVE_RETURN_IF_ERROR(cfg.read_int_or("compress_rate_csa", csa_rate, kConfigPositive, &csa_rate));
    SIEVE_RETURN_IF_ERROR(cfg.read_int_or("compress_rate_hca", hca_rate, kConfigPositive, &hca_rate));

    c.layers.clear();
    for (size_t i = 0; i < types.size(); ++i) {
        if (types[i] == kTypeSliding) {
            c.layers.push_back(make_layer(DeepseekV4LayerKind::swa, 0));
        } else if (types[i] == kTypeCsa) {
            c.layers.push_back(make_layer(DeepseekV4LayerKind::csa, csa_rate));
        } else if (types[i] == kTypeHca) {
            c.layers.push_back(make_layer(DeepseekV4LayerKind::hca, hca_rate));
        } else {
            return cfg.field_error(StatusCode::invalid_argument, fmt::format("layer_types[{}]", i),
                                   "\"{}\" is not a DeepSeek-V4 layer type; expected one of {}, {}, {}", types[i],
                                   kTypeSliding, kTypeCsa, kTypeHca);
        }
    }
    return Status::ok();
}

// Original layout: compress_ratios, one entry per layer plus the MTP layer's (§1.1, §1.4).
Status read_compress_ratios(const ConfigObject& cfg, const std::vector<int64_t>& ratios, DeepseekV4Config& c) {
    const int64_t n = c.num_hidden_layers;
    const auto count = static_cast<int64_t>(ratios.size());
    // Without an MTP layer (num_nextn_predict_layers = 0) the extra entry may be left out.
    bool ok = count == n + 1 || (count == n && c.num_nextn_predict_layers == 0);
    if (!ok) {
        if (c.num_nextn_predict_layers == 0)
            return cfg.field_error(StatusCode::invalid_argument, "compress_ratios",
                                   "{} entries, expected num_hidden_layers + 1 = {} + 1 (or {} without the MTP entry)",
                                   count, n, n);
        return cfg.field_error(StatusCode::invalid_argument, "compress_ratios",
                               "{} entries, expected num_hidden_layers + 1 = {} + 1", count, n);
    }
    if (count == n + 1 && ratios[n] != 0)
        return cfg.field_error(StatusCode::unsupported, fmt::format("compress_ratios[{}]", n),
                               "the MTP layer's entry is {}; sieve runs the MTP layer as a sliding-window-only layer "
                               "(ratio 0, deepseek_v4.md \"Decisions for sieve\")",
                               ratios[n]);
    c.layers.clear();
    for (int64_t i = 0; i < n; ++i) {
        // 0 → SWA-only, 4 → CSA, any other m > 0 → HCA of ratio m ("Decisions for sieve").
        int64_t m = ratios[i];
        DeepseekV4LayerKind kind = m == 0 ? DeepseekV4LayerKind::swa
                                 : m == 4 ? DeepseekV4LayerKind::csa
                                          : DeepseekV4LayerKind::hca;
        c.layers.push_back(make_layer(kind, m));
    }
    return Status::ok();
}

}  // namespace

Expected<DeepseekV4Config> parse_deepseek_v4_config(const ConfigObject& cfg) {
    DeepseekV4Config c;
    SIEVE_RETURN_IF_ERROR(cfg.read_int("hidden_size", kConfigPositive, &c.hidden_size));
    SIEVE_RETURN_IF_ERROR(cfg.read_int("num_hidden_layers", kConfigLayerCount, &c.num_hidden_layers));
    SIEVE_RETURN_IF_ERROR(cfg.read_int("num_attention_heads", kConfigPositive, &c.num_attention_heads));
    SIEVE_RETURN_IF_ERROR(cfg.read_int_or("num_key_value_heads", 1, kConfigPositive, &c.num_key_value_heads));
    if (c.num_key_value_heads != 1)
        return cfg.field_error(StatusCode::unsupported, "num_key_value_heads",
                               "{}; DeepSeek-V4 attention has one shared K=V head (deepseek_v4.md §1.1)",
                               c.num_key_value_heads);
    SIEVE_RETURN_IF_ERROR(cfg.read_int("head_dim", kConfigPositive, &c.head_dim));
    SIEVE_RETURN_IF_ERROR(cfg.read_int("q_lora_rank", kConfigPositive, &c.q_lora_rank));
    SIEVE_RETURN_IF_ERROR(cfg.read_int("o_lora_rank", kConfigPositive, &c.o_lora_rank));
    SIEVE_RETURN_IF_ERROR(cfg.read_int("o_groups", kConfigPositive, &c.o_groups));
    SIEVE_RETURN_IF_ERROR(cfg.read_int("sliding_window", kConfigPositive, &c.sliding_window));
    SIEVE_RETURN_IF_ERROR(cfg.read_int("index_n_heads", kConfigPositive, &c.index_n_heads));
    SIEVE_RETURN_IF_ERROR(cfg.read_int("index_head_dim", kConfigPositive, &c.index_head_dim));
    SIEVE_RETURN_IF_ERROR(cfg.read_int("index_topk", kConfigPositive, &c.index_topk));
    SIEVE_RETURN_IF_ERROR(cfg.read_int("max_position_embeddings", kConfigPositive, &c.max_position_embeddings));
    // Absent: no MTP layer is described.
    SIEVE_RETURN_IF_ERROR(
        cfg.read_int_or("num_nextn_predict_layers", 0, kConfigExtraLayerCount, &c.num_nextn_predict_layers));
    SIEVE_RETURN_IF_ERROR(cfg.read_real("rms_norm_eps", kConfigPositiveReal, &c.rms_norm_eps));

    SIEVE_RETURN_IF_ERROR(cfg.check_within_context("sliding_window", c.sliding_window, c.max_position_embeddings,
                                                   "the window holds a token's last positions (deepseek_v4.md §3.2)"));
    // index_topk counts compressed entries, never more than the tokens they pool.
    SIEVE_RETURN_IF_ERROR(cfg.check_within_context("index_topk", c.index_topk, c.max_position_embeddings,
                                                   "a token selects among its causal compressed entries "
                                                   "(deepseek_v4.md §3.6)"));
    if (c.num_attention_heads % c.o_groups != 0)
        return cfg.field_error(StatusCode::invalid_argument, "o_groups",
                               "{} does not divide num_attention_heads = {} (heads are grouped for the output "
                               "projection, deepseek_v4.md §3.9)",
                               c.o_groups, c.num_attention_heads);
    c.heads_per_group = c.num_attention_heads / c.o_groups;

    SIEVE_RETURN_IF_ERROR(read_rope_head_dim(cfg, c));
    c.nope_head_dim = c.head_dim - c.rope_head_dim;
    SIEVE_RETURN_IF_ERROR(read_rope_tables(cfg, c));

    std::optional<std::vector<std::string>> layer_types;
    SIEVE_RETURN_IF_ERROR(cfg.read_optional_string_list("layer_types", &layer_types));
    if (layer_types) {
        // layer_types wins over compress_ratios when both are present (§1.4).
        c.layout = DeepseekV4ConfigLayout::transformers;
        SIEVE_RETURN_IF_ERROR(read_layer_types(cfg, *layer_types, c));
    } else {
        std::optional<std::vector<int64_t>> ratios;
        SIEVE_RETURN_IF_ERROR(cfg.read_optional_int_list("compress_ratios", kConfigNonNegative, &ratios));
        if (!ratios)
            return cfg.error(StatusCode::not_found,
                             "neither field \"layer_types\" nor field \"compress_ratios\" is present; one of them "
                             "gives each layer's attention kind (deepseek_v4.md §1.4)");
        c.layout = DeepseekV4ConfigLayout::original;
        SIEVE_RETURN_IF_ERROR(read_compress_ratios(cfg, *ratios, c));
    }
    for (size_t i = 0; i < c.layers.size(); ++i)
        if (c.layers[i].compress_ratio > c.max_position_embeddings)
            return cfg.error(StatusCode::invalid_argument,
                             "layer {} ({}) has compress ratio {}, more than field \"max_position_embeddings\" = {}: "
                             "it would never complete an entry, and its compressor state holds coff · ratio rows "
                             "(deepseek_v4.md §3.4)",
                             i, deepseek_v4_layer_kind_name(c.layers[i].kind), c.layers[i].compress_ratio,
                             c.max_position_embeddings);
    SIEVE_RETURN_IF_ERROR(check_rope_yarn_range(cfg, "main RoPE table", c.rope_main));
    SIEVE_RETURN_IF_ERROR(check_rope_yarn_range(cfg, "compress RoPE table", c.rope_compress));
    for (DeepseekV4Layer& layer : c.layers)
        layer.rope = layer.kind == DeepseekV4LayerKind::swa ? c.rope_main : c.rope_compress;
    c.mtp_layers.assign(static_cast<size_t>(c.num_nextn_predict_layers), make_layer(DeepseekV4LayerKind::swa, 0));
    for (DeepseekV4Layer& layer : c.mtp_layers) layer.rope = c.rope_main;

    c.softmax_scale = 1.0 / std::sqrt(static_cast<double>(c.head_dim));  // §1.2: no YaRN mscale
    c.index_score_scale = 1.0 / std::sqrt(static_cast<double>(c.index_head_dim)) /
                          std::sqrt(static_cast<double>(c.index_n_heads));  // §3.6
    return c;
}

}  // namespace sieve
