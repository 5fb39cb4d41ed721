// ref cache_store and kv_load, and the entry reader of every ref op that reads a cache (load_record): the
// byte layouts of ops/cache_record.h written out plainly, one entry at a time, with core's scalar
// conversions and the one ref group quantizer (quant_fp8_group).
#include <algorithm>
#include <cstring>
#include <vector>

#include "backends/ref/ref_ops.h"
#include "sieve/ops/cache_record.h"
#include "sieve/ops/cache_store.h"
#include "sieve/ops/cache_view.h"
#include "sieve/ops/kv_load.h"
#include "sieve/ops/op_common.h"

namespace sieve::ref {

namespace {

void put_bf16(uint8_t* p, float v) {
    const uint16_t b = f32_to_bf16(v);
    p[0] = static_cast<uint8_t>(b & 0xff);  // little endian
    p[1] = static_cast<uint8_t>(b >> 8);
}
float get_bf16(const uint8_t* p) { return bf16_to_f32(static_cast<uint16_t>(p[0] | (p[1] << 8))); }
float get_f32(const uint8_t* p) {
    float v;
    std::memcpy(&v, p, 4);
    return v;
}

// Writes the values v [layout.dim] (already rounded as the op says) as the fp8 entry at `slot`.
void store_fp8_entry(const CacheView& cv, const CacheRecordLayout& l, int64_t slot, const std::vector<float>& v) {
    uint8_t* data = cache_record_data(cv, l, slot);
    uint8_t* scales = cache_record_scales(cv, l, slot);
    const int64_t nq = l.quant_dim(), g = l.group_size();
    for (int64_t k = 0; k < l.n_groups(); ++k) {
        const int64_t g0 = k * g, n = std::min(g, nq - g0);
        const float s = quant_fp8_group(v.data() + g0, n, data + g0);
        if (l.format == CacheRecordFormat::fp8_model1)
            scales[k] = ue8m0_byte_of_scale(s);
        else
            std::memcpy(scales + 4 * k, &s, 4);  // fp8_row_scale, fp8_v32: the scale as an fp32 value
    }
    if (l.format == CacheRecordFormat::fp8_model1)
        for (int64_t k = l.n_groups(); k < l.scale_bytes(); ++k) scales[k] = 0;  // §4.1: zero padding
    uint8_t* tail = cache_record_bf16_tail(cv, l, slot);
    for (int64_t i = 0; i < l.bf16_tail(); ++i) put_bf16(tail + 2 * i, v[static_cast<size_t>(nq + i)]);
}

}  // namespace

void load_record(const CacheView& cv, const CacheRecordLayout& l, int64_t slot, float* out) {
    const uint8_t* data = cache_record_data(cv, l, slot);
    switch (l.format) {
        case CacheRecordFormat::f32:
            for (int64_t i = 0; i < l.dim; ++i) out[i] = get_f32(data + 4 * i);
            return;
        case CacheRecordFormat::bf16:
            for (int64_t i = 0; i < l.dim; ++i) out[i] = get_bf16(data + 2 * i);
            return;
        case CacheRecordFormat::fp8_row_scale:
        case CacheRecordFormat::fp8_model1:
        case CacheRecordFormat::fp8_v32: break;
    }
    const uint8_t* scales = cache_record_scales(cv, l, slot);
    const int64_t nq = l.quant_dim(), g = l.group_size();
    for (int64_t i = 0; i < nq; ++i) {
        const float s = l.format == CacheRecordFormat::fp8_model1 ? ue8m0_to_f32(scales[i / g]) : get_f32(scales + 4 * (i / g));
        out[i] = fp8_e4m3_to_f32(data[i]) * s;
    }
    const uint8_t* tail = cache_record_bf16_tail(cv, l, slot);
    for (int64_t i = 0; i < l.bf16_tail(); ++i) out[nq + i] = get_bf16(tail + 2 * i);
}

Status cache_store(const CacheStoreParams& p) {
    SIEVE_RETURN_IF_ERROR(validate_and_check_indices(p));
    const CacheRecordLayout& l = p.layout;
    std::vector<float> v(static_cast<size_t>(p.dim));
    for (int64_t r = 0; r < p.n_rows; ++r) {
        if (p.slots[r] < 0) continue;
        for (int64_t i = 0; i < p.dim; ++i) {
            const float x = load(p.x, p.x_type, r * p.x_row_stride + i);
            v[static_cast<size_t>(i)] = p.round_bf16 && l.is_fp8() ? round_to_bf16(x) : x;
        }
        uint8_t* data = cache_record_data(p.cache, l, p.slots[r]);
        switch (l.format) {
            case CacheRecordFormat::f32:
                std::memcpy(data + 4 * p.entry_offset, v.data(), static_cast<size_t>(p.dim) * 4);
                break;
            case CacheRecordFormat::bf16:
                for (int64_t i = 0; i < p.dim; ++i) put_bf16(data + 2 * (p.entry_offset + i), v[static_cast<size_t>(i)]);
                break;
            case CacheRecordFormat::fp8_row_scale:
            case CacheRecordFormat::fp8_model1:
            case CacheRecordFormat::fp8_v32: store_fp8_entry(p.cache, l, p.slots[r], v); break;
        }
    }
    return Status::ok();
}

Status kv_load(const KvLoadParams& p) {
    SIEVE_RETURN_IF_ERROR(validate_and_check_indices(p));
    std::vector<float> row(static_cast<size_t>(p.layout.dim));
    for (int64_t r = 0; r < p.n_rows; ++r) {
        if (p.slots[r] < 0)
            std::fill(row.begin(), row.end(), 0.0f);
        else
            load_record(p.cache, p.layout, p.slots[r], row.data());
        for (int64_t i = 0; i < p.layout.dim; ++i) store(p.y, p.y_type, r * p.y_row_stride + i, row[static_cast<size_t>(i)]);
    }
    return Status::ok();
}

}  // namespace sieve::ref
