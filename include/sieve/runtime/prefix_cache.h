// Prefix caching over sieve's own cache pools: a request whose prompt begins with tokens an earlier
// request already ran takes that prefix's cache blocks instead of computing them again (vLLM's automatic
// prefix caching, for every cache a sparse-attention layer keeps).
//
// A prefix is cached in chunks of chunk_tokens() tokens: the least common multiple of every group's block
// span (block_size · tokens_per_entry), so that a chunk owns whole blocks of every group and a request that
// starts after a cached prefix of H tokens (a multiple of the chunk) writes only blocks of its own. Every
// block a chunk holds is final once its request has run past the chunk's end:
//   per-token caches (DSA's latent rows and indexer keys, QSA's KV): entry p is token p's, written once;
//   compressed caches (V4's CSA / HCA entries and their indexer keys, QSA's pooled keys): entry k pools the
//     tokens [k·m, (k + 1)·m); H is a multiple of m, so entries below H / m are complete and the next
//     request writes from H / m on;
//   windowed caches (V4's sliding window and compressor-state rows, QSA's raw-key ring): rows are
//     positional too, and a token at H reads those of [H − window, H) only; a chunk keeps its windowed
//     blocks, and a request that starts at H holds just the ones its first token sees.
// So a hit gives a request exactly the bytes it would have computed: the layers' caches are causal, and
// the caller's keys promise the same tokens.
//
// Keys are the caller's: one 64-bit key per chunk of a prompt, key i naming the prompt's first (i + 1)
// chunks (a chained hash of their token ids, as engines key their prefix caches); sieve's layers see
// activations, not tokens. A cached chunk holds one reference to each of its blocks; under pool pressure
// the least recently used chunk that no other cached chunk extends is evicted (its blocks stay with the
// requests that still hold them).
#pragma once

#include <cstdint>
#include <set>
#include <unordered_map>
#include <utility>
#include <vector>

#include "sieve/core/status.h"
#include "sieve/kv/paged_cache.h"

namespace sieve {

class PrefixCache {
public:
    explicit PrefixCache(std::vector<CacheGroup*> groups);

    int64_t chunk_tokens() const { return chunk_tokens_; }

    // Request `request`, which holds no blocks yet: installs the longest cached run of keys[0, c) with
    // c · chunk_tokens() ≤ max_tokens as its first blocks in every group, and returns the tokens they
    // hold (c · chunk_tokens(); 0 on a miss).
    Expected<int64_t> attach(RequestId request, const std::vector<uint64_t>& keys, int64_t max_tokens);
    // Caches the chunks of `request` below its first `tokens` tokens (which must be final: no rollback
    // returns below them) under keys[0, …), those not cached yet, while the request still holds their
    // blocks; a chunk whose windowed blocks it has already released ends the run. Returns how many of its
    // leading chunks are cached. A caller that publishes as the request runs passes that count back as
    // `from`, so that each call looks at the new chunks only (from 0 again if chunk from − 1 was evicted).
    size_t publish(RequestId request, const std::vector<uint64_t>& keys, int64_t tokens, size_t from = 0);
    // Evicts the least recently used chunk that no cached chunk extends; false when none is cached.
    bool evict_one();

    struct Stats {
        int64_t lookups = 0;      // attach calls
        int64_t hits = 0;         // of them, the ones that reused a prefix
        int64_t hit_tokens = 0;   // tokens reused
        int64_t cached_chunks = 0;
        int64_t evicted_chunks = 0;
    };
    const Stats& stats() const { return stats_; }

private:
    struct Chunk {
        uint64_t parent = 0;  // the key of the chunk before (chunks after the first)
        bool first = false;
        int64_t children = 0;  // cached chunks that extend this one
        uint64_t last_use = 0;
        std::vector<std::vector<int32_t>> blocks;  // [group][block of the chunk]
    };
    // The cached chunk `keys[i]` when it continues keys[i − 1] (or starts a prompt), else nullptr.
    Chunk* find(const std::vector<uint64_t>& keys, size_t i);
    // Marks chunk `key` used now (it moves to the back of the eviction order if it is a leaf).
    void touch(uint64_t key, Chunk& chunk);

    std::vector<CacheGroup*> groups_;
    int64_t chunk_tokens_ = 1;
    std::unordered_map<uint64_t, Chunk> chunks_;
    std::set<std::pair<uint64_t, uint64_t>> leaves_;  // (last use, key) of the chunks no cached chunk extends
    uint64_t clock_ = 0;
    Stats stats_;
};

}  // namespace sieve
