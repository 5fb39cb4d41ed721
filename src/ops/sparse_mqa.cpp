#include "ops/sparse_mqa.h"

#include <cmath>

#include "ops/op_common.h"

namespace sieve {

namespace {

// K = V rows of DeepSeek-V4: f32 (exact) or the fp8_model1 record (deployed, deepseek_v4.md §4.1).
Status check_kv_format(std::string_view op, std::string_view name, CacheRecordFormat f) {
    if (f == CacheRecordFormat::f32 || f == CacheRecordFormat::fp8_model1) return Status::ok();
    return invalid_argument_error("{}: {} cache format {}, expected f32 or fp8_model1 (K = V rows)", op, name,
                                  cache_record_format_name(f));
}


// The list's width, pointer and layout (does not read it).
Status check_slot_list(std::string_view op, std::string_view name, const int32_t* slots, int64_t n_tokens,
                       int64_t width, int64_t stride) {
    using namespace op_check;
    SIEVE_RETURN_IF_ERROR(require_at_least(op, fmt::format("n_{}", name), width, 0));
    if (width == 0 || n_tokens == 0) return Status::ok();
    SIEVE_RETURN_IF_ERROR(require_ptr(op, fmt::format("{}_slots", name), slots));
    if (n_tokens > 1 && stride < width)
        return invalid_argument_error("{}: {}_slots_stride = {} < n_{} = {}", op, name, stride, name, width);
    SIEVE_ASSIGN_OR_RETURN(int64_t extent, rows_extent(op, fmt::format("{}_slots", name), {n_tokens, 1, width, stride, 0}, 4));
    (void)extent;
    return Status::ok();
}

// Every slot of the list ≥ −1 (reads it).
Status check_slot_values(std::string_view op, std::string_view name, const int32_t* slots, int64_t n_tokens,
                         int64_t width, int64_t stride) {
    for (int64_t t = 0; t < n_tokens; ++t)
        for (int64_t j = 0; j < width; ++j)
            if (slots[t * stride + j] < -1)
                return invalid_argument_error("{}: {}_slots[{}, {}] = {}, expected ≥ −1", op, name, t, j,
                                              slots[t * stride + j]);
    return Status::ok();
}

}  // namespace

Status validate(const SparseMqaParams& p) {
    constexpr std::string_view op = "sparse_mqa";
    using namespace op_check;
    SIEVE_RETURN_IF_ERROR(require_dtype(op, "q_type", p.q_type, {DType::f32, DType::bf16}));
    SIEVE_RETURN_IF_ERROR(require_dtype(op, "out_type", p.out_type, {DType::f32, DType::bf16}));
    SIEVE_RETURN_IF_ERROR(require_at_least(op, "n_tokens", p.n_tokens, 0));
    SIEVE_RETURN_IF_ERROR(require_at_least(op, "n_heads", p.n_heads, 1));
    SIEVE_RETURN_IF_ERROR(require_at_least(op, "head_dim", p.head_dim, 1));
    if (!std::isfinite(p.scale)) return invalid_argument_error("{}: scale = {}, expected finite", op, p.scale);
    const RowsLayout ql{p.n_tokens, p.n_heads, p.head_dim, p.q_token_stride, p.q_head_stride};
    const RowsLayout ol{p.n_tokens, p.n_heads, p.head_dim, p.out_token_stride, p.out_head_stride};
    SIEVE_ASSIGN_OR_RETURN(int64_t q_extent, rows_extent(op, "q", ql, dtype_size(p.q_type)));
    SIEVE_ASSIGN_OR_RETURN(int64_t o_extent, output_rows_extent(op, "out", ol, dtype_size(p.out_type)));
    SIEVE_RETURN_IF_ERROR(check_slot_list(op, "window", p.window_slots, p.n_tokens, p.n_window, p.window_slots_stride));
    SIEVE_RETURN_IF_ERROR(check_slot_list(op, "compressed", p.compressed_slots, p.n_tokens, p.n_compressed,
                                          p.compressed_slots_stride));
    if (p.n_window > 0) {
        SIEVE_RETURN_IF_ERROR(check_kv_format(op, "window", p.window_format));
        SIEVE_RETURN_IF_ERROR(validate_cache_view(op, "window", p.window, p.window_layout()));
    }
    if (p.n_compressed > 0) {
        SIEVE_RETURN_IF_ERROR(check_kv_format(op, "compressed", p.compressed_format));
        SIEVE_RETURN_IF_ERROR(validate_cache_view(op, "compressed", p.compressed, p.compressed_layout()));
    }
    if (q_extent == 0) return Status::ok();
    SIEVE_RETURN_IF_ERROR(require_ptr(op, "q", p.q));
    SIEVE_RETURN_IF_ERROR(require_ptr(op, "out", p.out));
    const int64_t o_bytes = o_extent * static_cast<int64_t>(dtype_size(p.out_type));
    SIEVE_RETURN_IF_ERROR(require_same_or_disjoint(op, "q", p.q, q_extent * static_cast<int64_t>(dtype_size(p.q_type)),
                                                   "out", p.out, o_bytes, false));
    if (p.n_window > 0)
        SIEVE_RETURN_IF_ERROR(require_same_or_disjoint(op, "window_slots", p.window_slots,
                                                       ((p.n_tokens - 1) * p.window_slots_stride + p.n_window) * 4,
                                                       "out", p.out, o_bytes, false));
    if (p.n_compressed > 0)
        SIEVE_RETURN_IF_ERROR(require_same_or_disjoint(
            op, "compressed_slots", p.compressed_slots, ((p.n_tokens - 1) * p.compressed_slots_stride + p.n_compressed) * 4,
            "out", p.out, o_bytes, false));
    return Status::ok();
}

Status check_indices(const SparseMqaParams& p) {
    constexpr std::string_view op = "sparse_mqa";
    SIEVE_RETURN_IF_ERROR(check_slot_values(op, "window", p.window_slots, p.n_tokens, p.n_window, p.window_slots_stride));
    return check_slot_values(op, "compressed", p.compressed_slots, p.n_tokens, p.n_compressed, p.compressed_slots_stride);
}

}  // namespace sieve
