// `sieve run`: sieve's main job. Loads a model (a checkpoint directory or a built-in preset with
// the real shapes and random weights), runs a workload of requests through its attention stack on
// the runtime (chunked prefill + decode, several requests per step) and reports throughput, time
// by stage and cache bytes per token.
#pragma once

#include <cstdint>
#include <filesystem>
#include <iosfwd>
#include <string>
#include <string_view>
#include <vector>

#include "sieve/core/status.h"
#include "flag_checks.h"
#include "sieve/kv/cache_spec.h"

namespace sieve::cli {

// Limits of `sieve run`'s numeric flags: the command line checks them as it parses (and shows them
// in --help), run_workload again for other callers. Past these, a workload must also fit the model
// (prompt + decode within max_position_embeddings) and the machine (its caches within memory).
inline constexpr IntRange kRunRequests{1, 4096};
inline constexpr IntRange kRunPromptTokens{1, 1 << 24};  // 16M: past every released model's context
inline constexpr IntRange kRunDecodeTokens{0, 1 << 24};
inline constexpr IntRange kRunDraftTokens{0, 16};  // vLLM's MTP speculators verify a handful per step
inline constexpr RealRange kRunAcceptRate{0.0, 1.0};
inline constexpr IntRange kRunBudget{1, 16384};
inline constexpr IntRange kRunSharedPrefix{0, 1 << 24};  // at most --prompt-tokens
inline constexpr IntRange kRunPromptFamilies{1, 1 << 16};  // a step's buffers grow with it: 1 GB of V4-Flash queries

struct RunOptions {
    std::filesystem::path checkpoint;  // empty: use the preset
    std::string preset = "deepseek-v4-flash";
    std::string layers;                // "0-3", "2,5,7"; empty: the preset's default, or every layer
    int64_t requests = 2;
    int64_t prompt_tokens = 2304;      // past DeepSeek-V4-Flash's short-context threshold (2051)
    int64_t decode_tokens = 16;
    int64_t max_tokens_per_step = 2048;
    // Speculative decoding: draft tokens each decode step verifies (0: plain decode), each accepted with
    // probability accept_rate while the ones before it were (the target keeps a prefix of the drafts).
    int64_t draft_tokens = 0;
    double accept_rate = 0.7;
    // Where the drafts come from: "auto" (the checkpoint's MTP layers when its config has them, else none),
    // "mtp" (its MTP layers, an error without them: they run as the draft model, EngineOptions::draft_model)
    // or "none" (no draft model: only the verification is run).
    std::string draft_model = "auto";
    // Prefix caching: the first shared_prefix tokens of every prompt are its family's (requests take the
    // prompt_families prompts in turn), and the requests run with their prompts' chunk keys (0: no keys).
    int64_t shared_prefix = 0;
    int64_t prompt_families = 1;
    NumericsProfile profile = NumericsProfile::deployed;
    std::string backend = "cpu";
    uint64_t seed = 1;                 // the command line takes kSeedRange
    bool json = false;
    bool progress = true;  // a live line on stderr when it is a terminal
};

Status run_workload(const RunOptions& options, std::ostream& out);

// "0-3,7" → {0, 1, 2, 3, 7}: indices of a model's layers, each in [0, n_layers − 1]. Numbers are
// bounded before a range is expanded, so the list never holds more than n_layers entries.
Expected<std::vector<int64_t>> parse_layer_list(std::string_view text, int64_t n_layers);

}  // namespace sieve::cli
