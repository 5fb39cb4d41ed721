// Entry points of the per-family config parsers and the shared RoPE-section reader, called by
// config.cpp. Internal to src/io.
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>

#include "sieve/core/status.h"
#include "sieve/io/config_deepseek_v4.h"
#include "sieve/io/config_dsa_mla.h"
#include "io/config_json.h"
#include "sieve/io/config_qsa.h"
#include "sieve/io/config_rope.h"

namespace sieve {

Expected<DeepseekV4Config> parse_deepseek_v4_config(const ConfigObject& config);
Expected<DsaMlaConfig> parse_dsa_mla_config(const ConfigObject& config, DsaMlaModel model);
// `config` is the text part: the top level, or the `text_config` object of the multimodal wrapper.
Expected<QsaConfig> parse_qsa_config(const ConfigObject& config);

// Reads the type and the YaRN keys of one RoPE dict in the transformers form
// ({"rope_type" | "type": "default" | "yarn", "factor", "original_max_position_embeddings",
// "beta_fast", "beta_slow", "truncate", "attention_factor", "mscale", "mscale_all_dim"}); θ and
// the rotated width are the caller's. Sets *yarn for "yarn", resets it for "default".
// `max_position_embeddings` gives the factor when `factor` is absent (L / L0, deepseek_v4.md §1.4);
// `default_attention_factor` replaces YaRN's mscale rule when the dict has no `attention_factor`.
Status parse_rope_scaling(const ConfigObject& section, int64_t max_position_embeddings,
                          std::optional<double> default_attention_factor,
                          std::optional<RopeYarnConfig>* yarn);

// θ: `rope_theta` of `section` when it has one, else `fallback_key` of `top` (required).
Status read_rope_theta(const ConfigObject* section, const ConfigObject& top, std::string_view fallback_key,
                       double* theta);

// YaRN's m(s, k) = 0.1 · k · ln(s) + 1, and 1 for s ≤ 1 (dsa_mla.md "Decisions for sieve").
double config_yarn_mscale(double factor, double mscale);

// A YaRN table whose correction range (config_rope.h) is not finite, e.g. from a beta near 0,
// is an error naming `table`; plain tables pass.
Status check_rope_yarn_range(const ConfigObject& config, std::string_view table, const RopeConfig& rope);

}  // namespace sieve
