#include "sieve/ops/qsa_expand.h"

#include <algorithm>
#include <limits>

#include "sieve/ops/op_common.h"

namespace sieve {

Status validate(const QsaExpandParams& p) {
    constexpr const char* op = "qsa_expand";
    using namespace op_check;
    SIEVE_RETURN_IF_ERROR(require_at_least(op, "n_tokens", p.n_tokens, 0));
    SIEVE_RETURN_IF_ERROR(require_at_least(op, "ratio", p.ratio, 1));
    SIEVE_RETURN_IF_ERROR(require_at_least(op, "block_topk", p.block_topk, 1));
    SIEVE_RETURN_IF_ERROR(require_at_least(op, "sel_row_stride", p.sel_row_stride, 0));
    int64_t min_width = 0;
    if (__builtin_mul_overflow(p.block_topk, p.ratio, &min_width) ||
        __builtin_add_overflow(min_width, p.ratio - 1, &min_width))
        return invalid_argument_error("{}: block_topk {} · ratio {} overflows int64", op, p.block_topk, p.ratio);
    if (p.out_width < min_width)
        return invalid_argument_error("{}: out_width = {} < block_topk·ratio + ratio − 1 = {}·{} + {} − 1 = {} (§4.6)",
                                      op, p.out_width, p.block_topk, p.ratio, p.ratio, min_width);
    SIEVE_ASSIGN_OR_RETURN(int64_t o_extent,
                           output_rows_extent(op, "out", {p.n_tokens, 1, p.out_width, p.out_row_stride, 0}, 4));
    SIEVE_ASSIGN_OR_RETURN(int64_t s_extent, rows_extent(op, "sel", {p.n_tokens, 1, p.block_topk, p.sel_row_stride, 0}, 4));
    if (p.n_tokens == 0) return Status::ok();
    SIEVE_RETURN_IF_ERROR(require_ptr(op, "positions", p.positions));
    SIEVE_RETURN_IF_ERROR(require_ptr(op, "seq_lens", p.seq_lens));
    SIEVE_RETURN_IF_ERROR(require_ptr(op, "out", p.out));
    const int64_t o_bytes = o_extent * 4;
    // sel is read only by the tokens that select (check_indices), but aliasing is a property of the
    // pointers: checked here, where a device backend sees its own buffers (a null sel passes).
    SIEVE_RETURN_IF_ERROR(require_same_or_disjoint(op, "sel", p.sel, s_extent * 4, "out", p.out, o_bytes, false));
    SIEVE_RETURN_IF_ERROR(require_same_or_disjoint(op, "positions", p.positions, p.n_tokens * 8, "out", p.out, o_bytes, false));
    SIEVE_RETURN_IF_ERROR(require_same_or_disjoint(op, "seq_lens", p.seq_lens, p.n_tokens * 8, "out", p.out, o_bytes, false));
    return require_same_or_disjoint(op, "out", p.out, o_bytes, "out_count", p.out_count, p.n_tokens * 4, false);
}

Status check_indices(const QsaExpandParams& p) {
    constexpr const char* op = "qsa_expand";
    for (int64_t t = 0; t < p.n_tokens; ++t) {
        const int64_t pos = p.positions[t], len = p.seq_lens[t];
        if (pos < 0 || pos >= len || len > std::numeric_limits<int32_t>::max())
            return invalid_argument_error("{}: token {}: position {} with seq_len {}, expected 0 ≤ p < L ≤ 2^31 − 1", op,
                                          t, pos, len);
        const int64_t visible = std::min((pos + 1) / p.ratio, len / p.ratio);
        if (visible <= p.block_topk) continue;
        if (p.sel == nullptr) return invalid_argument_error("{}: sel is null but token {} selects ({} groups visible > "
                                                            "block_topk {})", op, t, visible, p.block_topk);
        const int32_t* row = p.sel + t * p.sel_row_stride;
        bool padding = false;
        for (int64_t j = 0; j < p.block_topk; ++j) {
            const int32_t g = row[j];
            if (g == -1) {
                padding = true;
                continue;
            }
            if (g < 0 || g >= visible || padding)
                return invalid_argument_error("{}: sel[{}, {}] = {}: expected a group in [0, {}) before any −1 padding",
                                              op, t, j, g, visible);
        }
    }
    return Status::ok();
}

}  // namespace sieve
