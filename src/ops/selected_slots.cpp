#include "sieve/ops/selected_slots.h"

#include <limits>

#include "sieve/ops/op_common.h"

namespace sieve {

Status validate(const SelectedSlotsParams& p) {
    constexpr const char* op = "selected_slots";
    using namespace op_check;
    SIEVE_RETURN_IF_ERROR(require_at_least(op, "n_tokens", p.n_tokens, 0));
    SIEVE_RETURN_IF_ERROR(require_at_least(op, "width", p.width, 0));
    SIEVE_RETURN_IF_ERROR(require_at_least(op, "ratio", p.ratio, 1));
    SIEVE_RETURN_IF_ERROR(require_at_least(op, "block_size", p.block_size, 1));
    SIEVE_RETURN_IF_ERROR(require_at_least(op, "n_slots", p.n_slots, 0));
    if (p.n_slots > int64_t{std::numeric_limits<int32_t>::max()} + 1)
        return invalid_argument_error("{}: n_slots = {}: slots are int32, at most 2^31", op, p.n_slots);
    SIEVE_ASSIGN_OR_RETURN(int64_t out_extent,
                           output_rows_extent(op, "slots", {p.n_tokens, 1, p.width, p.slots_row_stride, 0}, 4));
    SIEVE_ASSIGN_OR_RETURN(int64_t sel_extent,
                           rows_extent(op, "selected", {p.n_tokens, 1, p.width, p.selected_row_stride, 0}, 4));
    if (p.n_tokens == 0 || p.width == 0) return Status::ok();
    SIEVE_RETURN_IF_ERROR(require_ptr(op, "positions", p.positions));
    SIEVE_RETURN_IF_ERROR(require_ptr(op, "slots", p.slots));
    SIEVE_RETURN_IF_ERROR(validate_block_tables(op, "tables", p.tables, p.n_tokens));
    const int64_t out_bytes = out_extent * 4;
    SIEVE_RETURN_IF_ERROR(
        require_same_or_disjoint(op, "selected", p.selected, sel_extent * 4, "slots", p.slots, out_bytes, false));
    SIEVE_RETURN_IF_ERROR(
        require_same_or_disjoint(op, "n_scored", p.n_scored, p.n_tokens * 4, "slots", p.slots, out_bytes, false));
    SIEVE_RETURN_IF_ERROR(
        require_same_or_disjoint(op, "positions", p.positions, p.n_tokens * 8, "slots", p.slots, out_bytes, false));
    SIEVE_RETURN_IF_ERROR(require_same_or_disjoint(op, "tables.token_request", p.tables.token_request, p.n_tokens * 4,
                                                   "slots", p.slots, out_bytes, false));
    return require_same_or_disjoint(op, "tables.block_table", p.tables.block_table,
                                    p.tables.n_requests * p.tables.block_table_stride * 4, "slots", p.slots, out_bytes,
                                    false);
}

Status check_indices(const SelectedSlotsParams& p) {
    constexpr const char* op = "selected_slots";
    if (p.n_tokens == 0 || p.width == 0) return Status::ok();
    SIEVE_RETURN_IF_ERROR(check_token_requests(op, "tables", p.tables, p.n_tokens));
    for (int64_t t = 0; t < p.n_tokens; ++t) {
        const int64_t pos = p.positions[t];
        if (pos < 0) return invalid_argument_error("{}: positions[{}] = {}, expected ≥ 0", op, t, pos);
        const int64_t visible = (pos + 1) / p.ratio;
        const int64_t q = p.tables.token_request[t];
        const int32_t* row = p.tables.block_table + q * p.tables.block_table_stride;
        const bool every = p.selected == nullptr || (p.n_scored != nullptr && p.n_scored[t] == 0);
        for (int64_t j = 0; j < p.width; ++j) {
            const int64_t e = every ? j : p.selected[t * p.selected_row_stride + j];
            if (e < 0 || e >= visible) continue;
            const int64_t b = e / p.block_size;
            if (b >= p.tables.block_table_stride || row[b] < 0)
                return invalid_argument_error("{}: token {} (request row {}) reads entry {}, whose block {} is {}", op, t,
                                              q, e, b, b >= p.tables.block_table_stride ? "past the table" : "not resident");
            const int64_t slot = paged_slot(row, e, p.block_size);
            if (slot >= p.n_slots)
                return invalid_argument_error("{}: token {} reads entry {} at slot {}, past the cache's {} slots", op, t, e,
                                              slot, p.n_slots);
        }
    }
    return Status::ok();
}

}  // namespace sieve
