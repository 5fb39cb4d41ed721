#include "sieve/ops/cache_store.h"

#include "sieve/ops/op_common.h"

namespace sieve {

CacheStoreParams whole_row_store(const void* x, DType x_type, int64_t x_row_stride, int64_t n_rows,
                                 const int32_t* slots, const CacheView& cache, int64_t n_slots,
                                 const CacheRecordLayout& layout) {
    CacheStoreParams p;
    p.x = x;
    p.x_type = x_type;
    p.x_row_stride = x_row_stride;
    p.slots = slots;
    p.cache = cache;
    p.layout = layout;
    p.n_slots = n_slots;
    p.n_rows = n_rows;
    p.dim = layout.dim;
    return p;
}

Status validate(const CacheStoreParams& p) {
    constexpr std::string_view op = "cache_store";
    using namespace op_check;
    SIEVE_RETURN_IF_ERROR(require_dtype(op, "x_type", p.x_type, {DType::f32, DType::bf16}));
    SIEVE_RETURN_IF_ERROR(require_at_least(op, "n_rows", p.n_rows, 0));
    SIEVE_RETURN_IF_ERROR(validate_cache_view(op, "", p.cache, p.layout, p.n_slots));
    const CacheRecordLayout& l = p.layout;
    if (l.is_fp8()) {
        if (p.dim != l.dim || p.entry_offset != 0)
            return invalid_argument_error("{}: dim = {}, entry_offset = {}: a {} row is the whole entry (dim = {}, "
                                          "entry_offset = 0)",
                                          op, p.dim, p.entry_offset, cache_record_format_name(l.format), l.dim);
    } else if (p.dim < 1 || p.entry_offset < 0 || p.entry_offset > l.dim - p.dim) {
        return invalid_argument_error("{}: dim = {}, entry_offset = {}: the row must lie inside the {} entry of dim {} "
                                      "(dim ≥ 1, 0 ≤ entry_offset ≤ {} − dim)",
                                      op, p.dim, p.entry_offset, cache_record_format_name(l.format), l.dim, l.dim);
    }
    SIEVE_ASSIGN_OR_RETURN(int64_t x_extent,
                           rows_extent(op, "x", {p.n_rows, 1, p.dim, p.x_row_stride, 0}, dtype_size(p.x_type)));
    if (p.n_rows == 0) return Status::ok();
    SIEVE_RETURN_IF_ERROR(require_ptr(op, "x", p.x));
    SIEVE_RETURN_IF_ERROR(require_ptr(op, "slots", p.slots));
    // The extents fit int64: rows_extent and validate_cache_view checked them.
    const int64_t cache_bytes = p.n_slots / p.cache.block_size * p.cache.block_bytes;
    SIEVE_RETURN_IF_ERROR(require_same_or_disjoint(op, "x", p.x, x_extent * static_cast<int64_t>(dtype_size(p.x_type)),
                                                   "cache", p.cache.base, cache_bytes, false));
    SIEVE_RETURN_IF_ERROR(require_same_or_disjoint(op, "slots", p.slots, p.n_rows * 4, "cache", p.cache.base,
                                                   cache_bytes, false));
    return Status::ok();
}

Status check_indices(const CacheStoreParams& p) {
    constexpr std::string_view op = "cache_store";
    for (int64_t r = 0; r < p.n_rows; ++r)
        if (p.slots[r] < -1 || p.slots[r] >= p.n_slots)
            return invalid_argument_error("{}: slots[{}] = {}, expected −1 or a slot in [0, {})", op, r, p.slots[r],
                                          p.n_slots);
    return Status::ok();
}

}  // namespace sieve
