#include "ops/sparse_mla.h"

#include <cmath>

#include "ops/op_common.h"

namespace sieve {

namespace {

// kv_lora_rank ≥ 1, rope_dim ≥ 0, the format one of the latent cache's and its layout representable.
Status check_latent_geometry(std::string_view op, const SparseMlaAttentionParams& p) {
    if (p.kv_lora_rank < 1 || p.rope_dim < 0)
        return invalid_argument_error("{}: kv_lora_rank = {}, rope_dim = {}: expected kv_lora_rank ≥ 1 and rope_dim ≥ 0",
                                      op, p.kv_lora_rank, p.rope_dim);
    if (p.format != CacheRecordFormat::f32 && p.format != CacheRecordFormat::fp8_v32)
        return invalid_argument_error("{}: format = {}, expected f32 or fp8_v32 (dsa_mla.md §3.4)", op,
                                      cache_record_format_name(p.format));
    const Status s = validate(p.layout());
    if (!s.is_ok()) return s.with_context(fmt::format("{}: kv_lora_rank = {}, rope_dim = {}", op, p.kv_lora_rank, p.rope_dim));
    return Status::ok();
}

}  // namespace

Status validate(const SparseMlaAttentionParams& p) {
    constexpr std::string_view op = "sparse_mla_attention";
    using namespace op_check;
    SIEVE_RETURN_IF_ERROR(check_latent_geometry(op, p));
    SIEVE_RETURN_IF_ERROR(require_dtype(op, "q_type", p.q_type, {DType::f32, DType::bf16}));
    SIEVE_RETURN_IF_ERROR(require_dtype(op, "out_type", p.out_type, {DType::f32, DType::bf16}));
    SIEVE_RETURN_IF_ERROR(require_at_least(op, "n_tokens", p.n_tokens, 0));
    SIEVE_RETURN_IF_ERROR(require_at_least(op, "n_heads", p.n_heads, 1));
    SIEVE_RETURN_IF_ERROR(require_at_least(op, "topk", p.topk, 0));
    if (!(p.scale > 0.0f) || !std::isfinite(p.scale))
        return invalid_argument_error("{}: scale = {}, expected finite and > 0", op, p.scale);
    const int64_t dqk = p.kv_lora_rank + p.rope_dim;
    SIEVE_ASSIGN_OR_RETURN(int64_t q_extent, rows_extent(op, "q", {p.n_tokens, p.n_heads, dqk, p.q_token_stride,
                                                                   p.q_head_stride},
                                                         dtype_size(p.q_type)));
    SIEVE_ASSIGN_OR_RETURN(int64_t o_extent,
                           output_rows_extent(op, "out", {p.n_tokens, p.n_heads, p.kv_lora_rank, p.out_token_stride,
                                                          p.out_head_stride},
                                              dtype_size(p.out_type)));
    SIEVE_ASSIGN_OR_RETURN(int64_t s_extent,
                           rows_extent(op, "slots", {p.n_tokens, 1, p.topk, p.slots_row_stride, 0}, sizeof(int32_t)));
    if (p.n_tokens == 0) return Status::ok();
    SIEVE_RETURN_IF_ERROR(require_ptr(op, "q", p.q));
    SIEVE_RETURN_IF_ERROR(require_ptr(op, "out", p.out));
    if (p.topk > 0) SIEVE_RETURN_IF_ERROR(require_ptr(op, "slots", p.slots));
    const int64_t o_bytes = o_extent * static_cast<int64_t>(dtype_size(p.out_type));
    SIEVE_RETURN_IF_ERROR(require_same_or_disjoint(op, "q", p.q, q_extent * static_cast<int64_t>(dtype_size(p.q_type)),
                                                   "out", p.out, o_bytes, false));
    SIEVE_RETURN_IF_ERROR(require_same_or_disjoint(op, "slots", p.slots, s_extent * 4, "out", p.out, o_bytes, false));
    if (p.sink) SIEVE_RETURN_IF_ERROR(require_same_or_disjoint(op, "sink", p.sink, p.n_heads * 4, "out", p.out, o_bytes, false));
    return Status::ok();
}

Status check_indices(const SparseMlaAttentionParams& p) {
    constexpr std::string_view op = "sparse_mla_attention";
    bool any_slot = false;
    for (int64_t t = 0; t < p.n_tokens; ++t) {
        const int32_t* row = p.slots + t * p.slots_row_stride;
        for (int64_t j = 0; j < p.topk; ++j) {
            if (row[j] < -1 || row[j] >= p.n_slots)
                return invalid_argument_error("{}: slots[{}, {}] = {}, expected −1 or a slot in [0, {})", op, t, j,
                                              row[j], p.n_slots);
            any_slot |= row[j] >= 0;
        }
    }
    // The cache is read only when some slot is listed (which depends on the slots, hence this check
    // lives here).
    if (any_slot)
        SIEVE_RETURN_IF_ERROR(validate_cache_view(op, "", p.cache, p.layout(), p.n_slots));
    return Status::ok();
}

}  // namespace sieve
