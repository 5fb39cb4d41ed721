// The cpu backend's kernel table for DeepSeek-V4's hot ops (ops/sparse_mqa.h,
// ops/indexer_scores.h): one instance per ISA level (dsv4_kernels_<isa>.cpp), picked by the
// backend. The dispatch code (cpu_dsv4_ops.cpp) validates, fills these plain argument structs and
// splits the work over threads; kernels see no op params, no inline helpers of other headers
// (see simd.h, "ODR safety").
//
// Included by the per-ISA translation units: plain data types and declarations only.
#pragma once

#include <cstddef>
#include <cstdint>

namespace sieve::cpu {

// A paged cache as the kernels read it (ops/kv_record.h layouts, precomputed).
struct RecordCache {
    const uint8_t* base = nullptr;
    int64_t block_bytes = 0, block_size = 0;
    int32_t format = 0;            // 0 f32 rows, 1 fp8_ds_mla, 2 fp8_scaled (KvRecordFormat order)
    int64_t dim = 0, nope = 0;     // nope: fp8 dims of an fp8_ds_mla record (dim − rope_dim)
    int64_t data_bytes = 0;        // per entry, inside the block's data region
    int64_t scale_bytes = 0;       // per entry, inside the block's scale region
    int64_t scales_offset = 0;     // block_size · data_bytes: where a block's scale region starts
};

struct SparseMqaKernelArgs {
    const void* q = nullptr;       // [n_tokens, n_heads, head_dim]
    bool q_bf16 = false;
    int64_t q_token_stride = 0, q_head_stride = 0;
    RecordCache window, compressed;
    const int32_t* window_slots = nullptr;
    int64_t n_window = 0, window_stride = 0;
    const int32_t* compressed_slots = nullptr;
    int64_t n_compressed = 0, compressed_stride = 0;
    const float* sink = nullptr;   // [n_heads] or nullptr
    float scale = 1.0f;
    void* out = nullptr;           // [n_tokens, n_heads, head_dim]
    bool out_bf16 = false;
    int64_t out_token_stride = 0, out_head_stride = 0;
    int64_t n_heads = 0, head_dim = 0;
    // Workspace of one sparse_mqa_block call, byte offsets set by the dispatch code: row pointers
    // [n_window + n_compressed] at 0, then the dequantized rows [n_listed, head_dim] f32, the logits
    // [n_listed] f32, the widened q row [head_dim] f32 and the accumulator [head_dim] f32.
    int64_t ws_rows = 0, ws_logits = 0, ws_q = 0, ws_acc = 0;
};

struct IndexerScoresKernelArgs {
    const void* q = nullptr;       // [n_tokens, n_heads, head_dim]
    bool q_bf16 = false;
    int64_t q_token_stride = 0, q_head_stride = 0;
    const float* weights = nullptr;  // [n_tokens, n_heads]
    int64_t weights_row_stride = 0;
    RecordCache keys;
    const int32_t* key_slots = nullptr;
    int64_t key_slots_stride = 0;
    const int32_t* token_list = nullptr;
    const int32_t* n_keys = nullptr;
    float* scores = nullptr;
    int64_t scores_row_stride = 0;
    int64_t n_heads = 0, head_dim = 0;
    // Workspace of one indexer_scores_rows call, byte offsets set by the dispatch code: the token's
    // widened q rows [n_heads, head_dim] f32 at 0, one dequantized key [head_dim] f32 at ws_key.
    int64_t ws_key = 0;
};

struct CpuDsv4Kernels {
    const char* isa_name;
    // Token `token`, heads [head_begin, head_end); ws: the workspace described in the args, 64-aligned.
    void (*sparse_mqa_block)(const SparseMqaKernelArgs& a, int64_t token, int64_t head_begin, int64_t head_end,
                             void* ws);
    // Tokens [token_begin, token_end); ws: the workspace described in the args, 64-aligned.
    void (*indexer_scores_rows)(const IndexerScoresKernelArgs& a, int64_t token_begin, int64_t token_end, void* ws);
};

extern const CpuDsv4Kernels kCpuDsv4KernelsScalar;
extern const CpuDsv4Kernels kCpuDsv4KernelsAvx2;
extern const CpuDsv4Kernels kCpuDsv4KernelsAvx512;

}  // namespace sieve::cpu
