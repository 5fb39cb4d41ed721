#include "sieve/ops/cache_record.h"

#include "sieve/ops/op_common.h"

namespace sieve {

std::string_view cache_record_format_name(CacheRecordFormat f) {
    switch (f) {
        case CacheRecordFormat::f32: return "f32";
        case CacheRecordFormat::bf16: return "bf16";
        case CacheRecordFormat::fp8_row_scale: return "fp8_row_scale";
        case CacheRecordFormat::fp8_model1: return "fp8_model1";
        case CacheRecordFormat::fp8_v32: return "fp8_v32";
    }
    return "?";
}

bool CacheRecordLayout::is_fp8() const {
    return format == CacheRecordFormat::fp8_row_scale || format == CacheRecordFormat::fp8_model1 ||
           format == CacheRecordFormat::fp8_v32;
}

int64_t CacheRecordLayout::quant_dim() const {
    switch (format) {
        case CacheRecordFormat::f32:
        case CacheRecordFormat::bf16: return 0;
        case CacheRecordFormat::fp8_row_scale: return dim;
        case CacheRecordFormat::fp8_model1:
        case CacheRecordFormat::fp8_v32: return dim - rope_dim;
    }
    return 0;
}

int64_t CacheRecordLayout::bf16_tail() const {
    return format == CacheRecordFormat::fp8_model1 || format == CacheRecordFormat::fp8_v32 ? rope_dim : 0;
}

int64_t CacheRecordLayout::group_size() const {
    switch (format) {
        case CacheRecordFormat::f32:
        case CacheRecordFormat::bf16: return 0;
        case CacheRecordFormat::fp8_row_scale: return dim;
        case CacheRecordFormat::fp8_model1: return kFp8Model1Tile;
        case CacheRecordFormat::fp8_v32: return quant_dim() < kFp8V32Group ? quant_dim() : kFp8V32Group;
    }
    return 0;
}

int64_t CacheRecordLayout::n_groups() const {
    const int64_t g = group_size();
    return g > 0 ? (quant_dim() + g - 1) / g : 0;
}

int64_t CacheRecordLayout::data_bytes() const {
    switch (format) {
        case CacheRecordFormat::f32: return 4 * dim;
        case CacheRecordFormat::bf16: return 2 * dim;
        case CacheRecordFormat::fp8_row_scale: return dim;
        case CacheRecordFormat::fp8_model1: return quant_dim() + 2 * rope_dim;
        case CacheRecordFormat::fp8_v32: return entry_bytes();
    }
    return 0;
}

int64_t CacheRecordLayout::scale_bytes() const {
    switch (format) {
        case CacheRecordFormat::f32:
        case CacheRecordFormat::bf16: return 0;
        case CacheRecordFormat::fp8_row_scale: return 4;                       // deepseek_v4.md §4.3: one fp32 scale
        case CacheRecordFormat::fp8_model1: return (n_groups() + 7) / 8 * 8;  // §4.1: 7 scales + 1 pad byte
        case CacheRecordFormat::fp8_v32: return 4 * n_groups();               // dsa_mla.md §3.4: fp32 per 128
    }
    return 0;
}

int64_t CacheRecordLayout::entry_bytes() const {
    switch (format) {
        case CacheRecordFormat::f32:
        case CacheRecordFormat::bf16:
        case CacheRecordFormat::fp8_row_scale:
        case CacheRecordFormat::fp8_model1: return data_bytes() + scale_bytes();
        case CacheRecordFormat::fp8_v32: return quant_dim() + scale_bytes() + 2 * rope_dim;  // 512 + 16 + 128 = 656
    }
    return 0;
}

bool CacheRecordLayout::scales_after_block_data() const {
    return format == CacheRecordFormat::fp8_row_scale || format == CacheRecordFormat::fp8_model1;
}

Status validate(const CacheRecordLayout& l) {
    constexpr std::string_view op = "cache_record";
    const std::string_view name = cache_record_format_name(l.format);
    if (name == "?")
        return invalid_argument_error("{}: format = {} is not a CacheRecordFormat", op, static_cast<int>(l.format));
    // Bound dim so that every byte count of a block fits comfortably in int64.
    if (l.dim < 1 || l.dim > (int64_t{1} << 40))
        return invalid_argument_error("{}: {} dim = {}, expected in [1, 2^40]", op, name, l.dim);
    switch (l.format) {
        case CacheRecordFormat::f32:
        case CacheRecordFormat::bf16: break;
        case CacheRecordFormat::fp8_row_scale:
            if (l.dim > kFp8RowScaleMaxDim)
                return unsupported_error("{}: fp8_row_scale holds one scale per row, so dim = {} must be ≤ {} "
                                         "(deepseek_v4.md §4.3, dsa_mla.md §3.3: group = 128 = head_dim)",
                                         op, l.dim, kFp8RowScaleMaxDim);
            break;
        case CacheRecordFormat::fp8_model1:
            if (l.rope_dim < 0 || l.rope_dim > l.dim || l.rope_dim % 2 != 0 || l.dim % 2 != 0)
                return invalid_argument_error(
                    "{}: fp8_model1 dim = {}, rope_dim = {}: both must be even (the bf16 rope dims stay 2-byte "
                    "aligned) with rope_dim ≤ dim",
                    op, l.dim, l.rope_dim);
            break;
        case CacheRecordFormat::fp8_v32:
            if (l.rope_dim < 0 || l.rope_dim >= l.dim)
                return invalid_argument_error("{}: fp8_v32 dim = {}, rope_dim = {}: expected 0 ≤ rope_dim < dim", op,
                                              l.dim, l.rope_dim);
            if (l.quant_dim() % l.group_size() != 0)
                return unsupported_error("{}: fp8_v32 needs its {} quantized values (dim {} − rope_dim {}) to be a "
                                         "multiple of the scale group {} (one fp32 scale per 128 values, dsa_mla.md §3.4)",
                                         op, l.quant_dim(), l.dim, l.rope_dim, l.group_size());
            break;
    }
    return Status::ok();
}

namespace {

Status check_view_geometry(std::string_view op, std::string_view name, const CacheView& v, const CacheRecordLayout& l) {
    SIEVE_RETURN_IF_ERROR(validate(l));
    const std::string_view sep = name.empty() ? "" : " ";
    if (v.entry_bytes != l.entry_bytes())
        return invalid_argument_error("{}: {}{}cache entry_bytes = {}, but a {} entry of dim {} (rope {}) takes {}", op,
                                      name, sep, v.entry_bytes, cache_record_format_name(l.format), l.dim, l.rope_dim,
                                      l.entry_bytes());
    if (v.block_size < 1)
        return invalid_argument_error("{}: {}{}cache block_size = {}, expected ≥ 1", op, name, sep, v.block_size);
    int64_t need = 0;
    if (__builtin_mul_overflow(v.block_size, v.entry_bytes, &need) || v.block_bytes < need)
        return invalid_argument_error("{}: {}{}cache block_bytes = {} < block_size {} · entry_bytes {}", op, name, sep,
                                      v.block_bytes, v.block_size, v.entry_bytes);
    return Status::ok();
}

}  // namespace

Status validate_cache_view(std::string_view op, std::string_view name, const CacheView& v, const CacheRecordLayout& l) {
    SIEVE_RETURN_IF_ERROR(check_view_geometry(op, name, v, l));
    if (v.base == nullptr)
        return invalid_argument_error("{}: {}{}cache has no storage (base is null)", op, name, name.empty() ? "" : " ");
    return Status::ok();
}

Status validate_cache_view(std::string_view op, std::string_view name, const CacheView& v, const CacheRecordLayout& l,
                           int64_t n_slots) {
    SIEVE_RETURN_IF_ERROR(check_view_geometry(op, name, v, l));
    const std::string_view sep = name.empty() ? "" : " ";
    if (n_slots < 0 || n_slots % v.block_size != 0)
        return invalid_argument_error("{}: {}{}n_slots = {}, expected a multiple of block_size {} (whole blocks)", op,
                                      name, sep, n_slots, v.block_size);
    int64_t extent = 0;
    if (__builtin_mul_overflow(n_slots / v.block_size, v.block_bytes, &extent))
        return invalid_argument_error("{}: {}{}cache of {} blocks of {} bytes overflows int64", op, name, sep,
                                      n_slots / v.block_size, v.block_bytes);
    if (n_slots > 0 && v.base == nullptr)
        return invalid_argument_error("{}: {}{}cache has no storage (base is null) for {} slots", op, name, sep, n_slots);
    return Status::ok();
}

}  // namespace sieve
