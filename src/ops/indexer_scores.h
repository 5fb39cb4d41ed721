// ops/indexer_scores.h — the Lightning Indexer's scores of each token over its request's
// compressed indexer keys (deepseek_v4.md §3.6; exact profile §3.6 "exact profile, general sizes"),
// and optionally the top-k selection over them in the same pass (ops/topk.h semantics, valid_len =
// n_keys), so that no full score row needs to be written (performance_facts.md §5: "a fused
// threshold-filter top-k so no [L] fp32 logits are materialized").
//
// Token t scores the keys of list token_list[t] (one list per request: its indexer-key slots in
// entry order). For candidate j < n_keys[t] (the causal ones, j < ⌊(p_t + 1)/4⌋, chosen by the caller):
//   K_j         = the fp32 key of slot key_slots[list, j] (ops/kv_load.h: f32 rows, or fp8_row_scale
//                 e4m3 · scale)
//   w[t, h]     = fl32(weights[t, h] · weight_scale)           the head weight, rounded once in fp32
//   score[t, j] = Σ_h w[t, h] · max(0, <q[t, h], K_j>)          fp32 (ref: double), any order
// with weights the caller's head weights (weights_proj(x)) and weight_scale = c_I^-0.5 · H_I^-0.5 (§3.6;
// no softmax, no sigmoid: a ReLU per head and a weighted sum). A key slot of −1 scores −inf (never
// selected before a real candidate). Columns j ≥ n_keys[t] are not written.
// q rows of bf16 are widened exactly.
//
// Fused selection: when `selected` is set, row t of it receives the top-k of token t's candidates
// j < n_keys[t] by score[t, j], exactly as ops/topk.h selects them over this backend's scores
// (highest first, ties to the lower index, NaN last; picks ascending, then −1 up to width k). Then
// `scores` may be nullptr (nothing is written there); when both are set, both are written.
#pragma once

#include <cstdint>

#include "core/dtype.h"
#include "core/status.h"
#include "ops/cache_view.h"
#include "ops/cache_record.h"

namespace sieve {

struct IndexerScoresParams {
    const void* q = nullptr;             // [n_tokens, n_heads, head_dim], q_type; (t, h, i) at t·q_token_stride + h·q_head_stride + i
    const float* weights = nullptr;      // [n_tokens, n_heads], row t at weights + t·weights_row_stride
    CacheView keys;                      // indexer key cache, format key_format (f32 | fp8_row_scale)
    CacheRecordFormat key_format = CacheRecordFormat::f32;
    const int32_t* key_slots = nullptr;  // [n_lists, max_keys], list l at key_slots + l·key_slots_stride; −1 = missing
    const int32_t* token_list = nullptr; // [n_tokens] list index of each token, in [0, n_lists)
    const int32_t* n_keys = nullptr;     // [n_tokens] candidates per token, in [0, max_keys]
    float* scores = nullptr;             // [n_tokens, max_keys], row t at scores + t·scores_row_stride
    int64_t n_tokens = 0, n_heads = 0, head_dim = 0;
    int64_t n_lists = 0, max_keys = 0;
    int64_t key_slots_stride = 0;        // elements, ≥ max_keys when n_lists > 1
    int64_t q_token_stride = 0, q_head_stride = 0;
    int64_t weights_row_stride = 0;      // elements, ≥ 0
    int64_t scores_row_stride = 0;       // elements, ≥ max_keys when n_tokens > 1
    DType q_type = DType::f32;           // f32 | bf16
    float weight_scale = 1.0f;           // finite
    int32_t* selected = nullptr;         // [n_tokens, k] or nullptr (no fused selection)
    int64_t k = 0;                       // ≥ 1 when selected is set
    int64_t selected_row_stride = 0;     // elements, ≥ k when n_tokens > 1

    CacheRecordLayout key_layout() const { return {key_format, head_dim, 0}; }
};

// Shapes, dtypes, strides, key cache geometry, scores and selected disjoint from every input.
// validate never reads memory behind the pointers; check_indices reads index arrays and may only be
// called on host-readable memory (ops/op_common.h).
Status validate(const IndexerScoresParams& p);
// token_list / n_keys ranges and every key slot ≥ −1 (reads token_list, n_keys and the key lists).
Status check_indices(const IndexerScoresParams& p);

}  // namespace sieve
