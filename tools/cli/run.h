// `sieve run`: sieve's main job. Loads a model (a checkpoint directory or a built-in preset with
// the real shapes and random weights), runs a workload of requests through its attention stack on
// the runtime (chunked prefill + decode, several requests per step) and reports throughput, time
// by stage and cache bytes per token.
#pragma once

#include <cstdint>
#include <filesystem>
#include <iosfwd>
#include <string>
#include <vector>

#include "core/status.h"
#include "kv/cache_spec.h"

namespace sieve::cli {

struct RunOptions {
    std::filesystem::path checkpoint;  // empty: use the preset
    std::string preset = "deepseek-v4-flash";
    std::string layers;                // "0-3", "2,5,7"; empty: the preset's default, or every layer
    int64_t requests = 2;
    int64_t prompt_tokens = 2304;      // past DeepSeek-V4-Flash's short-context threshold (2051)
    int64_t decode_tokens = 16;
    int64_t max_tokens_per_step = 2048;
    NumericsProfile profile = NumericsProfile::deployed;
    std::string backend = "cpu";
    uint64_t seed = 1;
    bool json = false;
    bool progress = true;  // a live line on stderr when it is a terminal
};

Status run_workload(const RunOptions& options, std::ostream& out);

// "0-3,7" → {0, 1, 2, 3, 7}.
Expected<std::vector<int64_t>> parse_layer_list(const std::string& text);

}  // namespace sieve::cli
