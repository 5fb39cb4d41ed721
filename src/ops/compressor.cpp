#include "sieve/ops/compressor.h"

#include "sieve/ops/op_common.h"

namespace sieve {

namespace {

Status check_state_view(std::string_view op, const CacheView& v, int64_t width) {
    if (v.base == nullptr) return invalid_argument_error("{}: state cache has no storage (base is null)", op);
    int64_t row_bytes = 0;
    if (__builtin_mul_overflow(width, int64_t{8}, &row_bytes) || v.entry_bytes != row_bytes)
        return invalid_argument_error("{}: state cache entry_bytes = {}, expected 2·width·4 = {} for width {}", op,
                                      v.entry_bytes, 8 * width, width);
    if (v.block_size < 1) return invalid_argument_error("{}: state cache block_size = {}, expected ≥ 1", op, v.block_size);
    int64_t need = 0;
    if (__builtin_mul_overflow(v.block_size, v.entry_bytes, &need) || v.block_bytes < need)
        return invalid_argument_error("{}: state cache block_bytes = {} < block_size {} · entry_bytes {}", op,
                                      v.block_bytes, v.block_size, v.entry_bytes);
    if (v.entry_bytes % 4 != 0 || v.block_bytes % 4 != 0)
        return invalid_argument_error("{}: state cache rows are not 4-byte aligned (block_bytes {})", op, v.block_bytes);
    return Status::ok();
}

}  // namespace

Status validate(const CompressorStateStoreParams& p) {
    constexpr std::string_view op = "compressor_state_store";
    using namespace op_check;
    SIEVE_RETURN_IF_ERROR(require_at_least(op, "n_tokens", p.n_tokens, 0));
    SIEVE_RETURN_IF_ERROR(require_at_least(op, "width", p.width, 1));
    SIEVE_RETURN_IF_ERROR(require_at_least(op, "ratio", p.ratio, 1));
    SIEVE_ASSIGN_OR_RETURN(int64_t kv_extent, rows_extent(op, "kv", {p.n_tokens, 1, p.width, p.kv_row_stride, 0}, 4));
    SIEVE_ASSIGN_OR_RETURN(int64_t g_extent, rows_extent(op, "gate", {p.n_tokens, 1, p.width, p.gate_row_stride, 0}, 4));
    (void)kv_extent;
    (void)g_extent;
    SIEVE_RETURN_IF_ERROR(check_state_view(op, p.state, p.width));
    if (p.n_tokens == 0) return Status::ok();
    SIEVE_RETURN_IF_ERROR(require_ptr(op, "kv", p.kv));
    SIEVE_RETURN_IF_ERROR(require_ptr(op, "gate", p.gate));
    SIEVE_RETURN_IF_ERROR(require_ptr(op, "ape", p.ape));
    SIEVE_RETURN_IF_ERROR(require_ptr(op, "positions", p.positions));
    SIEVE_RETURN_IF_ERROR(require_ptr(op, "slots", p.slots));
    return Status::ok();
}

Status check_indices(const CompressorStateStoreParams& p) {
    constexpr std::string_view op = "compressor_state_store";
    for (int64_t t = 0; t < p.n_tokens; ++t) {
        if (p.positions[t] < 0)
            return invalid_argument_error("{}: positions[{}] = {}, expected ≥ 0", op, t, p.positions[t]);
        if (p.slots[t] < -1) return invalid_argument_error("{}: slots[{}] = {}, expected ≥ −1", op, t, p.slots[t]);
    }
    return Status::ok();
}

Status validate(const CompressorPoolParams& p) {
    constexpr std::string_view op = "compressor_pool";
    using namespace op_check;
    SIEVE_RETURN_IF_ERROR(require_at_least(op, "n_entries", p.n_entries, 0));
    SIEVE_RETURN_IF_ERROR(require_at_least(op, "head_dim", p.head_dim, 1));
    SIEVE_RETURN_IF_ERROR(require_at_least(op, "ratio", p.ratio, 1));
    if (p.n_entries > 1 && p.gather_stride < p.n_rows())
        return invalid_argument_error("{}: gather_stride = {} < coff·ratio = {}", op, p.gather_stride, p.n_rows());
    SIEVE_ASSIGN_OR_RETURN(int64_t g_extent,
                           rows_extent(op, "gather_slots", {p.n_entries, 1, p.n_rows(), p.gather_stride, 0}, 4));
    SIEVE_ASSIGN_OR_RETURN(int64_t o_extent,
                           output_rows_extent(op, "out", {p.n_entries, 1, p.head_dim, p.out_row_stride, 0}, 4));
    SIEVE_RETURN_IF_ERROR(check_state_view(op, p.state, p.width()));
    if (p.n_entries == 0) return Status::ok();
    SIEVE_RETURN_IF_ERROR(require_ptr(op, "gather_slots", p.gather_slots));
    SIEVE_RETURN_IF_ERROR(require_ptr(op, "out", p.out));
    SIEVE_RETURN_IF_ERROR(
        require_same_or_disjoint(op, "gather_slots", p.gather_slots, g_extent * 4, "out", p.out, o_extent * 4, false));
    return Status::ok();
}

Status check_indices(const CompressorPoolParams& p) {
    constexpr std::string_view op = "compressor_pool";
    for (int64_t k = 0; k < p.n_entries; ++k)
        for (int64_t j = 0; j < p.n_rows(); ++j)
            if (p.gather_slots[k * p.gather_stride + j] < -1)
                return invalid_argument_error("{}: gather_slots[{}, {}] = {}, expected ≥ −1", op, k, j,
                                              p.gather_slots[k * p.gather_stride + j]);
    return Status::ok();
}

}  // namespace sieve
