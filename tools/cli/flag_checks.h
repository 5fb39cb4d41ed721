// The CLI's checks of flag values: numbers parsed by sieve rather than by the flag parser, so that
// every bad value, whatever is wrong with it (not a number, past what int64 holds, outside the
// flag's limits), gets one message naming the flag, the value and the allowed range:
//   "--requests 0: must be an integer in [1, 4096]".
// Checks that need a model (prompt past max_position_embeddings, caches larger than the machine)
// belong to the command that loads it (run.cpp); the ones here need no model and run while the
// command line is parsed, before anything is built.
#pragma once

#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <string_view>

#include "bench_layers.h"
#include "sieve/core/status.h"
#include "sieve/io/config.h"

namespace sieve::cli {

// Inclusive limits of a flag's value.
struct IntRange {
    int64_t lo = 0;
    int64_t hi = 0;
};
struct RealRange {
    double lo = 0;
    double hi = 0;
};

// Seeds of `run` and `check`: any non-negative int64.
inline constexpr IntRange kSeedRange{0, std::numeric_limits<int64_t>::max()};
// Longest chunk of `check --schedule chunk:N`: the longest context of a released model (1M).
inline constexpr IntRange kScheduleChunkRange{1, 1 << 20};

// Plain decimal digits with an optional leading '-'; nullopt for anything else (spaces, '+', a
// base prefix, trailing text) and for values outside int64.
std::optional<int64_t> parse_decimal(std::string_view text);

Status check_int_flag(std::string_view flag, int64_t value, IntRange range);
Expected<int64_t> parse_int_flag(std::string_view flag, std::string_view text, IntRange range);
// A finite number in `range` (NaN fails): the check of parse_real_flag for a value set without parsing.
Status check_real_flag(std::string_view flag, double value, RealRange range);
// A finite decimal number in `range`: NaN and infinities are rejected like out-of-range values.
Expected<double> parse_real_flag(std::string_view flag, std::string_view text, RealRange range);

// The longest request a model takes, in tokens: config.json's max_position_embeddings.
int64_t max_position_embeddings(const ModelConfig& config);

// One of the built-in presets (presets.h).
Status check_preset_flag(std::string_view flag, std::string_view name);
// A backend make_backend() accepts (backends/backend.h), ISA within what this machine runs.
Status check_backend_flag(std::string_view flag, std::string_view spec);
// An ISA name this machine runs (at most active_isa()); empty is accepted when `allow_none`.
Status check_isa_flag(std::string_view flag, std::string_view name, bool allow_none);
// `sieve check --schedule`: one-shot | decode | mixed | chunk:N with N in kScheduleChunkRange.
Status check_schedule_flag(std::string_view flag, std::string_view schedule);

// `sieve bench`'s limits across flags, for every preset swept: the largest batch times the longest
// context held in its caches at most kBenchMaxCachedTokens, and every context the sweep builds
// (decode context + 1, prefill context + chunk, comparison context + 1) within the preset's
// max_position_embeddings.
inline constexpr int64_t kBenchMaxCachedTokens = int64_t{1} << 24;
Status check_bench_flags(const LayerBenchOptions& options);

}  // namespace sieve::cli
