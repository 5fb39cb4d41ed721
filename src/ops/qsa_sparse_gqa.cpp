#include "sieve/ops/qsa_sparse_gqa.h"

#include <algorithm>
#include <cmath>
#include <utility>

#include "sieve/ops/op_common.h"

namespace sieve {

Status validate(const QsaSparseGqaParams& p) {
    constexpr const char* op = "qsa_sparse_gqa";
    using namespace op_check;
    for (auto [name, t] : {std::pair{"q_type", p.q_type}, std::pair{"kv_type", p.kv_type},
                           std::pair{"gate_type", p.gate_type}, std::pair{"out_type", p.out_type}})
        SIEVE_RETURN_IF_ERROR(require_dtype(op, name, t, {DType::f32, DType::bf16}));
    if (p.math != AttentionMath::f32 && p.math != AttentionMath::bf16)
        return invalid_argument_error("{}: math = {} is not an AttentionMath", op, static_cast<int>(p.math));
    SIEVE_RETURN_IF_ERROR(require_at_least(op, "n_tokens", p.n_tokens, 0));
    SIEVE_RETURN_IF_ERROR(require_at_least(op, "n_kv_heads", p.n_kv_heads, 1));
    SIEVE_RETURN_IF_ERROR(require_at_least(op, "n_heads", p.n_heads, 1));
    SIEVE_RETURN_IF_ERROR(require_at_least(op, "head_dim", p.head_dim, 1));
    SIEVE_RETURN_IF_ERROR(require_at_least(op, "n_indices", p.n_indices, 0));
    SIEVE_RETURN_IF_ERROR(require_at_least(op, "index_row_stride", p.index_row_stride, 0));
    if (p.n_heads % p.n_kv_heads != 0)
        return invalid_argument_error("{}: n_heads = {} is not a multiple of n_kv_heads = {} (GQA, §4.7)", op,
                                      p.n_heads, p.n_kv_heads);
    if (!std::isfinite(p.scale)) return invalid_argument_error("{}: scale = {} is not finite", op, p.scale);
    const RowsLayout ql{p.n_tokens, p.n_heads, p.head_dim, p.q_token_stride, p.q_head_stride};
    const RowsLayout gl{p.n_tokens, p.n_heads, p.head_dim, p.gate_token_stride, p.gate_head_stride};
    const RowsLayout ol{p.n_tokens, p.n_heads, p.head_dim, p.out_token_stride, p.out_head_stride};
    SIEVE_ASSIGN_OR_RETURN(int64_t q_extent, rows_extent(op, "q", ql, dtype_size(p.q_type)));
    SIEVE_ASSIGN_OR_RETURN(int64_t g_extent, rows_extent(op, "gate", gl, dtype_size(p.gate_type)));
    SIEVE_ASSIGN_OR_RETURN(int64_t o_extent, output_rows_extent(op, "out", ol, dtype_size(p.out_type)));
    SIEVE_ASSIGN_OR_RETURN(int64_t i_extent, rows_extent(op, "indices", {p.n_tokens, 1, p.n_indices, p.index_row_stride, 0}, 4));
    if (p.n_tokens == 0) return Status::ok();
    SIEVE_RETURN_IF_ERROR(require_ptr(op, "out", p.out));
    SIEVE_RETURN_IF_ERROR(require_ptr(op, "q", p.q));
    if (p.n_indices > 0) SIEVE_RETURN_IF_ERROR(require_ptr(op, "indices", p.indices));
    SIEVE_RETURN_IF_ERROR(validate_block_tables(op, "tables", p.tables, p.n_tokens));
    SIEVE_RETURN_IF_ERROR(bytes_of(op, "kv entry", 2 * p.n_kv_heads * p.head_dim, dtype_size(p.kv_type)).status());
    const int64_t o_bytes = o_extent * static_cast<int64_t>(dtype_size(p.out_type));
    SIEVE_RETURN_IF_ERROR(require_same_or_disjoint(op, "q", p.q, q_extent * static_cast<int64_t>(dtype_size(p.q_type)),
                                                   "out", p.out, o_bytes, false));
    if (p.gate)
        SIEVE_RETURN_IF_ERROR(require_same_or_disjoint(op, "gate", p.gate,
                                                       g_extent * static_cast<int64_t>(dtype_size(p.gate_type)), "out",
                                                       p.out, o_bytes, false));
    return require_same_or_disjoint(op, "indices", p.indices, i_extent * 4, "out", p.out, o_bytes, false);
}

Status check_indices(const QsaSparseGqaParams& p) {
    constexpr const char* op = "qsa_sparse_gqa";
    using namespace op_check;
    if (p.n_tokens == 0) return Status::ok();  // nothing is read, the arrays may be absent
    SIEVE_RETURN_IF_ERROR(check_token_requests(op, "tables", p.tables, p.n_tokens));
    // One past the highest position each token reads.
    auto row_end = [&](int64_t t) {
        int64_t m = 0;
        const int32_t* row = p.indices + t * p.index_row_stride;
        for (int64_t j = 0; j < p.n_indices; ++j) m = std::max<int64_t>(m, int64_t{row[j]} + 1);
        return m;
    };
    bool any = false;
    for (int64_t t = 0; t < p.n_tokens; ++t) {
        const int32_t* row = p.indices + t * p.index_row_stride;
        for (int64_t j = 0; j < p.n_indices; ++j) {
            if (row[j] < -1)
                return invalid_argument_error("{}: indices[{}, {}] = {}, expected a position or −1", op, t, j, row[j]);
            any |= row[j] >= 0;
        }
    }
    // No valid entry: the kv cache is not read (whether it is depends on the indices, hence this
    // check lives here).
    if (!any) return Status::ok();
    SIEVE_ASSIGN_OR_RETURN(int64_t kv_bytes, bytes_of(op, "kv entry", 2 * p.n_kv_heads * p.head_dim, dtype_size(p.kv_type)));
    SIEVE_RETURN_IF_ERROR(validate_paged_view(op, "kv", p.kv, kv_bytes));
    return check_tokens_resident(op, "kv", p.tables, p.kv, p.n_tokens, row_end);
}

}  // namespace sieve
