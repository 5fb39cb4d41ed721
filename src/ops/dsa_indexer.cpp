#include "ops/dsa_indexer.h"

#include <cmath>
#include <utility>

#include "ops/op_common.h"

namespace sieve {

Status validate(const DsaIndexerScoresParams& p) {
    constexpr std::string_view op = "dsa_indexer_scores";
    using namespace op_check;
    if (p.format != CacheRecordFormat::f32 && p.format != CacheRecordFormat::fp8_row_scale)
        return invalid_argument_error("{}: format = {}, expected f32 or fp8_row_scale (dsa_mla.md §3.3)", op,
                                      cache_record_format_name(p.format));
    // head_dim in range; fp8_row_scale keys hold at most 128 values (one scale per key, §3.3)
    if (const Status s = validate(p.key_layout()); !s.is_ok())
        return s.with_context(fmt::format("{}: head_dim = {}", op, p.head_dim));
    const bool fp8 = p.format == CacheRecordFormat::fp8_row_scale;
    if (fp8) {
        SIEVE_RETURN_IF_ERROR(require_dtype(op, "q_type (fp8_row_scale keys)", p.q_type, {DType::f8_e4m3}));
    } else {
        SIEVE_RETURN_IF_ERROR(require_dtype(op, "q_type (f32 keys)", p.q_type, {DType::f32}));
    }
    SIEVE_RETURN_IF_ERROR(require_at_least(op, "n_tokens", p.n_tokens, 0));
    SIEVE_RETURN_IF_ERROR(require_at_least(op, "n_heads", p.n_heads, 1));
    SIEVE_RETURN_IF_ERROR(require_at_least(op, "n_cols", p.n_cols, 0));
    SIEVE_RETURN_IF_ERROR(require_at_least(op, "n_seqs", p.n_seqs, 0));
    SIEVE_RETURN_IF_ERROR(require_at_least(op, "block_table_stride", p.block_table_stride, 0));
    if (!(p.weight_scale > 0.0f) || !std::isfinite(p.weight_scale))
        return invalid_argument_error("{}: weight_scale = {}, expected finite and > 0", op, p.weight_scale);
    SIEVE_ASSIGN_OR_RETURN(int64_t q_extent, rows_extent(op, "q", {p.n_tokens, p.n_heads, p.head_dim, p.q_token_stride,
                                                                   p.q_head_stride},
                                                         dtype_size(p.q_type)));
    SIEVE_ASSIGN_OR_RETURN(int64_t w_extent,
                           rows_extent(op, "weights", {p.n_tokens, 1, p.n_heads, p.weights_token_stride, 0}, 4));
    int64_t qs_extent = 0;
    if (fp8) {
        SIEVE_ASSIGN_OR_RETURN(qs_extent,
                               rows_extent(op, "q_scale", {p.n_tokens, 1, p.n_heads, p.q_scale_token_stride, 0}, 4));
    }
    SIEVE_ASSIGN_OR_RETURN(const ScoreOutputsExtent out,
                           score_outputs_extent(op, "n_cols", p.n_tokens, p.n_cols, p.scores, p.scores_row_stride,
                                                p.selected, p.k, p.selected_row_stride));
    const int64_t s_extent = out.scores, sel_extent = out.selected;
    if (p.n_tokens == 0) return Status::ok();
    SIEVE_RETURN_IF_ERROR(require_ptr(op, "q", p.q));
    SIEVE_RETURN_IF_ERROR(require_ptr(op, "weights", p.weights));
    if (fp8) SIEVE_RETURN_IF_ERROR(require_ptr(op, "q_scale", p.q_scale));
    if (!fp8 && p.q_scale != nullptr)
        return invalid_argument_error("{}: q_scale is given but q is f32 (it scales fp8 q only)", op);
    SIEVE_RETURN_IF_ERROR(require_ptr(op, "token_seq", p.token_seq));
    SIEVE_RETURN_IF_ERROR(require_ptr(op, "n_keys", p.n_keys));
    if (p.n_cols > 0 && p.selected == nullptr) SIEVE_RETURN_IF_ERROR(require_ptr(op, "scores", p.scores));
    if (p.selected != nullptr) {
        const std::pair<const char*, std::pair<const void*, int64_t>> inputs[] = {
            {"q", {p.q, q_extent * static_cast<int64_t>(dtype_size(p.q_type))}},
            {"weights", {p.weights, w_extent * 4}},
            {"q_scale", {p.q_scale, qs_extent * 4}},
            {"n_keys", {p.n_keys, p.n_tokens * 4}},
            {"token_seq", {p.token_seq, p.n_tokens * 4}},
            {"scores", {p.scores, s_extent * 4}}};
        for (const auto& [name, span] : inputs)
            if (span.first != nullptr && span.second > 0)
                SIEVE_RETURN_IF_ERROR(require_same_or_disjoint(op, name, span.first, span.second, "selected", p.selected,
                                                               sel_extent * 4, false));
    }
    const int64_t s_bytes = s_extent * 4;
    SIEVE_RETURN_IF_ERROR(require_same_or_disjoint(op, "q", p.q, q_extent * static_cast<int64_t>(dtype_size(p.q_type)),
                                                   "scores", p.scores, s_bytes, false));
    SIEVE_RETURN_IF_ERROR(require_same_or_disjoint(op, "weights", p.weights, w_extent * 4, "scores", p.scores, s_bytes, false));
    SIEVE_RETURN_IF_ERROR(
        require_same_or_disjoint(op, "q_scale", p.q_scale, qs_extent * 4, "scores", p.scores, s_bytes, false));
    SIEVE_RETURN_IF_ERROR(
        require_same_or_disjoint(op, "n_keys", p.n_keys, p.n_tokens * 4, "scores", p.scores, s_bytes, false));
    SIEVE_RETURN_IF_ERROR(
        require_same_or_disjoint(op, "token_seq", p.token_seq, p.n_tokens * 4, "scores", p.scores, s_bytes, false));
    // A block table is needed only when some row has keys (check_indices), but aliasing is a property of
    // the pointers: checked here, where a device backend sees its own buffers.
    SIEVE_RETURN_IF_ERROR(require_same_or_disjoint(op, "block_table", p.block_table, p.n_seqs * p.block_table_stride * 4,
                                                   "scores", p.scores, s_bytes, false));
    return Status::ok();
}

Status check_indices(const DsaIndexerScoresParams& p) {
    constexpr std::string_view op = "dsa_indexer_scores";
    using namespace op_check;
    bool any_key = false;
    for (int64_t t = 0; t < p.n_tokens; ++t) {
        const int32_t n = p.n_keys[t];
        if (n < 0 || n > p.n_cols)
            return invalid_argument_error("{}: n_keys[{}] = {}, expected in [0, n_cols = {}]", op, t, n, p.n_cols);
        if (n == 0) continue;
        any_key = true;
        const int32_t s = p.token_seq[t];
        if (s < 0 || s >= p.n_seqs)
            return invalid_argument_error("{}: token_seq[{}] = {}, expected in [0, n_seqs = {})", op, t, s, p.n_seqs);
    }
    // No row reads a key: the block table and the key cache may be absent (whether one is read depends
    // on n_keys, hence these checks live here).
    if (!any_key) return Status::ok();
    SIEVE_RETURN_IF_ERROR(require_ptr(op, "block_table", p.block_table));
    SIEVE_RETURN_IF_ERROR(validate_cache_view(op, "keys", p.keys, p.key_layout(), p.n_slots));
    const int64_t n_blocks = p.n_slots / p.keys.block_size;
    int64_t checked_seq = -1, checked_blocks = 0;  // rows of one sequence usually come together
    for (int64_t t = 0; t < p.n_tokens; ++t) {
        const int32_t n = p.n_keys[t];
        if (n == 0) continue;
        const int64_t needed = (n + p.keys.block_size - 1) / p.keys.block_size;
        if (p.token_seq[t] == checked_seq && needed <= checked_blocks) continue;
        checked_seq = p.token_seq[t];
        checked_blocks = needed;
        if (needed > p.block_table_stride)
            return invalid_argument_error("{}: row {} needs {} key blocks for n_keys {}, the block table has {} per sequence",
                                          op, t, needed, n, p.block_table_stride);
        const int32_t* table = p.block_table + static_cast<int64_t>(p.token_seq[t]) * p.block_table_stride;
        for (int64_t b = 0; b < needed; ++b)
            if (table[b] < 0 || table[b] >= n_blocks)
                return invalid_argument_error(
                    "{}: row {} (sequence {}) reads logical key block {} at physical block {}, expected in [0, {})", op,
                    t, p.token_seq[t], b, table[b], n_blocks);
    }
    return Status::ok();
}

}  // namespace sieve
