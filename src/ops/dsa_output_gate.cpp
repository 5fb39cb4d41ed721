#include "sieve/ops/dsa_output_gate.h"

#include "sieve/ops/op_common.h"

namespace sieve {

Status validate(const DsaOutputGateParams& p) {
    constexpr std::string_view op = "dsa_output_gate";
    using namespace op_check;
    SIEVE_RETURN_IF_ERROR(require_dtype(op, "x_type", p.x_type, {DType::f32, DType::bf16}));
    SIEVE_RETURN_IF_ERROR(require_dtype(op, "gate_type", p.gate_type, {DType::f32, DType::bf16}));
    SIEVE_RETURN_IF_ERROR(require_dtype(op, "y_type", p.y_type, {DType::f32, DType::bf16}));
    SIEVE_RETURN_IF_ERROR(require_at_least(op, "n_tokens", p.n_tokens, 0));
    SIEVE_RETURN_IF_ERROR(require_at_least(op, "n_heads", p.n_heads, 1));
    SIEVE_RETURN_IF_ERROR(require_at_least(op, "head_dim", p.head_dim, 1));
    const int64_t gate_width = p.mode == DsaGateMode::elementwise ? p.n_heads * p.head_dim : p.n_heads;
    SIEVE_ASSIGN_OR_RETURN(int64_t x_extent, rows_extent(op, "x", {p.n_tokens, p.n_heads, p.head_dim, p.x_token_stride,
                                                                   p.x_head_stride},
                                                         dtype_size(p.x_type)));
    SIEVE_ASSIGN_OR_RETURN(int64_t g_extent, rows_extent(op, "gate", {p.n_tokens, 1, gate_width, p.gate_row_stride, 0},
                                                         dtype_size(p.gate_type)));
    SIEVE_ASSIGN_OR_RETURN(int64_t y_extent,
                           output_rows_extent(op, "y", {p.n_tokens, p.n_heads, p.head_dim, p.y_token_stride,
                                                        p.y_head_stride},
                                              dtype_size(p.y_type)));
    if (p.n_tokens == 0) return Status::ok();
    SIEVE_RETURN_IF_ERROR(require_ptr(op, "x", p.x));
    SIEVE_RETURN_IF_ERROR(require_ptr(op, "gate", p.gate));
    SIEVE_RETURN_IF_ERROR(require_ptr(op, "y", p.y));
    const int64_t y_bytes = y_extent * static_cast<int64_t>(dtype_size(p.y_type));
    const bool same_view = p.x == p.y && p.x_type == p.y_type && p.x_token_stride == p.y_token_stride &&
                           p.x_head_stride == p.y_head_stride;
    SIEVE_RETURN_IF_ERROR(require_same_or_disjoint(op, "x", p.x, x_extent * static_cast<int64_t>(dtype_size(p.x_type)),
                                                   "y", p.y, y_bytes, same_view));
    SIEVE_RETURN_IF_ERROR(require_same_or_disjoint(
        op, "gate", p.gate, g_extent * static_cast<int64_t>(dtype_size(p.gate_type)), "y", p.y, y_bytes, false));
    return Status::ok();
}

}  // namespace sieve
