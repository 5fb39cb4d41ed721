#include "ops/kv_record.h"

#include "ops/op_common.h"

namespace sieve {

std::string_view kv_record_format_name(KvRecordFormat f) {
    switch (f) {
        case KvRecordFormat::f32: return "f32";
        case KvRecordFormat::fp8_ds_mla: return "fp8_ds_mla";
        case KvRecordFormat::fp8_scaled: return "fp8_scaled";
    }
    return "?";
}

int64_t KvRecordLayout::data_bytes() const {
    switch (format) {
        case KvRecordFormat::f32: return 4 * dim;
        case KvRecordFormat::fp8_ds_mla: return nope_dim() + 2 * rope_dim;
        case KvRecordFormat::fp8_scaled: return dim;
    }
    return 0;
}

int64_t KvRecordLayout::scale_bytes() const {
    switch (format) {
        case KvRecordFormat::f32: return 0;
        case KvRecordFormat::fp8_ds_mla: return (n_tiles() + 7) / 8 * 8;  // §4.1: 7 scales + 1 pad byte
        case KvRecordFormat::fp8_scaled: return 4;                        // §4.3: one fp32 scale
    }
    return 0;
}

int64_t KvRecordLayout::entry_bytes() const { return data_bytes() + scale_bytes(); }

Status validate(const KvRecordLayout& l) {
    constexpr std::string_view op = "kv_record";
    switch (l.format) {
        case KvRecordFormat::f32:
        case KvRecordFormat::fp8_scaled: break;
        case KvRecordFormat::fp8_ds_mla:
            if (l.rope_dim < 0 || l.rope_dim > l.dim || l.rope_dim % 2 != 0 || l.dim % 2 != 0)
                return invalid_argument_error(
                    "{}: fp8_ds_mla dim = {}, rope_dim = {}: both must be even (the bf16 rope dims stay 2-byte "
                    "aligned) with rope_dim ≤ dim",
                    op, l.dim, l.rope_dim);
            break;
        default:
            return invalid_argument_error("{}: format = {} is not a KvRecordFormat", op, static_cast<int>(l.format));
    }
    // Bound dim so that every byte count above fits comfortably in int64.
    if (l.dim < 1 || l.dim > (int64_t{1} << 40))
        return invalid_argument_error("{}: dim = {}, expected in [1, 2^40]", op, l.dim);
    return Status::ok();
}

Status validate_cache_view(std::string_view op, std::string_view name, const CacheView& v, const KvRecordLayout& l) {
    SIEVE_RETURN_IF_ERROR(validate(l));
    if (v.base == nullptr) return invalid_argument_error("{}: {} cache has no storage (base is null)", op, name);
    if (v.entry_bytes != l.entry_bytes())
        return invalid_argument_error("{}: {} cache entry_bytes = {}, but a {} entry of dim {} (rope {}) takes {}", op,
                                      name, v.entry_bytes, kv_record_format_name(l.format), l.dim, l.rope_dim,
                                      l.entry_bytes());
    if (v.block_size < 1) return invalid_argument_error("{}: {} cache block_size = {}, expected ≥ 1", op, name, v.block_size);
    int64_t need = 0;
    if (__builtin_mul_overflow(v.block_size, v.entry_bytes, &need) || v.block_bytes < need)
        return invalid_argument_error("{}: {} cache block_bytes = {} < block_size {} · entry_bytes {}", op, name,
                                      v.block_bytes, v.block_size, v.entry_bytes);
    return Status::ok();
}

Status validate(const KvStoreParams& p) {
    constexpr std::string_view op = "kv_store";
    using namespace op_check;
    SIEVE_RETURN_IF_ERROR(require_dtype(op, "x_type", p.x_type, {DType::f32, DType::bf16}));
    SIEVE_RETURN_IF_ERROR(require_at_least(op, "n_rows", p.n_rows, 0));
    SIEVE_ASSIGN_OR_RETURN(int64_t x_extent,
                           rows_extent(op, "x", {p.n_rows, 1, p.layout.dim, p.x_row_stride, 0}, dtype_size(p.x_type)));
    (void)x_extent;
    SIEVE_RETURN_IF_ERROR(validate_cache_view(op, "", p.cache, p.layout));
    if (p.n_rows == 0) return Status::ok();
    SIEVE_RETURN_IF_ERROR(require_ptr(op, "x", p.x));
    SIEVE_RETURN_IF_ERROR(require_ptr(op, "slots", p.slots));
    return Status::ok();
}

Status check_indices(const KvStoreParams& p) {
    constexpr std::string_view op = "kv_store";
    for (int64_t r = 0; r < p.n_rows; ++r)
        if (p.slots[r] < -1) return invalid_argument_error("{}: slots[{}] = {}, expected ≥ −1", op, r, p.slots[r]);
    return Status::ok();
}

Status validate(const KvLoadParams& p) {
    constexpr std::string_view op = "kv_load";
    using namespace op_check;
    SIEVE_RETURN_IF_ERROR(require_dtype(op, "y_type", p.y_type, {DType::f32, DType::bf16}));
    SIEVE_RETURN_IF_ERROR(require_at_least(op, "n_rows", p.n_rows, 0));
    SIEVE_ASSIGN_OR_RETURN(int64_t y_extent, output_rows_extent(op, "y", {p.n_rows, 1, p.layout.dim, p.y_row_stride, 0},
                                                                dtype_size(p.y_type)));
    (void)y_extent;
    SIEVE_RETURN_IF_ERROR(validate_cache_view(op, "", p.cache, p.layout));
    if (p.n_rows == 0) return Status::ok();
    SIEVE_RETURN_IF_ERROR(require_ptr(op, "y", p.y));
    SIEVE_RETURN_IF_ERROR(require_ptr(op, "slots", p.slots));
    return Status::ok();
}

Status check_indices(const KvLoadParams& p) {
    constexpr std::string_view op = "kv_load";
    for (int64_t r = 0; r < p.n_rows; ++r)
        if (p.slots[r] < -1) return invalid_argument_error("{}: slots[{}] = {}, expected ≥ −1", op, r, p.slots[r]);
    return Status::ok();
}

}  // namespace sieve
