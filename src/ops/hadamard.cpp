#include "sieve/ops/hadamard.h"

#include <cmath>

#include "sieve/ops/op_common.h"

namespace sieve {

Status validate(const HadamardParams& p) {
    constexpr std::string_view op = "hadamard";
    using namespace op_check;
    SIEVE_RETURN_IF_ERROR(require_dtype(op, "x_type", p.x_type, {DType::f32, DType::bf16}));
    SIEVE_RETURN_IF_ERROR(require_dtype(op, "y_type", p.y_type, {DType::f32, DType::bf16}));
    if (p.dim < 1 || p.dim > kHadamardMaxDim || (p.dim & (p.dim - 1)) != 0)
        return invalid_argument_error("{}: dim = {}, expected a power of two in [1, {}]", op, p.dim, kHadamardMaxDim);
    if (!std::isfinite(p.scale)) return invalid_argument_error("{}: scale = {}, expected finite", op, p.scale);
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
