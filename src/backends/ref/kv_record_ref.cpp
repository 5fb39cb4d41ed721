// ref kv_store / kv_load: the byte layouts of ops/kv_record.h written out plainly, one entry at a
// time, with core's scalar conversions.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "backends/ref/ref_ops.h"
#include "backends/ref/ref_ops_dsv4.h"
#include "ops/op_common.h"

namespace sieve::ref {

namespace {

// One group of bf16-rounded values → e4m3 bytes and its scale (ops/kv_record.h "Store semantics").
// Returns the scale (NaN for a poisoned group).
float quantize_group(const float* v, int64_t n, uint8_t* q) {
    float amax = 0.0f;
    bool finite = true;
    for (int64_t i = 0; i < n; ++i) {
        if (!std::isfinite(v[i])) finite = false;
        amax = std::max(amax, std::fabs(v[i]));
    }
    if (!finite) {
        for (int64_t i = 0; i < n; ++i) q[i] = static_cast<uint8_t>(0x7f | (std::signbit(v[i]) ? 0x80 : 0x00));
        return std::numeric_limits<float>::quiet_NaN();
    }
    const float s = ue8m0_scale_for_amax(amax);
    for (int64_t i = 0; i < n; ++i) q[i] = f32_to_fp8_e4m3(std::clamp(v[i] / s, -kFp8E4m3Max, kFp8E4m3Max));
    return s;
}

void store_record(const CacheView& cv, const KvRecordLayout& l, int64_t slot, const float* x) {
    uint8_t* data = kv_record_data(cv, l, slot);
    if (l.format == KvRecordFormat::f32) {
        std::memcpy(data, x, static_cast<size_t>(l.dim) * 4);
        return;
    }
    std::vector<float> v(static_cast<size_t>(l.dim));
    for (int64_t i = 0; i < l.dim; ++i) v[static_cast<size_t>(i)] = round_to_bf16(x[i]);
    uint8_t* scales = kv_record_scales(cv, l, slot);
    if (l.format == KvRecordFormat::fp8_scaled) {
        const float s = quantize_group(v.data(), l.dim, data);
        std::memcpy(scales, &s, 4);
        return;
    }
    // fp8_ds_mla: nope tiles of 64, then the bf16 rope dims, then the tile scales and zero padding.
    const int64_t nope = l.nope_dim();
    for (int64_t g = 0; g < l.n_tiles(); ++g) {
        const int64_t g0 = g * kFp8DsMlaTile, n = std::min(kFp8DsMlaTile, nope - g0);
        const float s = quantize_group(v.data() + g0, n, data + g0);
        scales[g] = std::isnan(s) ? uint8_t{0xff} : ue8m0_from_pow2(s);
    }
    for (int64_t g = l.n_tiles(); g < l.scale_bytes(); ++g) scales[g] = 0;
    for (int64_t i = 0; i < l.rope_dim; ++i) {
        const uint16_t b = f32_to_bf16(v[static_cast<size_t>(nope + i)]);
        data[nope + 2 * i] = static_cast<uint8_t>(b & 0xff);  // little endian
        data[nope + 2 * i + 1] = static_cast<uint8_t>(b >> 8);
    }
}

}  // namespace

void load_record(const CacheView& cv, const KvRecordLayout& l, int64_t slot, float* out) {
    const uint8_t* data = kv_record_data(cv, l, slot);
    switch (l.format) {
        case KvRecordFormat::f32: std::memcpy(out, data, static_cast<size_t>(l.dim) * 4); return;
        case KvRecordFormat::fp8_scaled: {
            float s;
            std::memcpy(&s, kv_record_scales(cv, l, slot), 4);
            for (int64_t i = 0; i < l.dim; ++i) out[i] = fp8_e4m3_to_f32(data[i]) * s;
            return;
        }
        case KvRecordFormat::fp8_ds_mla: {
            const uint8_t* scales = kv_record_scales(cv, l, slot);
            const int64_t nope = l.nope_dim();
            for (int64_t i = 0; i < nope; ++i) out[i] = fp8_e4m3_to_f32(data[i]) * ue8m0_to_f32(scales[i / kFp8DsMlaTile]);
            for (int64_t i = 0; i < l.rope_dim; ++i)
                out[nope + i] = bf16_to_f32(static_cast<uint16_t>(data[nope + 2 * i] | (data[nope + 2 * i + 1] << 8)));
            return;
        }
    }
}

Status kv_store(const KvStoreParams& p) {
    SIEVE_RETURN_IF_ERROR(validate_and_check_indices(p));
    std::vector<float> row(static_cast<size_t>(p.layout.dim));
    for (int64_t r = 0; r < p.n_rows; ++r) {
        if (p.slots[r] < 0) continue;
        for (int64_t i = 0; i < p.layout.dim; ++i) row[static_cast<size_t>(i)] = load(p.x, p.x_type, r * p.x_row_stride + i);
        store_record(p.cache, p.layout, p.slots[r], row.data());
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
