// The cpu backend's kernel table for DeepSeek-V4's hot ops (ops/sparse_attention.h's MQA path,
// ops/indexer_scores.h): one instance per ISA level (dsv4_kernels_<isa>.cpp), picked by the
// backend. The dispatch code (cpu_sparse_attention.cpp, cpu_dsv4_ops.cpp) validates, fills these plain
// argument structs and splits the work over threads; kernels see no op params, no inline helpers of other
// headers (see simd.h, "ODR safety").
//
// Included by the per-ISA translation units: plain data types and declarations only.
#pragma once

#include <cstddef>
#include <cstdint>

namespace sieve::cpu {

// The record formats these kernels read (RecordCache::format), set from ops/cache_record.h's
// CacheRecordFormat by the dispatch code (cpu_dsv4_ops.cpp record_cache).
inline constexpr int32_t kRecordF32 = 0;         // CacheRecordFormat::f32
inline constexpr int32_t kRecordFp8Model1 = 1;   // CacheRecordFormat::fp8_model1
inline constexpr int32_t kRecordFp8RowScale = 2; // CacheRecordFormat::fp8_row_scale

// A paged cache as the kernels read it (ops/cache_record.h layouts, precomputed by the dispatch code).
struct RecordCache {
    const uint8_t* base = nullptr;
    int64_t block_bytes = 0, block_size = 0;
    int32_t format = kRecordF32;   // kRecordF32 | kRecordFp8Model1 | kRecordFp8RowScale
    int64_t dim = 0, nope = 0;     // nope: the e4m3 dims (dim − rope_dim for fp8_model1, dim for fp8_row_scale)
    int64_t data_bytes = 0;        // per entry, inside the block's data region
    int64_t scale_bytes = 0;       // per entry, inside the block's scale region
    int64_t scales_offset = 0;     // block_size · data_bytes: where a block's scale region starts
};

// The MQA path of ops/sparse_attention.h (v_dim = qk_dim = head_dim: K = V), set by the dispatch code
// (cpu_sparse_attention.cpp).
struct SparseMqaKernelArgs {
    const void* q = nullptr;       // [n_tokens, n_heads, head_dim]
    bool q_bf16 = false;
    int64_t q_token_stride = 0, q_head_stride = 0;
    RecordCache main, extra;
    const int32_t* main_slots = nullptr;   // [n_tokens, n_main], row stride main_stride
    int64_t n_main = 0, main_stride = 0;
    const int32_t* extra_slots = nullptr;  // [n_tokens, n_extra], row stride extra_stride; n_extra = 0: none
    int64_t n_extra = 0, extra_stride = 0;
    const float* sink = nullptr;   // [n_heads] or nullptr
    float scale = 1.0f;
    void* out = nullptr;           // [n_tokens, n_heads, head_dim]
    bool out_bf16 = false;
    int64_t out_token_stride = 0, out_head_stride = 0;
    int64_t n_heads = 0, head_dim = 0;
    // Workspace of one sparse_mqa_block call for up to nh heads, byte offsets set by the dispatch code
    // (C = kSparseMqaChunk): the widened q rows ws_q [nh, head_dim], the chunk's dequantized rows ws_kc
    // [C, head_dim] and their transpose ws_kt [head_dim, C], the logits then weights ws_lg [nh, C], the
    // accumulators ws_acc [nh, head_dim], the running max ws_mx [nh] and denominator ws_den [nh]; all f32.
    int64_t ws_q = 0, ws_kc = 0, ws_kt = 0, ws_lg = 0, ws_acc = 0, ws_mx = 0, ws_den = 0;
};

// Rows gathered, dequantized and transposed per chunk of sparse_mqa_block (online softmax over chunks,
// the structure of the DSA sparse MLA kernel): a multiple of 2 × 16 lanes (the logits tile's width).
inline constexpr int64_t kSparseMqaChunk = 64;
// Heads per register tile of sparse_mqa_block (attention_kernels_impl.inl kAttnHeadBlock): the dispatch code
// splits a token's heads at multiples of it.
inline constexpr int64_t kSparseMqaHeadBlock = 4;

struct IndexerScoresKernelArgs {
    const void* q = nullptr;       // [n_tokens, n_heads, head_dim]
    bool q_bf16 = false;
    int64_t q_token_stride = 0, q_head_stride = 0;
    const float* weights = nullptr;  // [n_tokens, n_heads]
    int64_t weights_row_stride = 0;
    float weight_scale = 1.0f;  // applied to each head weight in fp32 (ops/indexer_scores.h)
    RecordCache keys;
    const int32_t* key_slots = nullptr;  // [n_lists, key_slots_stride]
    int64_t key_slots_stride = 0;
    const int32_t* n_keys = nullptr;     // [n_tokens]
    float* scores = nullptr;             // [n_tokens, scores_row_stride]
    int64_t scores_row_stride = 0;
    // false: token t's score of key j goes to scores[t·stride + j]. true (fused selection, set per unit by the
    // dispatch code): to scores[i·stride + j − key_begin], i = the token's position in the unit's token list.
    bool scores_tile_rows = false;
    int64_t n_heads = 0, head_dim = 0;
    // vdpbf16ps on bf16 q and fp8_row_scale keys (avx512_bf16 table only; set by the dispatch code when the
    // table has bf16_dot, q is bf16 and the keys are fp8: every product is exact, ops/indexer_scores.h).
    bool bf16_dot = false;
    // Workspace of one indexer_scores_tile call (a slot), byte offsets set by the dispatch code for
    // key tiles of at most key_tile keys, heads padded to heads_pad (a multiple of 16) and dims to
    // dim_pad (a multiple of 16):
    //   ws_qt    the token's q, transposed: [dim_pad, heads_pad] f32, or [dim_pad/2, heads_pad] bf16 pairs
    //   ws_w     the token's head weights [heads_pad] f32 (zeros past n_heads)
    //   ws_tile  the tile's keys converted once: [key_tile, dim_pad] f32, or [key_tile, dim_pad/2] bf16 pairs
    //   ws_rows  [key_tile] pointers to each key's row (ws_tile, the cache itself for f32 keys, or ws_zero)
    //   ws_scale [key_tile] f32 key scales; ws_flag [key_tile] int32: 0 plain, 1 slot −1, 2 exact fallback
    //   ws_zero  [dim_pad] f32 zeros; ws_key [dim_pad] f32, one decoded key (fallback)
    //   ws_tag   int64: the token whose qᵀ and weights are in the slot, −1 = none (set by the dispatch code
    //            when a thread claims the slot; qᵀ is then reused across the tiles of a decode token)
    int64_t key_tile = 0, heads_pad = 0, dim_pad = 0;
    int64_t ws_qt = 0, ws_w = 0, ws_tile = 0, ws_rows = 0, ws_scale = 0, ws_flag = 0, ws_zero = 0, ws_key = 0, ws_tag = 0;
};

struct CpuDsv4Kernels {
    const char* isa_name;
    // Token `token`, heads [head_begin, head_end) (at most the nh the workspace was sized for); ws: the
    // workspace described in the args, 64-aligned.
    void (*sparse_mqa_block)(const SparseMqaKernelArgs& a, int64_t token, int64_t head_begin, int64_t head_end,
                             void* ws);
    // Scores of keys [key_begin, key_end) (≤ key_tile keys) of list `list` for the tokens tokens[0 .. n_tokens)
    // of that list: each key is converted from its storage format once, then scored for every token (columns
    // past a token's n_keys are not written). ws: the workspace slot described in the args, 64-aligned.
    void (*indexer_scores_tile)(const IndexerScoresKernelArgs& a, int64_t list, const int32_t* tokens, int64_t n_tokens,
                                int64_t key_begin, int64_t key_end, void* ws);
    bool bf16_dot;  // the table can use vdpbf16ps (IndexerScoresKernelArgs::bf16_dot)
};

extern const CpuDsv4Kernels kCpuDsv4KernelsScalar;
extern const CpuDsv4Kernels kCpuDsv4KernelsAvx2;
extern const CpuDsv4Kernels kCpuDsv4KernelsAvx512;
extern const CpuDsv4Kernels kCpuDsv4KernelsAvx512Bf16;  // defined by dsv4_kernels_avx512.cpp (see there)

}  // namespace sieve::cpu
