#include "sieve/ops/sparse_attention.h"

#include <cmath>

#include "sieve/ops/op_common.h"

namespace sieve {

namespace {

constexpr std::string_view kOp = "sparse_attention";

// A present list (width > 0): its slots' pointer and row layout, its format (f32, or the two fp8 records:
// deepseek_v4.md §4.1, dsa_mla.md §3.4), its layout representable and the cache view holding it. Returns the
// list's extent in elements (0 when absent). Reads nothing behind the pointers.
Expected<int64_t> check_list(const SparseAttentionParams& p, std::string_view name, const SparseKvList& l) {
    using namespace op_check;
    SIEVE_RETURN_IF_ERROR(require_at_least(kOp, fmt::format("{}.width", name), l.width, 0));
    if (l.width == 0) return int64_t{0};
    int64_t extent = 0;
    if (p.n_tokens > 0) {
        SIEVE_RETURN_IF_ERROR(require_ptr(kOp, fmt::format("{}.slots", name), l.slots));
        if (p.n_tokens > 1 && l.slots_stride < l.width)
            return invalid_argument_error("{}: {}.slots_stride = {} < {}.width = {}", kOp, name, l.slots_stride, name,
                                          l.width);
        SIEVE_ASSIGN_OR_RETURN(extent, rows_extent(kOp, fmt::format("{}.slots", name),
                                                   {p.n_tokens, 1, l.width, l.slots_stride, 0}, sizeof(int32_t)));
    }
    if (l.format != CacheRecordFormat::f32 && l.format != CacheRecordFormat::fp8_model1 &&
        l.format != CacheRecordFormat::fp8_v32)
        return invalid_argument_error("{}: {}.format = {}, expected f32, fp8_model1 or fp8_v32", kOp, name,
                                      cache_record_format_name(l.format));
    const CacheRecordLayout layout = p.layout(l);
    if (const Status s = validate(layout); !s.is_ok())
        return s.with_context(fmt::format("{}: {} list: qk_dim = {}, rope_dim = {}", kOp, name, p.qk_dim, p.rope_dim));
    SIEVE_RETURN_IF_ERROR(validate_cache_view(kOp, name, l.cache, layout, l.n_slots));
    return extent;
}

// Every slot of a present list in [−1, n_slots) (reads it).
Status check_slot_values(std::string_view name, const SparseKvList& l, int64_t n_tokens) {
    for (int64_t t = 0; t < n_tokens; ++t) {
        const int32_t* row = l.slots + t * l.slots_stride;
        for (int64_t j = 0; j < l.width; ++j)
            if (row[j] < -1 || row[j] >= l.n_slots)
                return invalid_argument_error("{}: {}.slots[{}, {}] = {}, expected −1 or a slot in [0, {})", kOp, name,
                                              t, j, row[j], l.n_slots);
    }
    return Status::ok();
}

}  // namespace

Status validate(const SparseAttentionParams& p) {
    using namespace op_check;
    if (p.qk_dim < 1 || p.v_dim < 1 || p.v_dim > p.qk_dim || p.rope_dim < 0)
        return invalid_argument_error(
            "{}: qk_dim = {}, v_dim = {}, rope_dim = {}: expected 1 ≤ v_dim ≤ qk_dim and rope_dim ≥ 0", kOp, p.qk_dim,
            p.v_dim, p.rope_dim);
    SIEVE_RETURN_IF_ERROR(require_dtype(kOp, "q_type", p.q_type, {DType::f32, DType::bf16}));
    SIEVE_RETURN_IF_ERROR(require_dtype(kOp, "out_type", p.out_type, {DType::f32, DType::bf16}));
    if (p.math != AttentionMath::f32 && p.math != AttentionMath::bf16)
        return invalid_argument_error("{}: math = {} is not an AttentionMath", kOp, static_cast<int>(p.math));
    SIEVE_RETURN_IF_ERROR(require_at_least(kOp, "n_tokens", p.n_tokens, 0));
    SIEVE_RETURN_IF_ERROR(require_at_least(kOp, "n_heads", p.n_heads, 1));
    // A softmax scale is positive (head_dim^-0.5, Dqk^-0.5 · m²: deepseek_v4.md §1.2, dsa_mla.md §2.3).
    if (!(p.scale > 0.0f) || !std::isfinite(p.scale))
        return invalid_argument_error("{}: scale = {}, expected finite and > 0", kOp, p.scale);
    SIEVE_ASSIGN_OR_RETURN(int64_t q_extent, rows_extent(kOp, "q", {p.n_tokens, p.n_heads, p.qk_dim, p.q_token_stride,
                                                                    p.q_head_stride},
                                                         dtype_size(p.q_type)));
    SIEVE_ASSIGN_OR_RETURN(int64_t o_extent,
                           output_rows_extent(kOp, "out", {p.n_tokens, p.n_heads, p.v_dim, p.out_token_stride,
                                                           p.out_head_stride},
                                              dtype_size(p.out_type)));
    SIEVE_ASSIGN_OR_RETURN(int64_t main_extent, check_list(p, "main", p.main));
    SIEVE_ASSIGN_OR_RETURN(int64_t extra_extent, check_list(p, "extra", p.extra));
    if (p.n_tokens == 0) return Status::ok();
    SIEVE_RETURN_IF_ERROR(require_ptr(kOp, "q", p.q));
    SIEVE_RETURN_IF_ERROR(require_ptr(kOp, "out", p.out));
    const int64_t o_bytes = o_extent * static_cast<int64_t>(dtype_size(p.out_type));
    SIEVE_RETURN_IF_ERROR(require_same_or_disjoint(kOp, "q", p.q, q_extent * static_cast<int64_t>(dtype_size(p.q_type)),
                                                   "out", p.out, o_bytes, false));
    if (main_extent > 0)
        SIEVE_RETURN_IF_ERROR(
            require_same_or_disjoint(kOp, "main.slots", p.main.slots, main_extent * 4, "out", p.out, o_bytes, false));
    if (extra_extent > 0)
        SIEVE_RETURN_IF_ERROR(
            require_same_or_disjoint(kOp, "extra.slots", p.extra.slots, extra_extent * 4, "out", p.out, o_bytes, false));
    if (p.sink)
        SIEVE_RETURN_IF_ERROR(require_same_or_disjoint(kOp, "sink", p.sink, p.n_heads * 4, "out", p.out, o_bytes, false));
    return Status::ok();
}

Status check_indices(const SparseAttentionParams& p) {
    if (p.main.width > 0) SIEVE_RETURN_IF_ERROR(check_slot_values("main", p.main, p.n_tokens));
    if (p.extra.width > 0) SIEVE_RETURN_IF_ERROR(check_slot_values("extra", p.extra, p.n_tokens));
    return Status::ok();
}

}  // namespace sieve
