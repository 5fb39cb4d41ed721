// Built-in model presets for `sieve run --preset`: the real models' configs with random weights of
// the real shapes, generated in memory for the layers asked for (no download needed).
#pragma once

#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "sieve/core/status.h"
#include "sieve/io/checkpoint.h"
#include "sieve/io/config.h"

namespace sieve::cli {

struct Preset {
    std::string name;         // "deepseek-v4-flash"
    std::string description;  // "DeepSeek-V4-Flash (deepseek_v4): 43 layers, ..."
    std::vector<int64_t> default_layers;
};

const std::vector<Preset>& presets();
Expected<ModelConfig> preset_config(const std::string& name);
// The preset's config.json with `overrides` merged in (RFC 7386 merge patch) before parsing, e.g.
// {"index_topk": 131072} for `sieve bench`'s dense variant.
Expected<ModelConfig> preset_config(const std::string& name, const nlohmann::json& overrides);

// Random weights for `layers` of the preset's attention layout (models/attention_layout.h):
// linears that the release stores as FP8 blocks are FP8 e4m3 with UE8M0 scales, the others bf16;
// scaled so that activations stay of order one. Deterministic for a given seed.
Expected<std::unique_ptr<Checkpoint>> preset_checkpoint(const std::string& name, const ModelConfig& config,
                                                        const std::vector<int64_t>& layers, uint64_t seed);

}  // namespace sieve::cli
