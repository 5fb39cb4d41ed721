// The Lightning Indexer's kernel arguments and the per-head rules of ops/indexer_scores.h in device code,
// shared by its kernels (selection_kernels.cu: fp32 CUDA cores, any format; indexer_scores_mma.cu and
// indexer_scores_wgmma.cu: tensor cores for bf16 / e4m3 operands).
#pragma once

#include <cstdint>

#include <cuda_bf16.h>

#include "backends/cuda/fp8.cuh"
#include "backends/cuda/selection_key_cache.cuh"

namespace sieve::cuda {

enum IndexerQFormat : int32_t { kIndexerQF32 = 0, kIndexerQBf16 = 1, kIndexerQE4m3 = 2 };

struct ScoresArgs {
    const void* q = nullptr;  // [n_tokens, n_heads, head_dim]
    int32_t q_format = kIndexerQF32;
    const float* q_scale = nullptr;  // [n_tokens, n_heads], e4m3 q only
    const float* weights = nullptr;  // [n_tokens, n_heads] or nullptr
    float weight_scale = 1.0f;
    IndexerKeyCache keys;
    const int32_t* block_table = nullptr;    // [n_requests, block_table_stride]
    const int32_t* token_request = nullptr;  // [n_tokens]
    int64_t n_requests = 0, block_table_stride = 0;
    const int32_t* n_keys = nullptr;  // [n_tokens]
    float* out = nullptr;             // [n_tokens, n_cols], row t at out + t·out_row_stride
    int64_t out_row_stride = 0;
    int64_t n_tokens = 0, n_heads = 0, head_dim = 0, n_cols = 0;
    int64_t q_token_stride = 0, q_head_stride = 0, q_scale_token_stride = 0, weights_token_stride = 0;
    // False when q (or q_scale for e4m3 q) is absent or the key cache view is not a valid view of n_slots
    // slots (validate() does not look at the view; check_indices would refuse any candidate then): every
    // candidate scores NaN and neither q nor the cache is read.
    bool inputs_ok = false;
};

// Marks in the per-key location array: no candidate (j ≥ n_keys[t]: nothing written) and a candidate
// whose key cannot be located safely (its token's request row out of [0, n_requests), its block past
// the table row, released (id < 0) or past the cache's n_slots, or inputs_ok false: scored NaN, the
// sentinel a downstream top-k ranks last; check_indices refuses all of these on host backends).
constexpr int64_t kNoCandidate = -1;
constexpr int64_t kUnlocatable = -2;

__device__ __forceinline__ float indexer_q_value(const ScoresArgs& a, int64_t i) {
    if (a.q_format == kIndexerQE4m3) return e4m3_to_f32(static_cast<const uint8_t*>(a.q)[i]);
    if (a.q_format == kIndexerQBf16) return __bfloat162float(static_cast<const __nv_bfloat16*>(a.q)[i]);
    return static_cast<const float*>(a.q)[i];
}

// w[t, h] of the contract: fl32(weights[t, h] · weight_scale) (weight_scale alone without weights), then
// for e4m3 q fl32(w · q_scale[t, h]) (DeepGEMM fp8_mqa_logits, dsa_mla.md §2.6 "FP8 execution"). Each
// product is rounded on its own (__fmul_rn: never contracted into a later FMA), so weights pre-scaled
// by the caller in fp32 with weight_scale 1 give the same bits.
__device__ __forceinline__ float indexer_head_weight(const ScoresArgs& a, int64_t t, int64_t h) {
    float w = a.weights != nullptr ? __fmul_rn(a.weights[t * a.weights_token_stride + h], a.weight_scale) : a.weight_scale;
    if (a.q_format == kIndexerQE4m3) w = __fmul_rn(w, a.q_scale[t * a.q_scale_token_stride + h]);
    return w;
}

// Where candidate j of a token reads its key: the byte offset of its values, kNoCandidate (j ≥ n, the
// token's clamped n_keys: nothing is written) or kUnlocatable (see above). `row` is the token's block-table
// row, read only when req_ok (its request row in [0, n_requests) and inputs_ok).
__device__ __forceinline__ int64_t indexer_key_location(const ScoresArgs& a, const int32_t* row, bool req_ok, int64_t j,
                                                        int64_t n) {
    if (j >= n) return kNoCandidate;
    if (!req_ok) return kUnlocatable;
    const int64_t b = j / a.keys.block_size;  // paged_slot (ops/block_tables.h)
    if (b >= a.block_table_stride) return kUnlocatable;
    const int64_t id = row[b];
    if (id < 0 || id >= a.keys.n_blocks) return kUnlocatable;
    return indexer_key_data_offset(a.keys, id, j - b * a.keys.block_size);
}

// indexer_key_location in two steps and with 32-bit index math, for a kernel that reads the block table
// one step before it needs the key: indexer_key_lookup reads candidate j's table entry (or marks it),
// indexer_key_lookup_location turns that into the offset or mark indexer_key_location gives. 32 bits
// are exact here: j < n ≤ INT32_MAX (n_keys is int32; j itself may reach n + 127 < 2^32 in a last
// tile), and a block size clamped to 2^31 gives the same block b = j / block_size (0 for any larger
// block) and entry j − b·block_size.
struct IndexerKeyLookup {
    int32_t mark = static_cast<int32_t>(kNoCandidate);  // kNoCandidate, kUnlocatable, or 0: `id`, `entry` read
    int32_t id = 0;                                     // the table's block id (not yet checked)
    uint32_t entry = 0;                                 // entry within the block
};
// j / block_size in 32 bits: a shift for the usual power-of-two block sizes, else a division.
struct IndexerBlockDivisor {
    uint32_t size = 1;
    int shift = -1;  // log2(size) when size is a power of two
    __device__ __forceinline__ uint32_t block_of(uint32_t j) const { return shift >= 0 ? j >> shift : j / size; }
};
__device__ __forceinline__ IndexerBlockDivisor indexer_block_divisor(const IndexerKeyCache& c) {
    IndexerBlockDivisor d;
    d.size = c.block_size >= (int64_t{1} << 31) ? 0x80000000u : static_cast<uint32_t>(c.block_size);
    if ((d.size & (d.size - 1u)) == 0u) d.shift = __ffs(static_cast<int>(d.size)) - 1;
    return d;
}
__device__ __forceinline__ IndexerKeyLookup indexer_key_lookup(const ScoresArgs& a, const int32_t* row, bool req_ok, uint32_t j,
                                                               uint32_t n, const IndexerBlockDivisor& block) {
    IndexerKeyLookup k;
    if (j >= n) return k;
    k.mark = static_cast<int32_t>(kUnlocatable);
    if (!req_ok) return k;
    const uint32_t b = block.block_of(j);  // paged_slot (ops/block_tables.h)
    if (static_cast<int64_t>(b) >= a.block_table_stride) return k;
    k.mark = 0;
    k.id = __ldg(row + b);
    k.entry = j - b * block.size;
    return k;
}
__device__ __forceinline__ int64_t indexer_key_lookup_location(const ScoresArgs& a, const IndexerKeyLookup& k) {
    if (k.mark != 0) return k.mark;
    if (k.id < 0 || k.id >= a.keys.n_blocks) return kUnlocatable;
    return indexer_key_data_offset(a.keys, k.id, k.entry);
}

// s_j of candidate j < n whose key was located: the fp32 row scale for fp8_row_scale keys (deepseek_v4.md
// §4.3, dsa_mla.md §3.3), else 1.
__device__ __forceinline__ float indexer_key_scale_of(const ScoresArgs& a, const int32_t* row, int64_t j) {
    if (a.keys.format != kIndexerKeyFp8RowScale) return 1.0f;
    const int64_t b = j / a.keys.block_size;
    return indexer_key_scale(a.keys, row[b], j - b * a.keys.block_size);
}

}  // namespace sieve::cuda
