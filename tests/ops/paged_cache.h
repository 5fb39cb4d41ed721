// The paged caches of the op tests: a pool of n_blocks blocks of block_size entries in one guarded
// buffer, every byte poisoned until written, whose block stride may exceed the entries (a kernel must use
// the view's block_bytes); optionally requests whose entries live in blocks of a random permutation of the
// pool (so that a kernel that ignores the block table reads the wrong rows), with helpers to write and
// read entries and to build the step's BlockTables (ops/block_tables.h).
#pragma once

#include <algorithm>
#include <numeric>
#include <vector>

#include "sieve/ops/block_tables.h"
#include "sieve/ops/cache_view.h"
#include "rows.h"

namespace sieve::test {

struct PagedTestCache {
    int64_t n_blocks = 0, block_size = 1, entry_bytes = 0, block_bytes = 0;
    GuardedBuffer buf;
    std::vector<int64_t> entries;  // [n_requests] entries per request (the request constructor)
    std::vector<int32_t> table;    // [n_requests, stride] their blocks
    int64_t stride = 1;

    // A pool without requests: block_bytes = block_size · entry_bytes + pad.
    PagedTestCache(int64_t n_blocks_, int64_t block_size_, int64_t entry_bytes_, int64_t pad = 0)
        : n_blocks(n_blocks_),
          block_size(block_size_),
          entry_bytes(entry_bytes_),
          block_bytes(block_size_ * entry_bytes_ + pad),
          buf(static_cast<size_t>(std::max<int64_t>(1, n_blocks_ * (block_size_ * entry_bytes_ + pad)))) {}
    // Requests of entries_per_request entries each, in blocks drawn from a random permutation of a pool
    // with 3 spare blocks that no request uses.
    PagedTestCache(Rng& rng, std::vector<int64_t> entries_per_request, int64_t block_size_, int64_t entry_bytes_,
                   int64_t pad = 0)
        : PagedTestCache(blocks_for(entries_per_request, block_size_) + 3, block_size_, entry_bytes_, pad) {
        entries = std::move(entries_per_request);
        for (int64_t e : entries) stride = std::max(stride, (e + block_size - 1) / block_size);
        std::vector<int32_t> perm(static_cast<size_t>(n_blocks));
        std::iota(perm.begin(), perm.end(), 0);
        std::shuffle(perm.begin(), perm.end(), rng.engine());
        table.assign(entries.size() * static_cast<size_t>(stride), -1);
        size_t next = 0;
        for (size_t q = 0; q < entries.size(); ++q)
            for (int64_t b = 0; b < (entries[q] + block_size - 1) / block_size; ++b)
                table[q * static_cast<size_t>(stride) + static_cast<size_t>(b)] = perm[next++];
    }

    CacheView view() const {
        return CacheView{static_cast<uint8_t*>(const_cast<void*>(buf.data())), block_bytes, block_size, entry_bytes};
    }
    int64_t n_slots() const { return n_blocks * block_size; }
    void copy_from(const PagedTestCache& o) { std::memcpy(buf.data(), o.buf.data(), buf.bytes()); }

    // Entry e of request q: its global slot and (plain rows) its bytes.
    int64_t slot(int64_t q, int64_t e) const {
        return static_cast<int64_t>(table[static_cast<size_t>(q * stride + e / block_size)]) * block_size + e % block_size;
    }
    uint8_t* entry(int64_t q, int64_t e) { return view().row(slot(q, e)); }
    // Fills every entry of every request with n_values values of `t` (f32 | bf16) from gen().
    template <typename Gen>
    void fill(DType t, int64_t n_values, Gen&& gen) {
        for (size_t q = 0; q < entries.size(); ++q)
            for (int64_t e = 0; e < entries[q]; ++e)
                fill_rows(entry(static_cast<int64_t>(q), e), t, 1, 1, n_values, n_values, 0, gen);
    }
    BlockTables tables(const std::vector<int32_t>& token_request) const {
        return BlockTables{table.data(), token_request.data(), static_cast<int64_t>(entries.size()), stride};
    }

private:
    static int64_t blocks_for(const std::vector<int64_t>& entries_per_request, int64_t block_size) {
        int64_t n = 0;
        for (int64_t e : entries_per_request) n += (e + block_size - 1) / block_size;
        return n;
    }
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
