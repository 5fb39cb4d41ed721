// The cpu backend's kernel table for DeepSeek-V4's sparse attention (ops/sparse_attention.h's MQA path):
// one instance per ISA level (dsv4_kernels_<isa>.cpp), picked by the backend. The dispatch code
// (cpu_sparse_attention.cpp) validates, fills these plain argument structs and splits the work over
// threads; kernels see no op params, no inline helpers of other headers (see simd.h, "ODR safety").
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

// A paged cache as the kernels read it (ops/cache_record.h layouts, precomputed by the dispatch code).
struct RecordCache {
    const uint8_t* base = nullptr;
    int64_t block_bytes = 0, block_size = 0;
    int32_t format = kRecordF32;   // kRecordF32 | kRecordFp8Model1
    int64_t dim = 0, nope = 0;     // nope: the e4m3 dims of fp8_model1 (dim − rope_dim)
    int64_t data_bytes = 0;        // per entry, inside the block's data region
    int64_t scale_bytes = 0;       // per entry, inside the block's scale region
    int64_t scales_offset = 0;     // block_size · data_bytes: where a block's scale region starts
};

// The MQA path of ops/sparse_attention.h (v_dim = qk_dim = head_dim: K = V), set by the dispatch code
// (cpu_sparse_attention.cpp).
struct SparseMqaKernelArgs {
    const void* q = nullptr;       // [n_tokens, n_heads, head_dim]
    bool q_bf16 = false;
    bool p_bf16 = false;           // AttentionMath::bf16: the P·V weights rounded to bf16 (ops/sparse_attention.h)
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
    // (C = kSparseMqaChunk, nh16 = nh rounded up to 16): the widened q rows ws_q [nh, head_dim], the chunk's
    // dequantized rows ws_kc [C, head_dim] and their transpose ws_kt [head_dim, C], the logits then weights
    // ws_lg [nh, C], the accumulators ws_acc [nh16, head_dim], the running max ws_mx [nh16] and denominator
    // ws_den [nh16]; all f32.
    int64_t ws_q = 0, ws_kc = 0, ws_kt = 0, ws_lg = 0, ws_acc = 0, ws_mx = 0, ws_den = 0;
    // A table with tiles (CpuDsv4Kernels::tiles) also gets the tile path's parts (tile_workspace = true; CT =
    // kSparseMqaTileChunk): q as bf16 pairs ws_qt [nh16/16][head_dim/2][16] (u32), the chunk's bf16 rows ws_kb
    // [CT, head_dim] and their pair-interleaved copy ws_kv [CT/2][head_dim][2] (u16), transposed logits then
    // weights ws_lt [CT][16] and their transpose ws_pt [16][CT] (f32), the bf16 weights ws_pb [16][CT] (u16).
    bool tile_workspace = false;
    int64_t ws_qt = 0, ws_kb = 0, ws_kv = 0, ws_lt = 0, ws_pt = 0, ws_pb = 0;
};

// Rows gathered, dequantized and transposed per chunk of sparse_mqa_block (online softmax over chunks,
// the structure of the DSA sparse MLA kernel): a multiple of 2 × 16 lanes (the logits tile's width).
inline constexpr int64_t kSparseMqaChunk = 64;
// Rows per chunk of the tile path (SparseMqaKernelArgs::tile_workspace): a multiple of 32 (one weight tile);
// large, so that the accumulator tiles are loaded and stored once per 256 rows.
inline constexpr int64_t kSparseMqaTileChunk = 256;
// Heads per register tile of sparse_mqa_block (attention_kernels_impl.inl kAttnHeadBlock): the dispatch code
// splits a token's heads at multiples of it.
inline constexpr int64_t kSparseMqaHeadBlock = 4;

// A share of one token's attention: heads [head_begin, head_end) (at most the nh the workspace was sized for)
// over the listed rows [row_begin, row_end) of the main list followed by the extra list. A share of every
// row writes the token's output; a share of a split of the rows (split-K: `partial` set) writes its
// online-softmax state to partial instead, SIEVE_MQA_PARTIAL_FLOATS(heads) floats: the accumulators
// [heads, head_dim], the running max [heads] and denominator [heads], then the count of valid rows. The sink
// belongs to the split that starts at row 0.
struct MqaShare {
    int64_t token = 0, head_begin = 0, head_end = 0, row_begin = 0, row_end = 0;
    float* partial = nullptr;
};
#define SIEVE_MQA_PARTIAL_FLOATS(heads, head_dim) ((heads) * (head_dim) + 2 * (heads) + 1)

struct CpuDsv4Kernels {
    const char* isa_name;
    bool tiles;  // sparse_mqa_block has the tile path (AMX, or register tiles at avx512_bf16) and its workspace parts
    // One share of a token's attention; ws: the workspace described in the args, 64-aligned.
    void (*sparse_mqa_block)(const SparseMqaKernelArgs& a, const MqaShare& share, void* ws);
    // The output of token `token`, heads [head_begin, head_end), from the partial states of its n_splits row
    // splits (partials[s] as sparse_mqa_block wrote them, s in row order): the sums rescaled to their common
    // max, added (into partials[0]), and divided once.
    void (*merge_mqa_partials)(const SparseMqaKernelArgs& a, int64_t token, int64_t head_begin, int64_t head_end,
                               float* const* partials, int64_t n_splits);
};

extern const CpuDsv4Kernels kCpuDsv4KernelsScalar;
extern const CpuDsv4Kernels kCpuDsv4KernelsAvx2;
extern const CpuDsv4Kernels kCpuDsv4KernelsAvx512;
extern const CpuDsv4Kernels kCpuDsv4KernelsAvx512Bf16;
extern const CpuDsv4Kernels kCpuDsv4KernelsAmxBf16;

}  // namespace sieve::cpu
