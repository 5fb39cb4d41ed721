#include "sieve/ops/indexer_scores.h"

#include <cmath>
#include <limits>
#include <utility>

#include "sieve/ops/op_common.h"

namespace sieve {

Status validate(const IndexerScoresParams& p) {
    constexpr const char* op = "indexer_scores";
    using namespace op_check;
    SIEVE_RETURN_IF_ERROR(require_dtype(op, "q_type", p.q_type, {DType::f32, DType::bf16, DType::f8_e4m3}));
    if (p.key_format != CacheRecordFormat::f32 && p.key_format != CacheRecordFormat::bf16 &&
        p.key_format != CacheRecordFormat::fp8_row_scale)
        return invalid_argument_error("{}: key_format = {}, expected f32, bf16 or fp8_row_scale", op,
                                      cache_record_format_name(p.key_format));
    // head_dim in range; fp8_row_scale keys hold at most 128 values (one scale per key, dsa_mla.md §3.3)
    if (const Status s = validate(p.key_layout()); !s.is_ok())
        return s.with_context(fmt::format("{}: head_dim = {}", op, p.head_dim));
    SIEVE_RETURN_IF_ERROR(require_at_least(op, "n_tokens", p.n_tokens, 0));
    SIEVE_RETURN_IF_ERROR(require_at_least(op, "n_heads", p.n_heads, 1));
    SIEVE_RETURN_IF_ERROR(require_at_least(op, "n_cols", p.n_cols, 0));
    SIEVE_RETURN_IF_ERROR(require_at_least(op, "n_slots", p.n_slots, 0));
    if (p.n_cols > std::numeric_limits<int32_t>::max())
        return invalid_argument_error("{}: n_cols = {} does not fit the int32 candidate counts", op, p.n_cols);
    if (!std::isfinite(p.weight_scale))
        return invalid_argument_error("{}: weight_scale = {}, expected a finite value", op, p.weight_scale);
    const bool fp8_q = p.q_type == DType::f8_e4m3;
    SIEVE_ASSIGN_OR_RETURN(
        const int64_t q_extent,
        rows_extent(op, "q", {p.n_tokens, p.n_heads, p.head_dim, p.q_token_stride, p.q_head_stride}, dtype_size(p.q_type)));
    int64_t w_extent = 0, qs_extent = 0;
    if (p.weights != nullptr) {
        SIEVE_ASSIGN_OR_RETURN(w_extent, rows_extent(op, "weights", {p.n_tokens, 1, p.n_heads, p.weights_token_stride, 0}, 4));
    }
    if (fp8_q) {
        SIEVE_ASSIGN_OR_RETURN(qs_extent, rows_extent(op, "q_scale", {p.n_tokens, 1, p.n_heads, p.q_scale_token_stride, 0}, 4));
    }
    SIEVE_ASSIGN_OR_RETURN(const ScoreOutputsExtent out,
                           score_outputs_extent(op, "n_cols", p.n_tokens, p.n_cols, p.scores, p.scores_row_stride,
                                                p.selected, p.k, p.selected_row_stride));
    if (!fp8_q && p.q_scale != nullptr)
        return invalid_argument_error("{}: q_scale is given but q is {} (it scales f8_e4m3 q only)", op,
                                      dtype_name(p.q_type));
    if (p.n_tokens == 0) return Status::ok();
    SIEVE_RETURN_IF_ERROR(require_ptr(op, "n_keys", p.n_keys));
    SIEVE_RETURN_IF_ERROR(validate_block_tables(op, "tables", p.tables, p.n_tokens));
    // q, q_scale, weights and scores are read only when some token has a candidate (check_indices), but
    // aliasing is a property of the pointers: every pair is checked here, where a device backend sees its
    // own buffers (a null pointer passes).
    const std::pair<const char*, std::pair<const void*, int64_t>> inputs[] = {
        {"q", {p.q, q_extent * static_cast<int64_t>(dtype_size(p.q_type))}},
        {"q_scale", {p.q_scale, qs_extent * 4}},
        {"weights", {p.weights, w_extent * 4}},
        {"n_keys", {p.n_keys, p.n_tokens * 4}},
        {"token_request", {p.tables.token_request, p.n_tokens * 4}},
        {"block_table", {p.tables.block_table, p.tables.n_requests * p.tables.block_table_stride * 4}}};
    const int64_t s_bytes = out.scores * 4, sel_bytes = out.selected * 4;
    for (const auto& [name, span] : inputs) {
        if (span.first == nullptr || span.second == 0) continue;
        SIEVE_RETURN_IF_ERROR(require_same_or_disjoint(op, name, span.first, span.second, "scores", p.scores, s_bytes, false));
        SIEVE_RETURN_IF_ERROR(
            require_same_or_disjoint(op, name, span.first, span.second, "selected", p.selected, sel_bytes, false));
    }
    return require_same_or_disjoint(op, "scores", p.scores, s_bytes, "selected", p.selected, sel_bytes, false);
}

Status check_indices(const IndexerScoresParams& p) {
    constexpr const char* op = "indexer_scores";
    using namespace op_check;
    if (p.n_tokens == 0) return Status::ok();  // nothing is read, the arrays may be absent
    SIEVE_RETURN_IF_ERROR(check_token_requests(op, "tables", p.tables, p.n_tokens));
    bool any = false;
    for (int64_t t = 0; t < p.n_tokens; ++t) {
        const int32_t n = p.n_keys[t];
        if (n < 0 || n > p.n_cols)
            return invalid_argument_error("{}: n_keys[{}] = {}, expected in [0, n_cols = {}]", op, t, n, p.n_cols);
        any |= n > 0;
    }
    // No token has a candidate: q, the weights, scores and the key cache are not read (whether they are
    // depends on n_keys, hence these checks live here).
    if (!any) return Status::ok();
    SIEVE_RETURN_IF_ERROR(require_ptr(op, "q", p.q));
    if (p.q_type == DType::f8_e4m3) SIEVE_RETURN_IF_ERROR(require_ptr(op, "q_scale", p.q_scale));
    if (p.selected == nullptr) SIEVE_RETURN_IF_ERROR(require_ptr(op, "scores", p.scores));
    SIEVE_RETURN_IF_ERROR(validate_cache_view(op, "keys", p.keys, p.key_layout(), p.n_slots));
    return check_tokens_resident(
        op, "keys", p.tables, p.keys, p.n_tokens, [&](int64_t t) { return int64_t{p.n_keys[t]}; },
        p.n_slots / p.keys.block_size);
}

}  // namespace sieve
