// The indexer key cache in device code (private to selection_kernels.cu): the entry addresses of
// ops/cache_record.h for the three formats ops/indexer_scores.h reads (f32, bf16, fp8_row_scale), from
// layout numbers computed on the host. cache_record.h's cache_record_data / cache_record_scales are host
// functions; this struct mirrors them:
//   data of entry e (e = slot % B) of block id  = base + id·block_bytes + e·data_bytes
//   scale of that entry (fp8_row_scale only)    = base + id·block_bytes + B·data_bytes + 4·e
// with data_bytes = CacheRecordLayout::data_bytes() (4·dim, 2·dim, dim) and scales_offset = B·data_bytes
// (CacheRecordLayout::scales_after_block_data(): fp8_row_scale keeps all values of a block, then all of
// its fp32 scales).
#pragma once

#include <cstdint>

#include <cuda_bf16.h>

#include "backends/cuda/fp8.cuh"

namespace sieve::cuda {

enum IndexerKeyFormat : int32_t { kIndexerKeyF32 = 0, kIndexerKeyBf16 = 1, kIndexerKeyFp8RowScale = 2 };

struct IndexerKeyCache {
    const uint8_t* base = nullptr;  // block 0 (device)
    int64_t block_bytes = 0;        // stride between blocks
    int64_t block_size = 0;         // entries per block (B), ≥ 1
    int64_t data_bytes = 0;         // bytes of one entry's values in its block
    int64_t scales_offset = 0;      // fp8_row_scale: B·data_bytes, where the block's fp32 scales start
    int64_t n_blocks = 0;           // blocks of the cache (n_slots / B): a block id ≥ n_blocks is never read
    int32_t format = kIndexerKeyF32;
};

// Byte offset (from base) of the values of entry e of block `id`.
__device__ __forceinline__ int64_t indexer_key_data_offset(const IndexerKeyCache& c, int64_t id, int64_t e) {
    return id * c.block_bytes + e * c.data_bytes;
}

// Value d of the key whose values start at base + data_offset: f32, bf16 widened, or e4m3 (exact).
__device__ __forceinline__ float indexer_key_value(const IndexerKeyCache& c, int64_t data_offset, int64_t d) {
    const uint8_t* p = c.base + data_offset;
    if (c.format == kIndexerKeyFp8RowScale) return e4m3_to_f32(p[d]);
    if (c.format == kIndexerKeyBf16) return __bfloat162float(reinterpret_cast<const __nv_bfloat16*>(p)[d]);
    return reinterpret_cast<const float*>(p)[d];
}

// The fp32 row scale of entry e of block `id` (fp8_row_scale). It sits at B·dim + 4·e in the block,
// which need not be 4-byte aligned when dim is odd: read as four bytes, little endian (the host stores
// it with memcpy).
__device__ __forceinline__ float indexer_key_scale(const IndexerKeyCache& c, int64_t id, int64_t e) {
    const uint8_t* p = c.base + id * c.block_bytes + c.scales_offset + 4 * e;
    const uint32_t bits = static_cast<uint32_t>(p[0]) | (static_cast<uint32_t>(p[1]) << 8) |
                          (static_cast<uint32_t>(p[2]) << 16) | (static_cast<uint32_t>(p[3]) << 24);
    return __uint_as_float(bits);
}

}  // namespace sieve::cuda
