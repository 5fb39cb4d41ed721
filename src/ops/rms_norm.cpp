#include "sieve/ops/rms_norm.h"

#include <cmath>

#include "sieve/ops/op_common.h"

namespace sieve {

Status validate(const RmsNormParams& p) {
    constexpr std::string_view op = "rms_norm";
    using namespace op_check;
    SIEVE_RETURN_IF_ERROR(require_dtype(op, "x_type", p.x_type, {DType::f32, DType::bf16}));
    SIEVE_RETURN_IF_ERROR(require_dtype(op, "y_type", p.y_type, {DType::f32, DType::bf16}));
    SIEVE_RETURN_IF_ERROR(require_at_least(op, "dim", p.dim, 1));
    if (!std::isfinite(p.eps) || p.eps < 0.0f)
        return invalid_argument_error("{}: eps = {}, expected finite and ≥ 0", op, p.eps);
    switch (p.weight_mode) {
        case RmsNormWeight::none:
            if (p.weight != nullptr) return invalid_argument_error("{}: weight given but weight_mode is none", op);
            break;
        case RmsNormWeight::multiply:
        case RmsNormWeight::one_plus:
            SIEVE_RETURN_IF_ERROR(require_ptr(op, "weight", p.weight));
            break;
        default:
            return invalid_argument_error("{}: weight_mode = {} is not a RmsNormWeight", op,
                                          static_cast<int>(p.weight_mode));
    }
    const RowsLayout xl{p.n_tokens, p.n_heads, p.dim, p.x_token_stride, p.x_head_stride};
    const RowsLayout yl{p.n_tokens, p.n_heads, p.dim, p.y_token_stride, p.y_head_stride};
    SIEVE_ASSIGN_OR_RETURN(int64_t x_extent, rows_extent(op, "x", xl, dtype_size(p.x_type)));
    SIEVE_ASSIGN_OR_RETURN(int64_t y_extent, output_rows_extent(op, "y", yl, dtype_size(p.y_type)));
    if (x_extent == 0) return Status::ok();
    SIEVE_RETURN_IF_ERROR(require_ptr(op, "x", p.x));
    SIEVE_RETURN_IF_ERROR(require_ptr(op, "y", p.y));
    const bool same_view = p.x_type == p.y_type && p.x_token_stride == p.y_token_stride &&
                           p.x_head_stride == p.y_head_stride;
    return require_same_or_disjoint(op, "x", p.x, x_extent * static_cast<int64_t>(dtype_size(p.x_type)), "y", p.y,
                                    y_extent * static_cast<int64_t>(dtype_size(p.y_type)), same_view);
}

}  // namespace sieve
