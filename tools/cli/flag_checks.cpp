#include "flag_checks.h"

#include <fmt/format.h>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <variant>
#include <vector>

#include "sieve/backends/backend.h"
#include "core/cpu_features.h"
#include "presets.h"

namespace sieve::cli {

namespace {

std::string isa_names() {
    std::string names;
    for (Isa isa : {Isa::scalar, Isa::avx2, Isa::avx512, Isa::avx512_bf16, Isa::amx_bf16})
        names += (names.empty() ? "" : ", ") + std::string(isa_name(isa));
    return names;
}

}  // namespace

int64_t max_position_embeddings(const ModelConfig& config) {
    return std::visit([](const auto& family) { return family.max_position_embeddings; }, config.family);
}

std::optional<int64_t> parse_decimal(std::string_view text) {
    // std::from_chars takes exactly this grammar (no '+', no spaces, no 0x) and reports overflow.
    if (text.empty()) return std::nullopt;
    int64_t value = 0;
    const char* end = text.data() + text.size();
    const auto [stop, error] = std::from_chars(text.data(), end, value, 10);
    if (error != std::errc() || stop != end) return std::nullopt;
    return value;
}

Status check_int_flag(std::string_view flag, int64_t value, IntRange range) {
    if (value < range.lo || value > range.hi)
        return invalid_argument_error("{} {}: must be an integer in [{}, {}]", flag, value, range.lo, range.hi);
    return Status::ok();
}

Expected<int64_t> parse_int_flag(std::string_view flag, std::string_view text, IntRange range) {
    const std::optional<int64_t> value = parse_decimal(text);
    if (!value) return invalid_argument_error("{} {}: must be an integer in [{}, {}]", flag, text, range.lo, range.hi);
    SIEVE_RETURN_IF_ERROR(check_int_flag(flag, *value, range));
    return *value;
}

Status check_real_flag(std::string_view flag, double value, RealRange range) {
    if (!(std::isfinite(value) && value >= range.lo && value <= range.hi))
        return invalid_argument_error("{} {}: must be a number in [{}, {}]", flag, value, range.lo, range.hi);
    return Status::ok();
}

Expected<double> parse_real_flag(std::string_view flag, std::string_view text, RealRange range) {
    auto bad = [&] {
        return invalid_argument_error("{} {}: must be a number in [{}, {}]", flag, text, range.lo, range.hi);
    };
    if (text.empty()) return bad();
    double value = 0;
    const char* end = text.data() + text.size();
    const auto [stop, error] = std::from_chars(text.data(), end, value);
    // from_chars reads "nan" and "inf" as numbers; a range check alone would let NaN through.
    if (error != std::errc() || stop != end || !std::isfinite(value) || value < range.lo || value > range.hi)
        return bad();
    return value;
}

Status check_preset_flag(std::string_view flag, std::string_view name) {
    std::string known;
    for (const Preset& p : presets()) {
        if (p.name == name) return Status::ok();
        known += (known.empty() ? "" : ", ") + p.name;
    }
    return invalid_argument_error("{} {}: not a built-in model (known: {})", flag, name, known);
}

Status check_backend_flag(std::string_view flag, std::string_view spec) {
    // Building the backend is the one complete check of its name (a CPU backend is a few fields).
    auto backend = make_backend(spec);
    if (!backend.has_value()) return backend.status().with_context(fmt::format("{} {}", flag, spec));
    return Status::ok();
}

Status check_isa_flag(std::string_view flag, std::string_view name, bool allow_none) {
    if (name.empty() && allow_none) return Status::ok();
    const std::optional<Isa> isa = isa_from_name(name);
    if (!isa) return invalid_argument_error("{} {}: expected one of {}", flag, name, isa_names());
    if (static_cast<int>(*isa) > static_cast<int>(active_isa()))
        return unsupported_error("{} {}: this machine runs at most {}", flag, name, isa_name(active_isa()));
    return Status::ok();
}

Status check_schedule_flag(std::string_view flag, std::string_view schedule) {
    if (schedule == "one-shot" || schedule == "decode" || schedule == "mixed") return Status::ok();
    constexpr std::string_view chunk = "chunk:";
    if (schedule.substr(0, chunk.size()) != chunk)
        return invalid_argument_error("{} {}: expected one-shot, chunk:N, decode or mixed", flag, schedule);
    const std::string_view n = schedule.substr(chunk.size());
    const std::optional<int64_t> value = parse_decimal(n);
    if (!value || *value < kScheduleChunkRange.lo || *value > kScheduleChunkRange.hi)
        return invalid_argument_error("{} {}: the chunk size {} must be an integer in [{}, {}]", flag, schedule, n,
                                      kScheduleChunkRange.lo, kScheduleChunkRange.hi);
    return Status::ok();
}

Status check_bench_flags(const LayerBenchOptions& o) {
    // Each flag was range-checked as it was parsed (main.cpp): every sum below fits in int64.
    const int64_t max_batch = o.batches.empty() ? 0 : *std::max_element(o.batches.begin(), o.batches.end());
    // The contexts the sweep builds, as run_layer_bench sizes its caches for them.
    struct Context {
        std::string flags;
        int64_t tokens;
    };
    std::vector<Context> contexts;
    for (int64_t c : o.contexts) contexts.push_back({fmt::format("--contexts {} (+ 1 decoded)", c), c + 1});
    for (int64_t c : o.prefill_chunks)
        contexts.push_back({fmt::format("--prefill-context {} + --prefill-chunks {}", o.prefill_context, c),
                            o.prefill_context + c});
    contexts.push_back({fmt::format("--compare-context {} (+ 1 decoded)", o.compare_context), o.compare_context + 1});
    const Context& longest = *std::max_element(contexts.begin(), contexts.end(),
                                               [](const Context& a, const Context& b) { return a.tokens < b.tokens; });
    if (max_batch * longest.tokens > kBenchMaxCachedTokens)
        return invalid_argument_error(
            "--batches {} × {} = {} cached tokens per layer, more than the bench's limit of {}", max_batch,
            longest.flags, max_batch * longest.tokens, kBenchMaxCachedTokens);
    for (const std::string& preset : o.presets) {
        SIEVE_ASSIGN_OR_RETURN(ModelConfig config, preset_config(preset));
        const int64_t max_position = max_position_embeddings(config);
        for (const Context& c : contexts)
            if (c.tokens > max_position)
                return invalid_argument_error("{} = {} tokens, more than max_position_embeddings {} of {} ({})",
                                              c.flags, c.tokens, max_position, preset, config.model_type);
    }
    return Status::ok();
}

}  // namespace sieve::cli
