// The cpu backend's indexer-scores kernel table (ops/indexer_scores.h): one instance per ISA level
// (indexer_kernels_<isa>.cpp over indexer_kernels_impl.inl), picked with the backend's ISA. The
// dispatch code (cpu_indexer_scores.cpp) validates, fills the plain argument struct below and splits
// the work over threads; kernels see no op params and no inline helpers of other headers (simd.h,
// "ODR safety").
//
// Included by the per-ISA translation units: plain data types and declarations only.
#pragma once

#include <cstdint>

namespace sieve::cpu {

// q and key element formats as the kernels read them (set from the op's DType / CacheRecordFormat).
inline constexpr int32_t kIdxQF32 = 0, kIdxQBf16 = 1, kIdxQE4m3 = 2;
inline constexpr int32_t kIdxKeyF32 = 0, kIdxKeyBf16 = 1, kIdxKeyFp8RowScale = 2;

// How a unit's dots are laid over the vector lanes, chosen by the dispatch code from the shape:
//   heads_in_lanes  q transposed to qᵀ [dim, heads] per token, one broadcast key value per dim against
//                   vectors of heads: no horizontal sums, for the many-head indexers (V4, DSA: 64 heads);
//                   every q and key format, vdpbf16ps on e4m3 / bf16 q with fp8 keys at avx512_bf16.
//   dims_in_lanes   one dot per (head, key) along the dims: for few heads (QSA: 4), where padding heads to
//                   the lanes would waste most of them; f32 / bf16 q and keys only. At avx512_bf16 a unit
//                   with bf16 q and keys and tokens enough to fill 16 (token, head) accumulators puts keys
//                   in the lanes instead (keys_in_lanes, indexer_kernels_impl.inl).
inline constexpr int32_t kIdxHeadsInLanes = 0, kIdxDimsInLanes = 1;

struct IndexerKernelArgs {
    int32_t layout = kIdxHeadsInLanes;
    const void* q = nullptr;            // [n_tokens, n_heads, head_dim]
    int32_t q_format = kIdxQF32;
    int64_t q_token_stride = 0, q_head_stride = 0;  // elements
    const float* q_scale = nullptr;     // [n_tokens, n_heads] e4m3 q only
    int64_t q_scale_token_stride = 0;
    const float* weights = nullptr;     // [n_tokens, n_heads] or nullptr: every head weight is weight_scale
    int64_t weights_token_stride = 0;
    float weight_scale = 1.0f;
    // The key cache (ops/cache_record.h layouts, precomputed by the dispatch code) and its block tables.
    const uint8_t* keys = nullptr;
    int64_t key_block_bytes = 0, key_block_size = 0;
    int32_t key_format = kIdxKeyF32;
    int64_t key_data_bytes = 0;         // per entry in the block's data part (the whole row for f32 / bf16)
    int64_t key_scales_offset = 0;      // fp8_row_scale: where a block's scales start (block_size · data_bytes)
    const int32_t* block_table = nullptr;  // [n_requests, block_table_stride]
    int64_t block_table_stride = 0;
    const int32_t* n_keys = nullptr;    // [n_tokens]
    float* scores = nullptr;            // [n_tokens, scores_row_stride]
    int64_t scores_row_stride = 0;
    // false: token t's score of key j goes to scores[t·stride + j]. true (fused selection, set per unit by the
    // dispatch code): to scores[i·stride + j − key_begin], i = the token's position in the unit's token list.
    bool scores_tile_rows = false;
    int64_t n_heads = 0, head_dim = 0;
    // vdpbf16ps (heads_in_lanes, avx512_bf16 table only; set by the dispatch code when the table has it, q
    // is bf16 or e4m3 and the keys are fp8: every product is exact in bf16, ops/indexer_scores.h).
    bool bf16_dot = false;
    // Workspace of one scores_tile call (a slot), byte offsets set by the dispatch code for key tiles of at
    // most key_tile keys, heads padded to heads_pad (a multiple of 16) and dims to dim_pad (a multiple of 16
    // above head_dim):
    //   ws_qt    the token's q, transposed: [dim_pad, heads_pad] f32, or [dim_pad/2, heads_pad] bf16 pairs
    //            (dims_in_lanes: the token's q widened, [n_heads, head_dim] f32; keys_in_lanes: a token
    //            group's q pairs, [dim_pad/2, 16])
    //   ws_w     the token's head weights [heads_pad] f32 (zeros past n_heads; keys_in_lanes: the group's)
    //   ws_tile  the tile's keys converted once: [key_tile, dim_pad] f32, or [key_tile, dim_pad/2] bf16 pairs
    //            (keys_in_lanes: transposed, [key_tile/16][dim_pad/2][16] bf16 pairs)
    //   ws_rows  [key_tile] pointers to each key's row (ws_tile, or the cache itself for f32 keys)
    //   ws_scale [key_tile] f32 key scales
    //   ws_zero  [dim_pad] f32 zeros (the rows of a partial register block)
    //   ws_tag   int64: the token whose q and weights are in the slot, −1 = none (set by the dispatch code
    //            when a thread claims the slot; they are then reused across the tiles of a decode token)
    int64_t key_tile = 0, heads_pad = 0, dim_pad = 0;
    int64_t ws_qt = 0, ws_w = 0, ws_tile = 0, ws_rows = 0, ws_scale = 0, ws_zero = 0, ws_tag = 0;
};

// Keys per work unit: at most this many (q is transposed once per token and unit, ≤ 3 % of the dots);
// the dispatch code picks smaller tiles for short contexts.
inline constexpr int64_t kIdxMaxKeyTile = 512;

struct CpuIndexerKernels {
    const char* isa_name;
    // Scores of keys [key_begin, key_end) (≤ key_tile keys) of request row `row` for the tokens
    // tokens[0 .. n_tokens) of that row: each key is converted from its storage format once, then scored
    // for every token (columns past a token's n_keys are not written). ws: the workspace slot described in
    // the args, 64-aligned.
    void (*scores_tile)(const IndexerKernelArgs& a, int64_t row, const int32_t* tokens, int64_t n_tokens,
                        int64_t key_begin, int64_t key_end, void* ws);
    bool bf16_dot;  // the table can use vdpbf16ps (IndexerKernelArgs::bf16_dot)
};

extern const CpuIndexerKernels kCpuIndexerKernelsScalar;
extern const CpuIndexerKernels kCpuIndexerKernelsAvx2;
extern const CpuIndexerKernels kCpuIndexerKernelsAvx512;
extern const CpuIndexerKernels kCpuIndexerKernelsAvx512Bf16;
extern const CpuIndexerKernels kCpuIndexerKernelsAmxBf16;

}  // namespace sieve::cpu
