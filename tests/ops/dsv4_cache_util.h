// A paged cache in a guarded buffer for the DeepSeek-V4 op tests (ops/cache_record.h, ops/compressor.h):
// n_blocks blocks of block_size entries, block_bytes padded beyond block_size · entry_bytes, every
// byte poisoned until written, and a random slot for each request-local entry.
#pragma once

#include <algorithm>
#include <numeric>
#include <vector>

#include "ops/cache_view.h"
#include "rows.h"

namespace sieve::test {

struct TestCache {
    int64_t entry_bytes, block_size, n_blocks, block_bytes;
    GuardedBuffer buf;

    TestCache(int64_t entry_bytes_, int64_t block_size_, int64_t n_blocks_, int64_t extra_pad = 64)
        : entry_bytes(entry_bytes_),
          block_size(block_size_),
          n_blocks(n_blocks_),
          block_bytes((block_size_ * entry_bytes_ + 63) / 64 * 64 + extra_pad),
          buf(static_cast<size_t>(block_bytes * n_blocks_)) {}
    CacheView view() { return CacheView{buf.as<uint8_t>(), block_bytes, block_size, entry_bytes}; }
    int64_t capacity() const { return block_size * n_blocks; }
    void copy_from(const TestCache& o) { std::memcpy(buf.data(), o.buf.data(), buf.bytes()); }
};

// n distinct slots drawn from [0, capacity), in random order.
inline std::vector<int32_t> random_slots(Rng& rng, int64_t n, int64_t capacity) {
    std::vector<int32_t> all(static_cast<size_t>(capacity));
    std::iota(all.begin(), all.end(), 0);
    std::shuffle(all.begin(), all.end(), rng.engine());
    all.resize(static_cast<size_t>(n));
    return all;
}

}  // namespace sieve::test
