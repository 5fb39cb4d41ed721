#include "sieve/kv/cache_spec.h"

#include <algorithm>

namespace sieve {

std::string_view numerics_profile_name(NumericsProfile profile) {
    return profile == NumericsProfile::exact ? "exact" : "deployed";
}

int64_t cache_bytes_for_context(const CacheSpec& spec, int64_t context_tokens) {
    const int64_t tokens = spec.window_tokens > 0 ? std::min(context_tokens, spec.window_tokens) : context_tokens;
    // A compressed cache holds one entry per complete group of tokens_per_entry tokens; a window of
    // rows (tokens_per_entry = 1) holds one per token.
    const int64_t entries = spec.window_tokens > 0 && spec.tokens_per_entry == 1
                                ? tokens
                                : tokens / std::max<int64_t>(1, spec.tokens_per_entry);
    return entries * spec.entry_bytes;
}

double cache_bytes_per_token(const CacheSpec& spec) {
    if (spec.window_tokens > 0) return 0.0;
    return static_cast<double>(spec.entry_bytes) / static_cast<double>(std::max<int64_t>(1, spec.tokens_per_entry));
}

}  // namespace sieve
