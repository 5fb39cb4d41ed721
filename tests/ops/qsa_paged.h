// Paged caches for the QSA op tests: a guarded block pool, per-request block tables over a random
// permutation of its blocks (so that a kernel that ignores the table reads the wrong rows), and
// helpers to write and read entries.
#pragma once

#include <algorithm>
#include <numeric>

#include "rows.h"
#include "ops/cache_view.h"
#include "ops/block_tables.h"

namespace sieve::test {

struct QsaPagedCache {
    int64_t block_size = 1, entry_bytes = 0, block_bytes = 0, n_blocks = 0;
    std::vector<int64_t> entries;  // [n_requests] entries per request
    std::vector<int32_t> table;    // [n_requests, stride]
    int64_t stride = 1;
    std::unique_ptr<GuardedBuffer> storage;

    // Entries of `entries_per_request` requests of `entry_bytes` each; blocks of `block_size`
    // entries with `pad` spare bytes each; some spare blocks stay unused.
    QsaPagedCache(Rng& rng, std::vector<int64_t> entries_per_request, int64_t block_size_, int64_t entry_bytes_,
                  int64_t pad = 0)
        : block_size(block_size_), entry_bytes(entry_bytes_), entries(std::move(entries_per_request)) {
        block_bytes = block_size * entry_bytes + pad;
        std::vector<int64_t> blocks_per_request;
        for (int64_t e : entries) {
            blocks_per_request.push_back((e + block_size - 1) / block_size);
            stride = std::max(stride, blocks_per_request.back());
        }
        n_blocks = std::accumulate(blocks_per_request.begin(), blocks_per_request.end(), int64_t{0}) + 3;
        std::vector<int32_t> perm(static_cast<size_t>(n_blocks));
        std::iota(perm.begin(), perm.end(), 0);
        std::shuffle(perm.begin(), perm.end(), rng.engine());
        table.assign(entries.size() * static_cast<size_t>(stride), -1);
        size_t next = 0;
        for (size_t q = 0; q < entries.size(); ++q)
            for (int64_t b = 0; b < blocks_per_request[q]; ++b) table[q * static_cast<size_t>(stride) + static_cast<size_t>(b)] = perm[next++];
        storage = std::make_unique<GuardedBuffer>(static_cast<size_t>(n_blocks * block_bytes));
    }
    CacheView view() const {
        return CacheView{static_cast<uint8_t*>(const_cast<void*>(storage->data())), block_bytes, block_size, entry_bytes};
    }
    int64_t slot(int64_t q, int64_t e) const {
        return static_cast<int64_t>(table[static_cast<size_t>(q * stride + e / block_size)]) * block_size + e % block_size;
    }
    uint8_t* entry(int64_t q, int64_t e) { return view().row(slot(q, e)); }
    // Fills every entry of every request with values of `t` (f32 | bf16) from gen().
    template <typename Gen>
    void fill(DType t, int64_t n_values, Gen&& gen) {
        for (size_t q = 0; q < entries.size(); ++q)
            for (int64_t e = 0; e < entries[q]; ++e) fill_rows(entry(static_cast<int64_t>(q), e), t, 1, 1, n_values, n_values, 0, gen);
    }
    BlockTables tables(const std::vector<int32_t>& token_request) const {
        BlockTables t;
        t.block_table = table.data();
        t.token_request = token_request.data();
        t.n_requests = static_cast<int64_t>(entries.size());
        t.block_table_stride = stride;
        return t;
    }
};

}  // namespace sieve::test
