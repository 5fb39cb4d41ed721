// ops/dsa_indexer.h — the index scores of DSA-on-MLA layers' Lightning Indexer over its key cache
// (specs/dsa_mla.md §2.6, §2.7, §3.3, §4.2; DeepSeek-V3.2 and Tencent Hy4).
//
// Key cache entry of one token: the indexer key kI (head_dim = Di values, after k_norm and RoPE, and
// the Hadamard rotation where the profile uses it), in the format f32 (plain rows, the `exact` profile)
// or fp8_row_scale (vLLM / DeepGEMM's per-block layout with one fp32 scale per key, §3.3; Di ≤ 128) of
// ops/cache_record.h; written by ops/cache_store.h (no bf16 rounding before the quantization:
// round_bf16 = false).
//
// Scores (dsa_indexer_scores), for query row t of sequence s = token_seq[t] and candidate key u in
// [0, n_keys[t]) (request-local positions: candidates 0..p_t, §2.7), the key of u read at slot
// block_table[s, u / B] · B + u % B:
//   f32 q and keys:  I[t, u] = Σ_j (weights[t, j] · weight_scale) · max(⟨q[t, j], k_u⟩, 0)
//   fp8 q and keys:  I[t, u] = k_scale_u · Σ_j (weights[t, j] · weight_scale · q_scale[t, j])
//                                           · max(Σ_d e4m3(q8[t, j, d]) · e4m3(k8_u[d]), 0)
//                    (DeepGEMM fp8_mqa_logits / DS-ref fp8_index: q scale folded into the head weight, key
//                    scale applied to the head sum, §2.6 "FP8 execution")
// fp32 products and sums in an unspecified order. weight_scale carries Hi^-0.5 · Di^-0.5 (§2.6: positive
// factors common to a row leave the top-k unchanged). scores[t, u] for u in [n_keys[t], n_cols) is −inf.
// The top-k over these rows is ops/topk.h with valid_len = n_keys.
//
// Fused selection: when `selected` is set, row t of it receives the top-k of row t's candidates
// u < n_keys[t] exactly as ops/topk.h selects them over this backend's scores (ascending, then −1 up to
// width k), and `scores` may be nullptr: no score row needs to be written (a 128K-token context would
// otherwise write 512 KiB per query row). When both are set, both are written.
#pragma once

#include <cstdint>

#include "core/dtype.h"
#include "core/status.h"
#include "ops/cache_record.h"
#include "ops/cache_view.h"

namespace sieve {

struct DsaIndexerScoresParams {
    const void* q = nullptr;           // [n_tokens, n_heads, head_dim], q_type; (t, j, d) at
                                       //   t·q_token_stride + j·q_head_stride + d
    const float* q_scale = nullptr;    // [n_tokens, n_heads] fp8 q only (else nullptr); (t, j) at
                                       //   t·q_scale_token_stride + j
    const float* weights = nullptr;    // [n_tokens, n_heads] head weights x·W_iwᵀ; (t, j) at t·weights_token_stride + j
    float weight_scale = 1.0f;         // Hi^-0.5 · Di^-0.5 (finite, > 0)
    CacheView keys;                    // the layer's indexer key cache
    int64_t n_slots = 0;               // slots in the cache (num_blocks · block_size)
    const int32_t* block_table = nullptr;  // [n_seqs, block_table_stride] physical block per logical block, −1 = none
    int64_t n_seqs = 0, block_table_stride = 0;
    const int32_t* token_seq = nullptr;    // [n_tokens] the sequence of each query row, in [0, n_seqs)
    const int32_t* n_keys = nullptr;       // [n_tokens] candidates per row, in [0, n_cols]; their blocks resident
    float* scores = nullptr;               // [n_tokens, n_cols]; row t at scores + t·scores_row_stride
    int64_t n_tokens = 0, n_heads = 0, head_dim = 0, n_cols = 0;
    int64_t q_token_stride = 0, q_head_stride = 0, q_scale_token_stride = 0, weights_token_stride = 0;
    int64_t scores_row_stride = 0;
    CacheRecordFormat format = CacheRecordFormat::f32;  // f32 keys need q_type f32; fp8_row_scale f8_e4m3
    DType q_type = DType::f32;
    int32_t* selected = nullptr;           // [n_tokens, k] or nullptr (no fused selection)
    int64_t k = 0;                         // ≥ 1 when selected is set
    int64_t selected_row_stride = 0;       // elements, ≥ k when n_tokens > 1

    CacheRecordLayout key_layout() const { return {format, head_dim, 0}; }
};

// Geometry, strides, dtypes matching the format, scores and selected disjoint from the inputs.
// validate never reads memory behind the pointers; check_indices reads index arrays and may only be
// called on host-readable memory (ops/op_common.h).
Status validate(const DsaIndexerScoresParams& p);
// Every n_keys[t] in [0, n_cols], token_seq[t] in [0, n_seqs) for rows with keys and, when some row has
// keys, the block table present, the key cache view consistent and every row's candidate blocks resident
// and inside the cache (reads token_seq, n_keys and the block table entries the rows need).
Status check_indices(const DsaIndexerScoresParams& p);

}  // namespace sieve
