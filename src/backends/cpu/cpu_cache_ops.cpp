#include "backends/cpu/cpu_cache_ops.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "backends/cpu/parallel.h"
#include "sieve/ops/op_common.h"

namespace sieve::cpu {

namespace {

// The entry values stored as bf16: v_i of ops/cache_store.h, rounded (RNE, NaN quiet: core f32_to_bf16).
void put_bf16_values(uint8_t* dst, const void* x, bool xb, int64_t n) {
    for (int64_t i = 0; i < n; ++i) {
        const float v = xb ? bf16_to_f32(static_cast<const uint16_t*>(x)[i]) : static_cast<const float*>(x)[i];
        const uint16_t b = f32_to_bf16(v);
        std::memcpy(dst + 2 * i, &b, 2);  // little endian (x86)
    }
}

void store_row(const CpuKernels& k, const CacheStoreParams& p, int64_t r) {
    const CacheRecordLayout& l = p.layout;
    const int64_t slot = p.slots[r];
    const bool xb = p.x_type == DType::bf16;
    const size_t es = xb ? 2 : 4;
    const char* x = static_cast<const char*>(p.x) + static_cast<size_t>(r * p.x_row_stride) * es;
    uint8_t* data = cache_record_data(p.cache, l, slot);
    switch (l.format) {
        case CacheRecordFormat::f32: {
            uint8_t* out = data + 4 * p.entry_offset;
            if (xb) {
                for (int64_t i = 0; i < p.dim; ++i) {
                    const float v = bf16_to_f32(reinterpret_cast<const uint16_t*>(x)[i]);
                    std::memcpy(out + 4 * i, &v, 4);
                }
            } else {
                std::memcpy(out, x, static_cast<size_t>(p.dim) * 4);
            }
            return;
        }
        case CacheRecordFormat::bf16: put_bf16_values(data + 2 * p.entry_offset, x, xb, p.dim); return;
        case CacheRecordFormat::fp8_row_scale:
        case CacheRecordFormat::fp8_model1:
        case CacheRecordFormat::fp8_v32: break;
    }
    uint8_t* scales = cache_record_scales(p.cache, l, slot);
    const int64_t nq = l.quant_dim(), g = l.group_size();
    for (int64_t gi = 0; gi < l.n_groups(); ++gi) {
        const int64_t g0 = gi * g;
        const float s = k.quant_fp8_group(x + static_cast<size_t>(g0) * es, xb, p.round_bf16, std::min(g, nq - g0),
                                          data + g0);
        if (l.format == CacheRecordFormat::fp8_model1)
            scales[gi] = std::isnan(s) ? uint8_t{0xff} : ue8m0_from_pow2(s);
        else
            std::memcpy(scales + 4 * gi, &s, 4);  // fp8_row_scale, fp8_v32: the scale as an fp32 value
    }
    if (l.format == CacheRecordFormat::fp8_model1)  // §4.1: zero padding after the tile bytes
        std::memset(scales + l.n_groups(), 0, static_cast<size_t>(l.scale_bytes() - l.n_groups()));
    // bf16(v_i) = bf16(x_i) whether or not v_i was rounded first (RNE is idempotent).
    put_bf16_values(cache_record_bf16_tail(p.cache, l, slot), x + static_cast<size_t>(nq) * es, xb, l.bf16_tail());
}

void load_row(const KvLoadParams& p, int64_t r) {
    const CacheRecordLayout& l = p.layout;
    const bool yb = p.y_type == DType::bf16;
    char* y = static_cast<char*>(p.y) + r * p.y_row_stride * (yb ? 2 : 4);
    auto put = [&](int64_t i, float v) {
        if (yb)
            reinterpret_cast<uint16_t*>(y)[i] = f32_to_bf16(v);
        else
            reinterpret_cast<float*>(y)[i] = v;
    };
    auto bf16_at = [](const uint8_t* b) {
        uint16_t h;
        std::memcpy(&h, b, 2);
        return bf16_to_f32(h);
    };
    auto f32_at = [](const uint8_t* b) {
        float v;
        std::memcpy(&v, b, 4);
        return v;
    };
    const int64_t slot = p.slots[r];
    if (slot < 0) {
        for (int64_t i = 0; i < l.dim; ++i) put(i, 0.0f);
        return;
    }
    const uint8_t* data = cache_record_data(p.cache, l, slot);
    switch (l.format) {
        case CacheRecordFormat::f32:
            for (int64_t i = 0; i < l.dim; ++i) put(i, f32_at(data + 4 * i));
            return;
        case CacheRecordFormat::bf16:
            for (int64_t i = 0; i < l.dim; ++i) put(i, bf16_at(data + 2 * i));
            return;
        case CacheRecordFormat::fp8_row_scale:
        case CacheRecordFormat::fp8_model1:
        case CacheRecordFormat::fp8_v32: break;
    }
    const uint8_t* scales = cache_record_scales(p.cache, l, slot);
    const int64_t nq = l.quant_dim(), g = l.group_size();
    for (int64_t gi = 0; gi < l.n_groups(); ++gi) {
        const float s = l.format == CacheRecordFormat::fp8_model1 ? ue8m0_to_f32(scales[gi]) : f32_at(scales + 4 * gi);
        for (int64_t i = gi * g; i < std::min(nq, (gi + 1) * g); ++i) put(i, fp8_e4m3_to_f32(data[i]) * s);
    }
    const uint8_t* tail = cache_record_bf16_tail(p.cache, l, slot);
    for (int64_t i = 0; i < l.bf16_tail(); ++i) put(nq + i, bf16_at(tail + 2 * i));
}

}  // namespace

Status cache_store(const CpuKernels& k, ThreadPool& pool, const CacheStoreParams& p) {
    SIEVE_RETURN_IF_ERROR(validate_and_check_indices(p));
    parallel_chunks(pool, p.n_rows, min_chunk_for(4 * p.dim), [&](int64_t b, int64_t e) {
        for (int64_t r = b; r < e; ++r)
            if (p.slots[r] >= 0) store_row(k, p, r);
    });
    return Status::ok();
}

Status kv_load(ThreadPool& pool, const KvLoadParams& p) {
    SIEVE_RETURN_IF_ERROR(validate_and_check_indices(p));
    parallel_chunks(pool, p.n_rows, min_chunk_for(4 * p.layout.dim), [&](int64_t b, int64_t e) {
        for (int64_t r = b; r < e; ++r) load_row(p, r);
    });
    return Status::ok();
}

// Rows split over the pool; a row's entries are independent (ops/selected_slots.h).
Status selected_slots(ThreadPool& pool, const SelectedSlotsParams& p) {
    SIEVE_RETURN_IF_ERROR(validate_and_check_indices(p));
    parallel_chunks(pool, p.n_tokens, min_chunk_for(p.width, 1 << 16), [&](int64_t b, int64_t e) {
        for (int64_t t = b; t < e; ++t) {
            const int64_t visible = (p.positions[t] + 1) / p.ratio;
            const int32_t* table = p.tables.block_table + p.tables.token_request[t] * p.tables.block_table_stride;
            int32_t* out = p.slots + t * p.slots_row_stride;
            if (p.selected == nullptr || (p.n_scored != nullptr && p.n_scored[t] == 0)) {
                const int64_t n = visible < p.width ? visible : p.width;
                for (int64_t j = 0; j < n; ++j) out[j] = static_cast<int32_t>(paged_slot(table, j, p.block_size));
                for (int64_t j = n; j < p.width; ++j) out[j] = -1;
                continue;
            }
            const int32_t* sel = p.selected + t * p.selected_row_stride;
            for (int64_t j = 0; j < p.width; ++j) {
                const int64_t e = sel[j];
                out[j] = e >= 0 && e < visible ? static_cast<int32_t>(paged_slot(table, e, p.block_size)) : -1;
            }
        }
    });
    return Status::ok();
}

}  // namespace sieve::cpu
