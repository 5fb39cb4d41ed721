#include "sieve/ops/block_tables.h"

namespace sieve {

// Messages are formatted only on failure: these checks run on every op call and must not allocate.
Status validate_block_tables(const char* op, const char* name, const BlockTables& t, int64_t n_tokens) {
    if (t.n_requests < 0) return invalid_argument_error("{}: {}.n_requests = {}, expected ≥ 0", op, name, t.n_requests);
    if (n_tokens == 0) return Status::ok();
    if (t.n_requests < 1)
        return invalid_argument_error("{}: {}.n_requests = {} with {} tokens, expected ≥ 1", op, name, t.n_requests,
                                      n_tokens);
    if (t.block_table_stride < 1)
        return invalid_argument_error("{}: {}.block_table_stride = {}, expected ≥ 1", op, name, t.block_table_stride);
    int64_t cells = 0;
    if (__builtin_mul_overflow(t.n_requests, t.block_table_stride, &cells))
        return invalid_argument_error("{}: {} table [{}, {}] overflows int64", op, name, t.n_requests,
                                      t.block_table_stride);
    if (t.block_table == nullptr) return invalid_argument_error("{}: {}.block_table is null", op, name);
    if (t.token_request == nullptr) return invalid_argument_error("{}: {}.token_request is null", op, name);
    return Status::ok();
}

Status check_token_requests(const char* op, const char* name, const BlockTables& t, int64_t n_tokens) {
    for (int64_t i = 0; i < n_tokens; ++i) {
        const int32_t q = t.token_request[i];
        if (q < 0 || q >= t.n_requests)
            return invalid_argument_error("{}: {}.token_request[{}] = {}, expected in [0, n_requests = {})", op, name,
                                          i, q, t.n_requests);
    }
    return Status::ok();
}

Status validate_paged_view(const char* op, const char* name, const CacheView& view, int64_t min_entry_bytes) {
    if (view.base == nullptr) return invalid_argument_error("{}: {} cache view has no storage (base is null)", op, name);
    if (view.block_size < 1)
        return invalid_argument_error("{}: {} cache view block_size = {}, expected ≥ 1", op, name, view.block_size);
    if (view.entry_bytes < min_entry_bytes)
        return invalid_argument_error("{}: {} cache entry of {} bytes, the op reads {} bytes per entry", op, name,
                                      view.entry_bytes, min_entry_bytes);
    int64_t need = 0;
    if (__builtin_mul_overflow(view.block_size, view.entry_bytes, &need) || view.block_bytes < need)
        return invalid_argument_error("{}: {} cache block_bytes = {} < block_size {} · entry_bytes {}", op, name,
                                      view.block_bytes, view.block_size, view.entry_bytes);
    return Status::ok();
}

Status check_entries_resident(const char* op, const char* name, const BlockTables& t, const CacheView& view,
                              int64_t q, int64_t begin, int64_t end, int64_t n_blocks) {
    if (end <= begin) return Status::ok();
    const int64_t blocks = (end + view.block_size - 1) / view.block_size;
    if (blocks > t.block_table_stride)
        return invalid_argument_error("{}: {} request row {} reads entries [0, {}) = {} blocks of {}, but the table "
                                      "has {} blocks per row",
                                      op, name, q, end, blocks, view.block_size, t.block_table_stride);
    const int32_t* row = t.block_table + q * t.block_table_stride;
    for (int64_t b = begin / view.block_size; b < blocks; ++b)
        if (row[b] < 0)
            return invalid_argument_error("{}: {} request row {}: block {} (entries [{}, {})) is not resident "
                                          "(block id {})",
                                          op, name, q, b, b * view.block_size, (b + 1) * view.block_size, row[b]);
        else if (n_blocks >= 0 && row[b] >= n_blocks)
            return invalid_argument_error("{}: {} request row {}: block {} (entries [{}, {})) at block id {}, the cache "
                                          "has {} blocks",
                                          op, name, q, b, b * view.block_size, (b + 1) * view.block_size, row[b], n_blocks);
    return Status::ok();
}

}  // namespace sieve
