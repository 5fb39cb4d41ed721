// config_rope: see config_rope.h (types, YaRN range) and config_parsers.h (RoPE dict reader, mscale).
#include "sieve/io/config_rope.h"

#include <algorithm>
#include <cmath>
#include <numbers>
#include <string>

#include "core/assert.h"
#include "io/config_parsers.h"

namespace sieve {

const char* rope_config_pairing_name(RopeConfigPairing pairing) {
    switch (pairing) {
        case RopeConfigPairing::interleaved: return "interleaved";
        case RopeConfigPairing::neox: return "neox";
    }
    return "?";
}

const char* rope_config_slice_name(RopeConfigSlice slice) {
    switch (slice) {
        case RopeConfigSlice::first: return "first";
        case RopeConfigSlice::last: return "last";
    }
    return "?";
}

double config_yarn_mscale(double factor, double mscale) {
    if (factor <= 1.0) return 1.0;
    return 0.1 * mscale * std::log(factor) + 1.0;
}

RopeConfigYarnRange rope_config_yarn_range(const RopeConfig& p) {
    SIEVE_ASSERT(p.yarn.has_value(), "rope_config_yarn_range needs a YaRN table");
    const RopeYarnConfig& y = *p.yarn;
    const double r = static_cast<double>(p.rotated_dims);
    const double l0 = static_cast<double>(y.original_max_position_embeddings);
    auto corr = [&](double n_rot) {
        return r * std::log(l0 / (n_rot * 2.0 * std::numbers::pi)) / (2.0 * std::log(p.theta));
    };
    double low = corr(y.beta_fast);
    double high = corr(y.beta_slow);
    if (y.truncate) {
        low = std::floor(low);
        high = std::ceil(high);
    }
    // Clamped to [0, r − 1], not r/2 − 1 (deepseek_v4.md §2.3).
    low = std::max(low, 0.0);
    high = std::min(high, r - 1.0);
    if (low == high) high += 0.001;
    return {low, high};
}

Status check_rope_yarn_range(const ConfigObject& config, std::string_view table, const RopeConfig& rope) {
    if (!rope.yarn) return Status::ok();
    RopeConfigYarnRange range = rope_config_yarn_range(rope);
    if (!std::isfinite(range.low) || !std::isfinite(range.high))
        return config.error(StatusCode::invalid_argument,
                            "{}: the YaRN correction range [{}, {}] from theta {}, {} rotated dims, "
                            "original_max_position_embeddings {}, beta_fast {}, beta_slow {} is not finite",
                            table, range.low, range.high, rope.theta, rope.rotated_dims,
                            rope.yarn->original_max_position_embeddings, rope.yarn->beta_fast, rope.yarn->beta_slow);
    return Status::ok();
}

Status read_rope_theta(const ConfigObject* section, const ConfigObject& top, std::string_view fallback_key,
                       double* theta) {
    // θ ≤ 1 would give non-decreasing wavelengths and a zero ln θ in the YaRN range: no model has it.
    constexpr ConfigRealRange kTheta{1.0, true};
    if (section != nullptr && section->has("rope_theta")) return section->read_real("rope_theta", kTheta, theta);
    if (!top.has(fallback_key)) {
        if (section != nullptr)
            return top.field_error(StatusCode::not_found, fallback_key, "required (or {}), but absent",
                                   section->field_path("rope_theta"));
        return top.field_error(StatusCode::not_found, fallback_key, "required, but absent or null");
    }
    return top.read_real(fallback_key, kTheta, theta);
}

Status parse_rope_scaling(const ConfigObject& section, int64_t max_position_embeddings,
                          std::optional<double> default_attention_factor,
                          std::optional<RopeYarnConfig>* yarn) {
    yarn->reset();
    // transformers writes `rope_type`; legacy `rope_scaling` dicts say `type`.
    const char* type_key = section.has("rope_type") ? "rope_type" : "type";
    std::optional<std::string> type;
    SIEVE_RETURN_IF_ERROR(section.read_optional_string(type_key, &type));
    if (!type || *type == "default") return Status::ok();
    if (*type != "yarn")
        return section.field_error(StatusCode::unsupported, type_key,
                                   "RoPE type \"{}\" is not supported; supported: default, yarn", *type);

    RopeYarnConfig y;
    SIEVE_RETURN_IF_ERROR(section.read_int("original_max_position_embeddings", kConfigPositive,
                                           &y.original_max_position_embeddings));
    // YaRN never extrapolates below the trained length: factor ≥ 1 (transformers' YaRN validation).
    constexpr ConfigRealRange kFactor{1.0, false};
    if (section.has("factor")) {
        SIEVE_RETURN_IF_ERROR(section.read_real("factor", kFactor, &y.factor));
    } else {
        // Only without `factor`: L / L0 (deepseek_v4.md §1.4, dsa_mla.md "Decisions for sieve").
        y.factor = static_cast<double>(max_position_embeddings) /
                   static_cast<double>(y.original_max_position_embeddings);
        if (!(y.factor >= 1.0))
            return section.error(StatusCode::invalid_argument,
                                 "YaRN without \"{}\": factor = max_position_embeddings / {} = {} / {} = {}, must be >= 1",
                                 section.field_path("factor"), section.field_path("original_max_position_embeddings"),
                                 max_position_embeddings, y.original_max_position_embeddings, y.factor);
    }
    SIEVE_RETURN_IF_ERROR(section.read_real_or("beta_fast", 32.0, kConfigPositiveReal, &y.beta_fast));
    SIEVE_RETURN_IF_ERROR(section.read_real_or("beta_slow", 1.0, kConfigPositiveReal, &y.beta_slow));
    SIEVE_RETURN_IF_ERROR(section.read_bool_or("truncate", true, &y.truncate));
    SIEVE_RETURN_IF_ERROR(section.read_optional_real("mscale", kConfigAnyReal, &y.mscale));
    SIEVE_RETURN_IF_ERROR(section.read_optional_real("mscale_all_dim", kConfigAnyReal, &y.mscale_all_dim));

    std::optional<double> attention_factor;
    SIEVE_RETURN_IF_ERROR(section.read_optional_real("attention_factor", kConfigPositiveReal, &attention_factor));
    if (attention_factor) {
        y.attention_factor = *attention_factor;
    } else if (default_attention_factor) {
        y.attention_factor = *default_attention_factor;
    } else if (y.mscale.value_or(0.0) != 0.0 && y.mscale_all_dim.value_or(0.0) != 0.0) {
        // dsa_mla.md "Decisions for sieve" (V3.2): m(s, mscale) / m(s, mscale_all_dim).
        y.attention_factor = config_yarn_mscale(y.factor, *y.mscale) / config_yarn_mscale(y.factor, *y.mscale_all_dim);
    } else {
        y.attention_factor = config_yarn_mscale(y.factor, 1.0);
    }
    if (!std::isfinite(y.attention_factor) || !(y.attention_factor > 0.0))
        return section.error(StatusCode::invalid_argument,
                             "YaRN attention factor from {} = {} and {} = {} (factor {}) is {}, must be > 0",
                             section.field_path("mscale"), y.mscale.value_or(0.0),
                             section.field_path("mscale_all_dim"), y.mscale_all_dim.value_or(0.0), y.factor,
                             y.attention_factor);
    *yarn = y;
    return Status::ok();
}

}  // namespace sieve
