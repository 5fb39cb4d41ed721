#include "ops/qsa_score.h"

#include <cmath>
#include <limits>

#include "ops/op_common.h"

namespace sieve {

Status validate(const QsaScoreParams& p) {
    constexpr const char* op = "qsa_score";
    using namespace op_check;
    SIEVE_RETURN_IF_ERROR(require_dtype(op, "q_type", p.q_type, {DType::f32, DType::bf16}));
    SIEVE_RETURN_IF_ERROR(require_dtype(op, "key_type", p.key_type, {DType::f32, DType::bf16}));
    SIEVE_RETURN_IF_ERROR(require_at_least(op, "n_tokens", p.n_tokens, 0));
    SIEVE_RETURN_IF_ERROR(require_at_least(op, "n_heads", p.n_heads, 1));
    SIEVE_RETURN_IF_ERROR(require_at_least(op, "head_dim", p.head_dim, 1));
    SIEVE_RETURN_IF_ERROR(require_at_least(op, "n_cols", p.n_cols, 0));
    if (p.n_cols > std::numeric_limits<int32_t>::max())
        return invalid_argument_error("{}: n_cols = {} does not fit the int32 group counts", op, p.n_cols);
    if (!std::isfinite(p.scale)) return invalid_argument_error("{}: scale = {} is not finite", op, p.scale);
    SIEVE_ASSIGN_OR_RETURN(
        int64_t q_extent,
        rows_extent(op, "q", {p.n_tokens, p.n_heads, p.head_dim, p.q_token_stride, p.q_head_stride}, dtype_size(p.q_type)));
    SIEVE_ASSIGN_OR_RETURN(const ScoreOutputsExtent out,
                           score_outputs_extent(op, "n_cols", p.n_tokens, p.n_cols, p.scores, p.scores_row_stride,
                                                p.selected, p.k, p.selected_row_stride));
    const int64_t s_extent = out.scores, sel_extent = out.selected;
    if (p.n_tokens == 0) return Status::ok();
    SIEVE_RETURN_IF_ERROR(require_ptr(op, "n_groups", p.n_groups));
    SIEVE_RETURN_IF_ERROR(validate_block_tables(op, "tables", p.tables, p.n_tokens));
    const int64_t q_bytes = q_extent * static_cast<int64_t>(dtype_size(p.q_type));
    const int64_t s_bytes = s_extent * 4, sel_bytes = sel_extent * 4;
    // q and scores are used only when some row has a group (check_indices), but aliasing is a property
    // of the pointers: every pair is checked here, where a device backend sees its own buffers (a null
    // pointer passes).
    if (p.selected != nullptr) {  // written even when no row has a group (every row −1)
        SIEVE_RETURN_IF_ERROR(require_same_or_disjoint(op, "n_groups", p.n_groups, p.n_tokens * 4, "selected",
                                                       p.selected, sel_bytes, false));
        SIEVE_RETURN_IF_ERROR(require_same_or_disjoint(op, "token_request", p.tables.token_request, p.n_tokens * 4,
                                                       "selected", p.selected, sel_bytes, false));
    }
    if (p.scores != nullptr) {
        SIEVE_RETURN_IF_ERROR(require_same_or_disjoint(op, "q", p.q, q_bytes, "scores", p.scores, s_bytes, false));
        SIEVE_RETURN_IF_ERROR(
            require_same_or_disjoint(op, "n_groups", p.n_groups, p.n_tokens * 4, "scores", p.scores, s_bytes, false));
    }
    if (p.selected != nullptr) {
        SIEVE_RETURN_IF_ERROR(require_same_or_disjoint(op, "q", p.q, q_bytes, "selected", p.selected, sel_bytes, false));
        if (p.scores != nullptr)
            SIEVE_RETURN_IF_ERROR(
                require_same_or_disjoint(op, "scores", p.scores, s_bytes, "selected", p.selected, sel_bytes, false));
    }
    return Status::ok();
}

Status check_indices(const QsaScoreParams& p) {
    constexpr const char* op = "qsa_score";
    using namespace op_check;
    if (p.n_tokens == 0) return Status::ok();  // nothing is read, the arrays may be absent
    SIEVE_RETURN_IF_ERROR(check_token_requests(op, "tables", p.tables, p.n_tokens));
    bool any = false;
    for (int64_t t = 0; t < p.n_tokens; ++t) {
        const int32_t n = p.n_groups[t];
        if (n < 0 || n > p.n_cols)
            return invalid_argument_error("{}: n_groups[{}] = {}, expected in [0, n_cols = {}]", op, t, n, p.n_cols);
        any |= n > 0;
    }
    // No row has a group: q, scores and the key cache are not read (whether they are depends on
    // n_groups, hence these checks live here).
    if (!any) return Status::ok();
    SIEVE_RETURN_IF_ERROR(require_ptr(op, "q", p.q));
    if (p.selected == nullptr) SIEVE_RETURN_IF_ERROR(require_ptr(op, "scores", p.scores));
    SIEVE_ASSIGN_OR_RETURN(int64_t key_bytes, bytes_of(op, "key row", p.head_dim, dtype_size(p.key_type)));
    SIEVE_RETURN_IF_ERROR(validate_paged_view(op, "keys", p.keys, key_bytes));
    return check_tokens_resident(op, "keys", p.tables, p.keys, p.n_tokens,
                                     [&](int64_t t) { return int64_t{p.n_groups[t]}; });
}

}  // namespace sieve
