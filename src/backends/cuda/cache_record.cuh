// The entry formats of ops/cache_record.h in device code, private to the cache kernels (cache_kernels.cu):
// the layout numbers of an entry computed once on the host (RecordGeometry, from CacheRecordLayout's
// member functions in src/ops/cache_record.cpp), the address of each part of an entry (MIRRORS
// cache_record_data / cache_record_scales / cache_record_bf16_tail of ops/cache_record.h exactly: keep
// them in step), byte-safe little-endian accesses for parts whose alignment the view does not promise,
// and core/dtype.h's bf16 rounding written on the bits. Everything lives in sieve::cuda::cache_rec, apart
// from the names of the other groups' helpers.
#pragma once

#include "backends/cuda/dtype_access.cuh"

#include <cstdint>
#include <initializer_list>

#include "sieve/ops/cache_record.h"
#include "sieve/ops/cache_view.h"

namespace sieve::cuda::cache_rec {

// One cache's entries, as the kernels address them. Built on the host by record_geometry().
struct RecordGeometry {
    uint8_t* base = nullptr;      // block 0 (device address)
    int64_t block_bytes = 0;      // stride between blocks
    int64_t block_size = 0;       // entries per block (B)
    int64_t dim = 0;              // values per entry
    int64_t quant_dim = 0;        // e4m3 values (fp8 formats), 0 for the plain ones
    int64_t bf16_tail = 0;        // bf16 values after the e4m3 ones (fp8_model1, fp8_v32)
    int64_t group_size = 0;       // values per scale
    int64_t n_groups = 0;         // scales per entry
    int64_t data_bytes = 0;       // CacheRecordLayout::data_bytes()
    int64_t scale_bytes = 0;      // CacheRecordLayout::scale_bytes()
    CacheRecordFormat format = CacheRecordFormat::f32;
    bool scales_after_block_data = false;
    // Whether every entry's part is naturally aligned (base, block stride and in-block offsets all
    // multiples of the access size): the plain values (4 B for f32, 2 B for bf16), the fp32 scales
    // (fp8_row_scale, fp8_v32) and the bf16 tail. ops/cache_record.h promises none of these (e.g.
    // fp8_row_scale of dim 1 puts its scales at odd offsets; fp8_v32 may quantize an odd count), so the
    // kernels fall back to byte accesses where a flag is false.
    bool values_aligned = false;
    bool scales_aligned = false;
    bool tail_aligned = false;
};

namespace detail {
inline bool all_multiples_of(int64_t size, std::initializer_list<int64_t> terms) {
    for (int64_t t : terms)
        if (t % size != 0) return false;
    return true;
}
}  // namespace detail

// Host: the geometry of view v holding entries of layout l (the caller validated both).
inline RecordGeometry record_geometry(const CacheView& v, const CacheRecordLayout& l) {
    RecordGeometry g;
    g.base = v.base;
    g.block_bytes = v.block_bytes;
    g.block_size = v.block_size;
    g.dim = l.dim;
    g.quant_dim = l.quant_dim();
    g.bf16_tail = l.bf16_tail();
    g.group_size = l.group_size();
    g.n_groups = l.n_groups();
    g.data_bytes = l.data_bytes();
    g.scale_bytes = l.scale_bytes();
    g.format = l.format;
    g.scales_after_block_data = l.scales_after_block_data();
    const auto base = static_cast<int64_t>(reinterpret_cast<uintptr_t>(v.base) % 64);
    using detail::all_multiples_of;
    switch (l.format) {
        case CacheRecordFormat::f32: g.values_aligned = all_multiples_of(4, {base, v.block_bytes, g.data_bytes}); break;
        case CacheRecordFormat::bf16: g.values_aligned = all_multiples_of(2, {base, v.block_bytes, g.data_bytes}); break;
        case CacheRecordFormat::fp8_row_scale:  // scales at block + B·data_bytes + 4·j
            g.scales_aligned = all_multiples_of(4, {base, v.block_bytes, v.block_size * g.data_bytes});
            break;
        case CacheRecordFormat::fp8_model1:  // ue8m0 bytes; tail at data + quant_dim
            g.tail_aligned = all_multiples_of(2, {base, v.block_bytes, g.data_bytes, g.quant_dim});
            break;
        case CacheRecordFormat::fp8_v32:  // per entry: scales at data + quant_dim, tail after the scales
            g.scales_aligned = all_multiples_of(4, {base, v.block_bytes, g.data_bytes, g.quant_dim});
            g.tail_aligned = all_multiples_of(2, {base, v.block_bytes, g.data_bytes, g.quant_dim + g.scale_bytes});
            break;
    }
    return g;
}

// ---- addresses of an entry's parts: ops/cache_record.h's helpers, mirrored ----------------------

// CacheView::block.
__host__ __device__ inline uint8_t* record_block(const RecordGeometry& g, int64_t slot) {
    return g.base + (slot / g.block_size) * g.block_bytes;
}
// cache_record_data: the plain row (f32, bf16) or the e4m3 values (fp8 formats).
__host__ __device__ inline uint8_t* record_data(const RecordGeometry& g, int64_t slot) {
    return record_block(g, slot) + (slot % g.block_size) * g.data_bytes;
}
// cache_record_scales: fp8_row_scale one fp32, fp8_model1 scale_bytes ue8m0 bytes, fp8_v32 n_groups fp32;
// nullptr for f32 and bf16.
__host__ __device__ inline uint8_t* record_scales(const RecordGeometry& g, int64_t slot) {
    if (g.scales_after_block_data)
        return record_block(g, slot) + g.block_size * g.data_bytes + (slot % g.block_size) * g.scale_bytes;
    if (g.format == CacheRecordFormat::fp8_v32) return record_data(g, slot) + g.quant_dim;
    return nullptr;
}
// cache_record_bf16_tail: the rope values of fp8_model1 and fp8_v32; nullptr otherwise.
__host__ __device__ inline uint8_t* record_bf16_tail(const RecordGeometry& g, int64_t slot) {
    switch (g.format) {
        case CacheRecordFormat::fp8_model1: return record_data(g, slot) + g.quant_dim;
        case CacheRecordFormat::fp8_v32: return record_data(g, slot) + g.quant_dim + g.scale_bytes;
        default: return nullptr;
    }
}

// ---- little-endian accesses (the records are little endian, as is the GPU) ---------------------

__device__ __forceinline__ void put_u16(uint8_t* p, uint16_t v, bool aligned) {
    if (aligned) {
        *reinterpret_cast<uint16_t*>(p) = v;
    } else {
        p[0] = static_cast<uint8_t>(v & 0xffu);
        p[1] = static_cast<uint8_t>(v >> 8);
    }
}
__device__ __forceinline__ void put_u32(uint8_t* p, uint32_t v, bool aligned) {
    if (aligned) {
        *reinterpret_cast<uint32_t*>(p) = v;
    } else {
        for (int b = 0; b < 4; ++b) p[b] = static_cast<uint8_t>(v >> (8 * b));
    }
}
__device__ __forceinline__ uint16_t get_u16(const uint8_t* p, bool aligned) {
    if (aligned) return *reinterpret_cast<const uint16_t*>(p);
    return static_cast<uint16_t>(p[0] | (p[1] << 8));
}
__device__ __forceinline__ uint32_t get_u32(const uint8_t* p, bool aligned) {
    if (aligned) return *reinterpret_cast<const uint32_t*>(p);
    return static_cast<uint32_t>(p[0]) | (static_cast<uint32_t>(p[1]) << 8) | (static_cast<uint32_t>(p[2]) << 16) |
           (static_cast<uint32_t>(p[3]) << 24);
}

// ---- bf16 on the bits (core/dtype.h f32_to_bf16, bit for bit: dtype_access.cuh) -----------------------

__device__ __forceinline__ uint16_t bf16_bits_of(uint32_t u) { return f32_to_bf16_bits(__uint_as_float(u)); }
// The fp32 bits of a bf16 value (exact widening).
__device__ __forceinline__ uint32_t f32_bits_of_bf16(uint16_t b) { return static_cast<uint32_t>(b) << 16; }

}  // namespace sieve::cuda::cache_rec
