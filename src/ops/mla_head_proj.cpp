#include "sieve/ops/mla_head_proj.h"

#include "sieve/ops/op_common.h"

namespace sieve {

Status validate(const MlaHeadProjParams& p) {
    constexpr std::string_view op = "mla_head_proj";
    using namespace op_check;
    SIEVE_RETURN_IF_ERROR(require_dtype(op, "x_type", p.x_type, {DType::f32, DType::bf16}));
    SIEVE_RETURN_IF_ERROR(require_dtype(op, "y_type", p.y_type, {DType::f32, DType::bf16}));
    if (p.math == LinearMath::bf16) {
        SIEVE_RETURN_IF_ERROR(require_dtype(op, "w_type (bf16 math)", p.w_type, {DType::bf16}));
    } else {
        SIEVE_RETURN_IF_ERROR(require_dtype(op, "w_type", p.w_type, {DType::f32, DType::bf16}));
    }
    SIEVE_RETURN_IF_ERROR(require_at_least(op, "n_tokens", p.n_tokens, 0));
    SIEVE_RETURN_IF_ERROR(require_at_least(op, "n_heads", p.n_heads, 1));
    SIEVE_RETURN_IF_ERROR(require_at_least(op, "in_features", p.in_features, 1));
    SIEVE_RETURN_IF_ERROR(require_at_least(op, "out_features", p.out_features, 1));
    SIEVE_ASSIGN_OR_RETURN(int64_t x_extent, rows_extent(op, "x", {p.n_tokens, p.n_heads, p.in_features, p.x_token_stride,
                                                                   p.x_head_stride},
                                                         dtype_size(p.x_type)));
    SIEVE_ASSIGN_OR_RETURN(int64_t w_extent, rows_extent(op, "w", {p.n_heads, p.in_features, p.out_features,
                                                                   p.in_features * p.out_features, p.out_features},
                                                         dtype_size(p.w_type)));
    SIEVE_ASSIGN_OR_RETURN(int64_t y_extent,
                           output_rows_extent(op, "y", {p.n_tokens, p.n_heads, p.out_features, p.y_token_stride,
                                                        p.y_head_stride},
                                              dtype_size(p.y_type)));
    SIEVE_RETURN_IF_ERROR(require_ptr(op, "w", p.w));
    if (p.n_tokens == 0) return Status::ok();
    SIEVE_RETURN_IF_ERROR(require_ptr(op, "x", p.x));
    SIEVE_RETURN_IF_ERROR(require_ptr(op, "y", p.y));
    const int64_t y_bytes = y_extent * static_cast<int64_t>(dtype_size(p.y_type));
    SIEVE_RETURN_IF_ERROR(require_same_or_disjoint(op, "x", p.x, x_extent * static_cast<int64_t>(dtype_size(p.x_type)),
                                                   "y", p.y, y_bytes, false));
    SIEVE_RETURN_IF_ERROR(require_same_or_disjoint(op, "w", p.w, w_extent * static_cast<int64_t>(dtype_size(p.w_type)),
                                                   "y", p.y, y_bytes, false));
    return Status::ok();
}

}  // namespace sieve
