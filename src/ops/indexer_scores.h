// ops/indexer_scores.h — the Lightning Indexer's scores of each token over its request's
// compressed indexer keys (deepseek_v4.md §3.6; exact profile §3.6 "exact profile, general sizes").
// The top-k that follows is ops/topk.h (valid_len = n_keys); a later fused kernel may stream scores
// straight into the top-k selection (backends/cpu/kernels.h TopkStream), which this contract allows:
// it fixes only the values of the candidate columns.
//
// Token t scores the keys of list token_list[t] (one list per request: its indexer-key slots in
// entry order). For candidate j < n_keys[t] (the causal ones, j < ⌊(p_t + 1)/4⌋, chosen by the caller):
//   K_j         = the fp32 key of slot key_slots[list, j] (ops/kv_record.h kv_load: f32 rows, or fp8_scaled
//                 e4m3 · scale)
//   score[t, j] = Σ_h w[t, h] · max(0, <q[t, h], K_j>)          fp32 (ref: double), any order
// with w the caller's head weights, already scaled (weights_proj(x) · c_I^-0.5 · H_I^-0.5, §3.6; no
// softmax, no sigmoid: a ReLU per head and a weighted sum). A key slot of −1 scores −inf (never
// selected before a real candidate). Columns j ≥ n_keys[t] are not written.
// q rows of bf16 are widened exactly.
#pragma once

#include <cstdint>

#include "core/dtype.h"
#include "core/status.h"
#include "ops/cache_view.h"
#include "ops/kv_record.h"

namespace sieve {

struct IndexerScoresParams {
    const void* q = nullptr;             // [n_tokens, n_heads, head_dim], q_type; (t, h, i) at t·q_token_stride + h·q_head_stride + i
    const float* weights = nullptr;      // [n_tokens, n_heads], row t at weights + t·weights_row_stride
    CacheView keys;                      // indexer key cache, format key_format (f32 | fp8_scaled)
    KvRecordFormat key_format = KvRecordFormat::f32;
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

    KvRecordLayout key_layout() const { return {key_format, head_dim, 0}; }
};

// Shapes, dtypes, strides, key cache geometry, token_list / n_keys ranges, slots ≥ −1 (reads the
// lists), scores disjoint from every input.
Status validate(const IndexerScoresParams& p);

}  // namespace sieve
