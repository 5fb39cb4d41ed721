// Cache-entry addressing and decoding in device code for the attention kernels (attention_kernels.cu).
// It MIRRORS ops/cache_record.h (cache_record_data / cache_record_scales / cache_record_bf16_tail) and ref's
// load_record (src/backends/ref/cache_record_ref.cpp): the layout numbers are computed on the host from
// CacheRecordLayout (make_attn_record) and the device functions below only repeat its address formulas. A
// change to a byte layout in cache_record.h must be repeated here.
//
// Every multi-byte cache value is read through load_f32_le / load_bf16_le, which fall back to byte loads
// when the address is not naturally aligned (the views promise nothing finer than byte alignment, and a
// misaligned load would fault the whole context). Cache reads go through the read-only path (__ldg): the
// caches are not written while an attention op runs, and the compiler may then keep several loads in
// flight ahead of the shared-memory stores that follow them.
#pragma once

#include <cstdint>

#include "backends/cuda/fp8.cuh"
#include "sieve/ops/cache_record.h"
#include "sieve/ops/cache_view.h"

namespace sieve::cuda::attn {  // private to attention_kernels.cu (no clash with the other groups' helpers)

// fp32 / bf16 little-endian values at any byte address.
__device__ __forceinline__ uint32_t load_u8(const uint8_t* p) { return __ldg(p); }
__device__ __forceinline__ float load_f32_le(const uint8_t* p) {
    if ((reinterpret_cast<uintptr_t>(p) & 3u) == 0) return __ldg(reinterpret_cast<const float*>(p));
    const uint32_t u = load_u8(p) | (load_u8(p + 1) << 8) | (load_u8(p + 2) << 16) | (load_u8(p + 3) << 24);
    return __uint_as_float(u);
}
__device__ __forceinline__ float load_bf16_le(const uint8_t* p) {
    const uint32_t u = (reinterpret_cast<uintptr_t>(p) & 1u) == 0
                           ? static_cast<uint32_t>(__ldg(reinterpret_cast<const unsigned short*>(p)))
                           : load_u8(p) | (load_u8(p + 1) << 8);
    return __uint_as_float(u << 16);  // bf16 widens exactly (core/dtype.h bf16_to_f32)
}
// An f32 (bf16 = false) or bf16 element i of a plain row at `row`.
__device__ __forceinline__ float load_plain_le(const uint8_t* row, bool bf16, int64_t i) {
    return bf16 ? load_bf16_le(row + 2 * i) : load_f32_le(row + 4 * i);
}

// The formats sparse attention reads (ops/sparse_attention.h: f32 | fp8_model1 | fp8_v32).
enum class AttnRecordFormat : int32_t { f32 = 0, fp8_model1 = 1, fp8_v32 = 2 };

// One cache's geometry and one entry format's numbers, host-computed (make_attn_record).
struct AttnRecord {
    const uint8_t* base = nullptr;  // CacheView::base (a device address)
    int64_t block_bytes = 0;        // CacheView::block_bytes
    int64_t block_size = 1;         // CacheView::block_size (≥ 1: validate_cache_view)
    int64_t n_slots = 0;            // slots in the cache: a listed slot outside [0, n_slots) is never addressed
    int64_t data_bytes = 0;         // CacheRecordLayout::data_bytes()
    int64_t scale_bytes = 0;        // CacheRecordLayout::scale_bytes()
    int64_t quant_dim = 0;          // CacheRecordLayout::quant_dim(): the e4m3 values
    int64_t tail_offset = 0;        // bytes from an entry's data to its bf16 tail (cache_record_bf16_tail)
    AttnRecordFormat format = AttnRecordFormat::f32;
};

// Host side: the numbers of `l` in `v` (the params were validated: v is consistent with l).
inline AttnRecord make_attn_record(const CacheView& v, const CacheRecordLayout& l, int64_t n_slots) {
    AttnRecord r;
    r.base = v.base;
    r.block_bytes = v.block_bytes;
    r.block_size = v.block_size;
    r.n_slots = n_slots;
    r.data_bytes = l.data_bytes();
    r.scale_bytes = l.scale_bytes();
    r.quant_dim = l.quant_dim();
    switch (l.format) {
        case CacheRecordFormat::fp8_model1:
            r.format = AttnRecordFormat::fp8_model1;
            r.tail_offset = l.quant_dim();  // cache_record_bf16_tail: data + quant_dim
            break;
        case CacheRecordFormat::fp8_v32:
            r.format = AttnRecordFormat::fp8_v32;
            r.tail_offset = l.quant_dim() + l.scale_bytes();  // data + quant_dim + scale_bytes
            break;
        default: r.format = AttnRecordFormat::f32; break;
    }
    return r;
}

// slot / block_size and slot % block_size of a slot ≥ 0 (CacheView::block): in 32 bits when both fit (the
// usual case: slots are int32), a 64-bit division otherwise.
struct AttnBlockPos {
    int64_t block, entry;
};
__device__ __forceinline__ AttnBlockPos attn_block_pos(int64_t slot, int64_t block_size) {
    if (slot <= 0xffffffffll && block_size <= 0xffffffffll) {
        const uint32_t s = static_cast<uint32_t>(slot), b = static_cast<uint32_t>(block_size);
        return {static_cast<int64_t>(s / b), static_cast<int64_t>(s % b)};
    }
    return {slot / block_size, slot % block_size};
}
// cache_record_data: the block's start plus the entry's data part (per-block layouts) or the whole entry.
__device__ __forceinline__ const uint8_t* attn_record_data(const AttnRecord& r, AttnBlockPos bp) {
    return r.base + bp.block * r.block_bytes + bp.entry * r.data_bytes;
}
// cache_record_scales: fp8_model1 keeps every entry's tile bytes after the block's data parts; fp8_v32
// keeps its fp32 scales right after its quant_dim e4m3 bytes; f32 has none (nullptr).
__device__ __forceinline__ const uint8_t* attn_record_scales(const AttnRecord& r, AttnBlockPos bp) {
    switch (r.format) {
        case AttnRecordFormat::fp8_model1:
            return r.base + bp.block * r.block_bytes + r.block_size * r.data_bytes + bp.entry * r.scale_bytes;
        case AttnRecordFormat::fp8_v32: return attn_record_data(r, bp) + r.quant_dim;
        default: return nullptr;
    }
}

// Value i of an entry whose data and scales start at `data` / `scales` (load_record's arithmetic: the e4m3
// value times its group's scale, one fp32 rounding; the bf16 tail widened exactly).
//   fp8_model1: one UE8M0 byte per tile of kFp8Model1Tile = 64 values (cache_record.h, deepseek_v4.md §4.1)
//   fp8_v32:    one fp32 scale per group of g = min(128, quant_dim) values, and quant_dim % g = 0; so either
//               quant_dim < 128 (one group: i / 128 = 0 = i / g for every i < quant_dim) or g = 128: the
//               group of value i is i / kFp8V32Group in both cases (dsa_mla.md §3.4)
__device__ __forceinline__ float attn_record_value(const AttnRecord& r, const uint8_t* data, const uint8_t* scales,
                                                   int i) {
    static_assert(kFp8Model1Tile == 64 && kFp8V32Group == 128, "the group sizes of ops/cache_record.h");
    switch (r.format) {
        case AttnRecordFormat::f32: return load_f32_le(data + 4 * static_cast<int64_t>(i));
        case AttnRecordFormat::fp8_model1:
            if (i < r.quant_dim)
                return __fmul_rn(e4m3_to_f32(static_cast<uint8_t>(load_u8(data + i))),
                                 ue8m0_to_f32(static_cast<uint8_t>(load_u8(scales + i / 64))));
            return load_bf16_le(data + r.tail_offset + 2 * (i - r.quant_dim));
        case AttnRecordFormat::fp8_v32:
            if (i < r.quant_dim)
                return __fmul_rn(e4m3_to_f32(static_cast<uint8_t>(load_u8(data + i))), load_f32_le(scales + 4 * (i / 128)));
            return load_bf16_le(data + r.tail_offset + 2 * (i - r.quant_dim));
    }
    return 0.0f;
}

}  // namespace sieve::cuda::attn
