#include "sieve/ops/kv_load.h"

#include "sieve/ops/op_common.h"

namespace sieve {

Status validate(const KvLoadParams& p) {
    constexpr std::string_view op = "kv_load";
    using namespace op_check;
    SIEVE_RETURN_IF_ERROR(require_dtype(op, "y_type", p.y_type, {DType::f32, DType::bf16}));
    SIEVE_RETURN_IF_ERROR(require_at_least(op, "n_rows", p.n_rows, 0));
    SIEVE_ASSIGN_OR_RETURN(int64_t y_extent, output_rows_extent(op, "y", {p.n_rows, 1, p.layout.dim, p.y_row_stride, 0},
                                                                dtype_size(p.y_type)));
    (void)y_extent;
    SIEVE_RETURN_IF_ERROR(validate_cache_view(op, "", p.cache, p.layout));
    if (p.n_rows == 0) return Status::ok();
    SIEVE_RETURN_IF_ERROR(require_ptr(op, "y", p.y));
    SIEVE_RETURN_IF_ERROR(require_ptr(op, "slots", p.slots));
    return Status::ok();
}

Status check_indices(const KvLoadParams& p) {
    constexpr std::string_view op = "kv_load";
    for (int64_t r = 0; r < p.n_rows; ++r)
        if (p.slots[r] < -1) return invalid_argument_error("{}: slots[{}] = {}, expected ≥ −1", op, r, p.slots[r]);
    return Status::ok();
}

}  // namespace sieve
