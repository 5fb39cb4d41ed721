// config.json (Hugging Face) → a typed, validated model config for the model types sieve runs:
// deepseek_v4 (DeepseekV4Config), deepseek_v32 and hy_v4 (DsaMlaConfig), qwen4_exp and
// qwen4_exp_text (QsaConfig; the multimodal qwen4_exp keeps its text part under "text_config").
//
// Every field the specs use is read with its documented default or required, every derived value
// (per-layer attention kind, RoPE table per path, softmax scales, head dims) is computed here, and
// every inconsistency is an error naming the file, the field and the values. Parsing never throws.
#pragma once

#include <filesystem>
#include <string>
#include <string_view>
#include <variant>

#include "sieve/core/status.h"
#include "sieve/io/config_deepseek_v4.h"
#include "sieve/io/config_dsa_mla.h"
#include "sieve/io/config_qsa.h"
#include "sieve/io/config_rope.h"

namespace sieve {

struct ModelConfig {
    std::string model_type;  // the top-level "model_type" as written
    std::variant<DeepseekV4Config, DsaMlaConfig, QsaConfig> family;

    const DeepseekV4Config* deepseek_v4() const { return std::get_if<DeepseekV4Config>(&family); }
    const DsaMlaConfig* dsa_mla() const { return std::get_if<DsaMlaConfig>(&family); }
    const QsaConfig* qsa() const { return std::get_if<QsaConfig>(&family); }
};

// "deepseek_v4, deepseek_v32, hy_v4, qwen4_exp, qwen4_exp_text"
const char* config_supported_model_types();

// `source_name` prefixes every error message ("config.json: field \"head_dim\": ...").
Expected<ModelConfig> parse_model_config(std::string_view json_text, std::string_view source_name);
// A config.json file, or a checkpoint directory holding one.
Expected<ModelConfig> load_model_config(const std::filesystem::path& config_json_or_dir);

}  // namespace sieve
