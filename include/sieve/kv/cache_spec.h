// What a layer keeps per request between steps: one CacheSpec per cache kind. The runtime sizes its
// block pools from these, and `sieve inspect` / `sieve run` report bytes per token from them.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace sieve {

// exact: fp32 compute and fp32 caches, matches transformers. deployed: the production formats
// (DESIGN.md "Numerics profiles"; every family spec's "Decisions for sieve").
enum class NumericsProfile { exact, deployed };
std::string_view numerics_profile_name(NumericsProfile profile);  // "exact" / "deployed"

struct CacheSpec {
    std::string name;    // "swa_kv", "compressed_kv", "indexer_keys", ...
    std::string format;  // what one entry holds: the entry format (ops/cache_record.h) and its values, e.g.
                         // "fp8_model1 [448 + 64 rope]" or "f32 [512]"
    int64_t entry_bytes = 0;       // bytes of one entry
    int64_t tokens_per_entry = 1;  // 1, or the compress ratio m (one entry per m tokens)
    // 0: the cache keeps the whole history. > 0: only the entries of the last `window_tokens`
    // tokens are kept (a sliding window, or the rows of a compressor's unfinished block).
    int64_t window_tokens = 0;
};

// Bytes a request of `context_tokens` tokens holds in this cache (whole entries only).
int64_t cache_bytes_for_context(const CacheSpec& spec, int64_t context_tokens);
// Bytes per token over a long context: entry_bytes / tokens_per_entry, or 0 for a bounded
// (windowed) cache, whose cost does not grow with the context.
double cache_bytes_per_token(const CacheSpec& spec);

}  // namespace sieve
