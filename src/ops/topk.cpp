#include "sieve/ops/topk.h"

#include <limits>

#include "sieve/ops/op_common.h"

namespace sieve {

Status validate(const TopkParams& p) {
    constexpr std::string_view op = "topk";
    using namespace op_check;
    SIEVE_RETURN_IF_ERROR(require_at_least(op, "n_rows", p.n_rows, 0));
    SIEVE_RETURN_IF_ERROR(require_at_least(op, "n_cols", p.n_cols, 0));
    SIEVE_RETURN_IF_ERROR(require_at_least(op, "k", p.k, 1));
    if (p.n_cols > std::numeric_limits<int32_t>::max())
        return invalid_argument_error("{}: n_cols = {} does not fit the int32 indices", op, p.n_cols);
    SIEVE_RETURN_IF_ERROR(require_at_least(op, "scores_row_stride", p.scores_row_stride, 0));
    if (p.n_rows > 1 && p.out_row_stride < p.k)
        return invalid_argument_error("{}: out_row_stride = {} < k {}: output rows overlap", op, p.out_row_stride, p.k);
    SIEVE_ASSIGN_OR_RETURN(int64_t s_extent,
                           rows_extent(op, "scores", {p.n_rows, 1, p.n_cols, p.scores_row_stride, 0}, sizeof(float)));
    SIEVE_ASSIGN_OR_RETURN(int64_t o_extent,
                           rows_extent(op, "out", {p.n_rows, 1, p.k, p.out_row_stride, 0}, sizeof(int32_t)));
    if (p.n_rows == 0) return Status::ok();
    SIEVE_RETURN_IF_ERROR(require_ptr(op, "out", p.out));
    if (p.n_cols > 0) SIEVE_RETURN_IF_ERROR(require_ptr(op, "scores", p.scores));
    const int64_t s_bytes = s_extent * 4, o_bytes = o_extent * 4, c_bytes = p.n_rows * 4;
    SIEVE_RETURN_IF_ERROR(require_same_or_disjoint(op, "scores", p.scores, s_bytes, "out", p.out, o_bytes, false));
    SIEVE_RETURN_IF_ERROR(
        require_same_or_disjoint(op, "scores", p.scores, s_bytes, "out_count", p.out_count, c_bytes, false));
    SIEVE_RETURN_IF_ERROR(require_same_or_disjoint(op, "out", p.out, o_bytes, "out_count", p.out_count, c_bytes, false));
    SIEVE_RETURN_IF_ERROR(
        require_same_or_disjoint(op, "valid_len", p.valid_len, c_bytes, "out", p.out, o_bytes, false));
    SIEVE_RETURN_IF_ERROR(
        require_same_or_disjoint(op, "valid_len", p.valid_len, c_bytes, "out_count", p.out_count, c_bytes, false));
    return Status::ok();
}

Status check_indices(const TopkParams& p) {
    constexpr std::string_view op = "topk";
    if (p.valid_len != nullptr) {
        for (int64_t r = 0; r < p.n_rows; ++r) {
            const int32_t v = p.valid_len[r];
            if (v < 0 || v > p.n_cols)
                return invalid_argument_error("{}: valid_len[{}] = {}, expected in [0, n_cols = {}]", op, r, v,
                                              p.n_cols);
        }
    }
    return Status::ok();
}

}  // namespace sieve
