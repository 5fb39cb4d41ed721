// ops/block_tables.h — how ops find a request's cache entries: the per-request block tables of one
// cache group, packed for one step (kv/paged_cache.h; specs/qsa.md §5.1, §5.3, §6 "block_table",
// deepseek_v4.md §5 "Batch metadata", dsa_mla.md §4.3).
//
// Entry e (a token position, a compressed-entry or group number) of the request in row q of the
// table lives at
//   slot = block_table[q · block_table_stride + e / view.block_size] · view.block_size + e % view.block_size
// (paged_slot below) and its bytes at view.row(slot) (ops/cache_view.h). The ops say which entries they
// read; those must be resident (block id ≥ 0); check_indices() checks the blocks of every entry an op reads.
// The validate_* helpers below never read the tables (an op's validate() uses them); the check_*
// helpers read token_request and block_table (an op's check_indices() uses them, on host memory).
#pragma once

#include <cstdint>

#include "sieve/core/status.h"
#include "sieve/ops/cache_view.h"

namespace sieve {

// The one formula from a request-local entry to its global slot (kv/paged_cache.h); `row` is the
// request's table row. The caller has checked that the entry's block is in the row and resident.
inline int64_t paged_slot(const int32_t* row, int64_t entry, int64_t block_size) {
    return static_cast<int64_t>(row[entry / block_size]) * block_size + entry % block_size;
}

struct BlockTables {
    const int32_t* block_table = nullptr;    // [n_requests, block_table_stride] physical block ids, −1 = released
    const int32_t* token_request = nullptr;  // [n_tokens] row of each token's request in block_table
    int64_t n_requests = 0;
    int64_t block_table_stride = 0;          // ≥ 1: blocks per row (the longest request's table)
};

// The table's shape and pointers. `op` and `name` start the messages.
Status validate_block_tables(const char* op, const char* name, const BlockTables& t, int64_t n_tokens);
// Every token_request[t] ∈ [0, n_requests) (reads token_request).
Status check_token_requests(const char* op, const char* name, const BlockTables& t, int64_t n_tokens);

// The view's geometry: a base, block_size ≥ 1, entry_bytes ≥ min_entry_bytes and
// block_bytes ≥ block_size · entry_bytes.
Status validate_paged_view(const char* op, const char* name, const CacheView& view, int64_t min_entry_bytes);

// Checks that entries [begin, end) of request row q are resident in `view`'s geometry: their blocks
// exist in the row (end ≤ block_table_stride · block_size) and hold block ids in [0, n_blocks) (reads the
// row; n_blocks = −1: an op without the cache's extent checks ids ≥ 0 only).
Status check_entries_resident(const char* op, const char* name, const BlockTables& t, const CacheView& view,
                              int64_t q, int64_t begin, int64_t end, int64_t n_blocks = -1);

// Checks, without allocating, that every token t reads only resident entries [0, need(t)) of its
// request row (consecutive tokens of one request are checked incrementally).
template <typename Need>
Status check_tokens_resident(const char* op, const char* name, const BlockTables& t, const CacheView& view,
                             int64_t n_tokens, Need&& need, int64_t n_blocks = -1) {
    int64_t last_q = -1, checked = 0;
    for (int64_t i = 0; i < n_tokens; ++i) {
        const int64_t q = t.token_request[i];
        if (q != last_q) last_q = q, checked = 0;
        const int64_t n = need(i);
        if (n <= checked) continue;
        SIEVE_RETURN_IF_ERROR(check_entries_resident(op, name, t, view, q, checked, n, n_blocks));
        checked = n;
    }
    return Status::ok();
}

}  // namespace sieve
