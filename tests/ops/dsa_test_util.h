// Paged caches in guarded buffers for the DSA-on-MLA op tests (sparse_attention_test.cpp,
// dsa_indexer_test.cpp): a CacheView over poisoned blocks whose block stride may exceed the entries.
#pragma once

#include <algorithm>
#include <numeric>
#include <vector>

#include "harness.h"
#include "ops/cache_view.h"

namespace sieve::test {

struct GuardedCache {
    GuardedBuffer buf;
    CacheView view;
    int64_t n_blocks = 0;

    GuardedCache(int64_t n_blocks_, int64_t block_size, int64_t entry_bytes, int64_t extra_block_bytes = 0)
        : buf(static_cast<size_t>(std::max<int64_t>(1, n_blocks_ * (block_size * entry_bytes + extra_block_bytes)))),
          n_blocks(n_blocks_) {
        view.base = buf.as<uint8_t>();
        view.block_bytes = block_size * entry_bytes + extra_block_bytes;
        view.block_size = block_size;
        view.entry_bytes = entry_bytes;
    }
    int64_t n_slots() const { return n_blocks * view.block_size; }
};

// A block table for one sequence of n_entries entries: distinct physical blocks in random order,
// drawn from [0, n_blocks) (the caller makes sure there are enough).
inline std::vector<int32_t> random_block_table(Rng& rng, int64_t n_entries, int64_t block_size, int64_t n_blocks,
                                               std::vector<int32_t>& free_blocks) {
    if (free_blocks.empty()) {
        free_blocks.resize(static_cast<size_t>(n_blocks));
        std::iota(free_blocks.begin(), free_blocks.end(), 0);
        std::shuffle(free_blocks.begin(), free_blocks.end(), rng.engine());
    }
    std::vector<int32_t> table;
    for (int64_t b = 0; b < (n_entries + block_size - 1) / block_size; ++b) {
        table.push_back(free_blocks.back());
        free_blocks.pop_back();
    }
    return table;
}

}  // namespace sieve::test
