// Everything sieve knows about one family of models, held in one place: each models/<family>/family.cpp
// fills a ModelFamily and models/registry.cpp lists it (one line). The runtime and the tools (`sieve
// check`, `sieve bench`, `sieve inspect`) ask the family of a config's model_type, never the config's
// variant, so that a new family touches its own folder, its io/config_<family>.*, the CLI presets and
// that line.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "sieve/core/stage_timer.h"
#include "sieve/core/status.h"
#include "sieve/io/checkpoint.h"
#include "sieve/io/config.h"
#include "sieve/models/attention_layout.h"
#include "sieve/models/attention_model.h"
#include "sieve/models/model_factory.h"

namespace sieve {

// The layers `sieve bench` runs for a model, and the config field that makes its dense variant: a
// top-k or budget at least as wide as every candidate set, so that each layer takes every candidate
// through the same kernels, with no indexer (the family's short-context path).
struct BenchPlan {
    std::vector<int64_t> layers;
    std::string dense_field;  // a config.json field, e.g. "index_topk"
    int64_t dense_value = 0;
};

// A weight's share of a stage (a weight may split between stages: DSA's kv_b_proj is W_UK before
// attention and W_UV after it).
struct WeightShare {
    Stage stage;
    double share;
};

// The cache work of one token of a layer step (tools/cli/bench_roofline.h counts it): the rows its
// attention reads and their bytes and flops, and the candidates its indexer scores.
struct TokenWork {
    double rows = 0, row_bytes = 0, flops_per_row = 0;
    double candidates = 0, index_flops_per_candidate = 0;
};

// What `sieve check` holds the deployed profile to by default (the exact profile: 1e-4 and every top-k).
struct DeployedCheckDefaults {
    double max_relative_error;
    double min_topk_agreement;
};

struct ModelFamily {
    std::string_view name;                          // "deepseek_v4", "dsa_mla", "qsa"
    std::span<const std::string_view> model_types;  // the HF model_types it runs
    DeployedCheckDefaults deployed_check;

    Expected<std::unique_ptr<AttentionModel>> (*load)(const ModelConfig& config, const Checkpoint& checkpoint,
                                                      const ModelOptions& options);
    AttentionLayout (*layout)(const ModelConfig& config, NumericsProfile profile);
    // Tokens per index of the reference's top-k rows of `layer` (golden_format.md: compressed-entry ids
    // for DeepSeek-V4 CSA, token positions elsewhere); an error for a layer that selects nothing.
    Expected<int64_t> (*topk_tokens_per_index)(const ModelConfig& config, int64_t layer);
    Expected<BenchPlan> (*bench_plan)(const ModelConfig& config, int64_t max_tokens);
    // The roofline work model: the stages a weight runs in, a token's cache work, and the bytes of each
    // request's indexer keys read once per step (`end`: the request's tokens after the step).
    std::vector<WeightShare> (*weight_stages)(const ModelConfig& config, std::string_view tensor);
    TokenWork (*token_work)(const ModelConfig& config, const AttentionLayerLayout& layer, int64_t position,
                            bool dense);
    double (*request_key_bytes)(const ModelConfig& config, const AttentionLayerLayout& layer, int64_t end,
                                bool dense);
};

// The bytes of a layer's cache entries of the spec named `cache` (0 when the layer has none).
double layout_entry_bytes(const AttentionLayerLayout& layer, std::string_view cache);

}  // namespace sieve
