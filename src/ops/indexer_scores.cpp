#include "ops/indexer_scores.h"


#include <cmath>
#include <utility>

#include "ops/op_common.h"

namespace sieve {

Status validate(const IndexerScoresParams& p) {
    constexpr std::string_view op = "indexer_scores";
    using namespace op_check;
    SIEVE_RETURN_IF_ERROR(require_dtype(op, "q_type", p.q_type, {DType::f32, DType::bf16}));
    if (!std::isfinite(p.weight_scale))
        return invalid_argument_error("{}: weight_scale = {}, expected a finite value", op, p.weight_scale);
    SIEVE_RETURN_IF_ERROR(require_at_least(op, "n_tokens", p.n_tokens, 0));
    SIEVE_RETURN_IF_ERROR(require_at_least(op, "n_heads", p.n_heads, 1));
    SIEVE_RETURN_IF_ERROR(require_at_least(op, "head_dim", p.head_dim, 1));
    SIEVE_RETURN_IF_ERROR(require_at_least(op, "n_lists", p.n_lists, 0));
    SIEVE_RETURN_IF_ERROR(require_at_least(op, "max_keys", p.max_keys, 0));
    if (p.key_format != CacheRecordFormat::f32 && p.key_format != CacheRecordFormat::fp8_row_scale)
        return invalid_argument_error("{}: key_format = {}, expected f32 or fp8_row_scale", op,
                                      cache_record_format_name(p.key_format));
    if (p.n_lists > 1 && p.key_slots_stride < p.max_keys)
        return invalid_argument_error("{}: key_slots_stride = {} < max_keys {}", op, p.key_slots_stride, p.max_keys);
    const RowsLayout ql{p.n_tokens, p.n_heads, p.head_dim, p.q_token_stride, p.q_head_stride};
    SIEVE_ASSIGN_OR_RETURN(int64_t q_extent, rows_extent(op, "q", ql, dtype_size(p.q_type)));
    SIEVE_ASSIGN_OR_RETURN(int64_t w_extent, rows_extent(op, "weights", {p.n_tokens, 1, p.n_heads, p.weights_row_stride, 0}, 4));
    SIEVE_ASSIGN_OR_RETURN(int64_t k_extent,
                           rows_extent(op, "key_slots", {p.n_lists, 1, p.max_keys, p.key_slots_stride, 0}, 4));
    SIEVE_ASSIGN_OR_RETURN(const ScoreOutputsExtent out,
                           score_outputs_extent(op, "max_keys", p.n_tokens, p.max_keys, p.scores, p.scores_row_stride,
                                                p.selected, p.k, p.selected_row_stride));
    const int64_t s_extent = out.scores, sel_extent = out.selected;
    if (p.n_tokens == 0) return Status::ok();
    SIEVE_RETURN_IF_ERROR(require_ptr(op, "q", p.q));
    SIEVE_RETURN_IF_ERROR(require_ptr(op, "weights", p.weights));
    SIEVE_RETURN_IF_ERROR(require_ptr(op, "token_list", p.token_list));
    SIEVE_RETURN_IF_ERROR(require_ptr(op, "n_keys", p.n_keys));
    if (p.max_keys > 0) {
        if (p.selected == nullptr) SIEVE_RETURN_IF_ERROR(require_ptr(op, "scores", p.scores));
        SIEVE_RETURN_IF_ERROR(validate_cache_view(op, "keys", p.keys, p.key_layout()));
    }
    if (p.max_keys > 0) {
        SIEVE_RETURN_IF_ERROR(require_ptr(op, "key_slots", p.key_slots));
        const int64_t s_bytes = s_extent * 4;
        SIEVE_RETURN_IF_ERROR(require_same_or_disjoint(op, "q", p.q, q_extent * static_cast<int64_t>(dtype_size(p.q_type)),
                                                       "scores", p.scores, s_bytes, false));
        SIEVE_RETURN_IF_ERROR(require_same_or_disjoint(op, "weights", p.weights, w_extent * 4, "scores", p.scores, s_bytes, false));
        SIEVE_RETURN_IF_ERROR(
            require_same_or_disjoint(op, "key_slots", p.key_slots, k_extent * 4, "scores", p.scores, s_bytes, false));
        SIEVE_RETURN_IF_ERROR(
            require_same_or_disjoint(op, "n_keys", p.n_keys, p.n_tokens * 4, "scores", p.scores, s_bytes, false));
        SIEVE_RETURN_IF_ERROR(
            require_same_or_disjoint(op, "token_list", p.token_list, p.n_tokens * 4, "scores", p.scores, s_bytes, false));
    }
    if (p.selected != nullptr) {
        const int64_t sel_bytes = sel_extent * 4;
        const std::pair<const char*, std::pair<const void*, int64_t>> inputs[] = {
            {"q", {p.q, q_extent * static_cast<int64_t>(dtype_size(p.q_type))}},
            {"weights", {p.weights, w_extent * 4}},
            {"key_slots", {p.key_slots, k_extent * 4}},
            {"n_keys", {p.n_keys, p.n_tokens * 4}},
            {"token_list", {p.token_list, p.n_tokens * 4}},
            {"scores", {p.scores, s_extent * 4}}};
        for (const auto& [name, span] : inputs)
            if (span.first != nullptr && span.second > 0)
                SIEVE_RETURN_IF_ERROR(
                    require_same_or_disjoint(op, name, span.first, span.second, "selected", p.selected, sel_bytes, false));
    }
    return Status::ok();
}

Status check_indices(const IndexerScoresParams& p) {
    constexpr std::string_view op = "indexer_scores";
    if (p.n_tokens == 0) return Status::ok();  // nothing is read, the lists may be absent
    for (int64_t t = 0; t < p.n_tokens; ++t) {
        if (p.token_list[t] < 0 || p.token_list[t] >= p.n_lists)
            return invalid_argument_error("{}: token_list[{}] = {}, expected in [0, n_lists = {})", op, t,
                                          p.token_list[t], p.n_lists);
        if (p.n_keys[t] < 0 || p.n_keys[t] > p.max_keys)
            return invalid_argument_error("{}: n_keys[{}] = {}, expected in [0, max_keys = {}]", op, t, p.n_keys[t],
                                          p.max_keys);
    }
    for (int64_t l = 0; l < p.n_lists; ++l)
        for (int64_t j = 0; j < p.max_keys; ++j)
            if (p.key_slots[l * p.key_slots_stride + j] < -1)
                return invalid_argument_error("{}: key_slots[{}, {}] = {}, expected ≥ −1", op, l, j,
                                              p.key_slots[l * p.key_slots_stride + j]);
    return Status::ok();
}

}  // namespace sieve
