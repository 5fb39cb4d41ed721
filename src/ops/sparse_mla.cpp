#include "ops/sparse_mla.h"

#include <cmath>

#include "ops/dsa_cache_check.h"
#include "ops/op_common.h"

namespace sieve {

const char* sparse_mla_cache_format_name(SparseMlaCacheFormat f) {
    switch (f) {
        case SparseMlaCacheFormat::f32: return "f32";
        case SparseMlaCacheFormat::fp8_ds_mla: return "fp8_ds_mla";
    }
    return "?";
}

int64_t sparse_mla_quant_group(int64_t kv_lora_rank) { return kv_lora_rank < 128 ? kv_lora_rank : 128; }

int64_t sparse_mla_entry_bytes(SparseMlaCacheFormat f, int64_t kv_lora_rank, int64_t rope_dim) {
    if (f == SparseMlaCacheFormat::f32) return 4 * (kv_lora_rank + rope_dim);
    const int64_t g = sparse_mla_quant_group(kv_lora_rank);
    const int64_t n_scales = g > 0 ? (kv_lora_rank + g - 1) / g : 0;
    return kv_lora_rank + 4 * n_scales + 2 * rope_dim;  // §3.4: 512 + 16 + 128 = 656
}

Status sparse_mla_check_geometry(SparseMlaCacheFormat f, int64_t kv_lora_rank, int64_t rope_dim) {
    if (kv_lora_rank < 1 || rope_dim < 0 || kv_lora_rank > (int64_t{1} << 24) || rope_dim > (int64_t{1} << 24))
        return invalid_argument_error("sparse_mla: kv_lora_rank = {}, rope_dim = {}: expected kv_lora_rank in [1, 2^24] "
                                      "and rope_dim in [0, 2^24]",
                                      kv_lora_rank, rope_dim);
    if (f == SparseMlaCacheFormat::fp8_ds_mla && kv_lora_rank % sparse_mla_quant_group(kv_lora_rank) != 0)
        return unsupported_error("sparse_mla: fp8_ds_mla needs kv_lora_rank = {} to be a multiple of its scale group "
                                 "{} (one fp32 scale per 128 latent values, dsa_mla.md §3.4)",
                                 kv_lora_rank, sparse_mla_quant_group(kv_lora_rank));
    return Status::ok();
}

Status validate(const SparseMlaCacheWriteParams& p) {
    constexpr std::string_view op = "sparse_mla_cache_write";
    using namespace op_check;
    SIEVE_RETURN_IF_ERROR(sparse_mla_check_geometry(p.format, p.kv_lora_rank, p.rope_dim));
    SIEVE_RETURN_IF_ERROR(require_dtype(op, "latent_type", p.latent_type, {DType::f32, DType::bf16}));
    SIEVE_RETURN_IF_ERROR(require_dtype(op, "rope_type", p.rope_type, {DType::f32, DType::bf16}));
    SIEVE_RETURN_IF_ERROR(require_at_least(op, "n_tokens", p.n_tokens, 0));
    SIEVE_RETURN_IF_ERROR(rows_extent(op, "latent", {p.n_tokens, 1, p.kv_lora_rank, p.latent_row_stride, 0},
                                      dtype_size(p.latent_type))
                              .status());
    SIEVE_RETURN_IF_ERROR(
        rows_extent(op, "rope", {p.n_tokens, 1, p.rope_dim, p.rope_row_stride, 0}, dtype_size(p.rope_type)).status());
    if (p.n_tokens == 0) return Status::ok();
    SIEVE_RETURN_IF_ERROR(require_ptr(op, "latent", p.latent));
    if (p.rope_dim > 0) SIEVE_RETURN_IF_ERROR(require_ptr(op, "rope", p.rope));
    SIEVE_RETURN_IF_ERROR(require_ptr(op, "slots", p.slots));
    SIEVE_RETURN_IF_ERROR(dsa_check::cache_view(op, p.cache, sparse_mla_entry_bytes(p.format, p.kv_lora_rank, p.rope_dim),
                                                p.n_slots));
    return Status::ok();
}

Status check_indices(const SparseMlaCacheWriteParams& p) {
    constexpr std::string_view op = "sparse_mla_cache_write";
    for (int64_t t = 0; t < p.n_tokens; ++t)
        if (p.slots[t] < -1 || p.slots[t] >= p.n_slots)
            return invalid_argument_error("{}: slots[{}] = {}, expected −1 or a slot in [0, {})", op, t, p.slots[t],
                                          p.n_slots);
    return Status::ok();
}

Status validate(const SparseMlaAttentionParams& p) {
    constexpr std::string_view op = "sparse_mla_attention";
    using namespace op_check;
    SIEVE_RETURN_IF_ERROR(sparse_mla_check_geometry(p.format, p.kv_lora_rank, p.rope_dim));
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
        SIEVE_RETURN_IF_ERROR(dsa_check::cache_view(op, p.cache, sparse_mla_entry_bytes(p.format, p.kv_lora_rank, p.rope_dim),
                                                    p.n_slots));
    return Status::ok();
}

}  // namespace sieve
