// ops/indexer_scores.h — the Lightning Indexer's scores of each query token over its request's indexer
// keys, for every family (one op, one formula): DeepSeek-V4 CSA (deepseek_v4.md §3.6, keys = the
// compressed indexer entries), DSA on MLA (dsa_mla.md §2.6, §2.7, §3.3, keys = one per token) and QSA
// (qsa.md §4.4, §4.5, keys = the pooled groups, no head weights); optionally with the top-k over the
// scores in the same pass (ops/topk.h semantics, valid_len = n_keys), so that no full score row needs
// to be written (performance_facts.md §5: "a fused threshold-filter top-k so no [L] fp32 logits are
// materialized").
//
// Token t belongs to the request in row r = tables.token_request[t] of the key cache's block tables
// (ops/block_tables.h). For candidate j < n_keys[t] (the caller's causal count: ⌊(p_t + 1)/4⌋ for V4,
// p_t + 1 for DSA, the visible groups for QSA) the key is entry j of row r:
//   v_j         = its values: f32, bf16 widened, or the e4m3 values of fp8_row_scale (exact)
//   s_j         = its scale: the fp32 row scale of fp8_row_scale (§3.3 / §4.3), else 1
//   q[t, h]     = f32, bf16 widened, or e4m3 values (exact); f8_e4m3 q comes with q_scale[t, h]
//   w[t, h]     = fl32(weights[t, h] · weight_scale), or weight_scale when weights is nullptr (QSA: every
//                 head weighs the same); f8_e4m3 q: fl32(w[t, h] · q_scale[t, h]) (DeepGEMM fp8_mqa_logits:
//                 the q scale folded into the head weight, dsa_mla.md §2.6 "FP8 execution")
//   d[t, h, j]  = Σ_i q[t, h, i] · v_j[i]
//   score[t, j] = s_j · Σ_h w[t, h] · ReLU(d[t, h, j]),   ReLU(x) = x > 0 ? x : 0 (a NaN dot counts 0)
// in fp32 with products and sums in any order, and a factor common to every term (s_j; weight_scale when
// weights is nullptr) applied to the sum or to each term (ref: double, one rounding). Products of bf16
// values (bf16 or e4m3 q against fp8 keys) may run in units that read bf16 subnormals as 0 and flush
// subnormal sums (the cpu backend's vdpbf16ps and AMX tiles). weight_scale carries
// the positive constants of the family (V4: c_I^-0.5 · H_I^-0.5; DSA: Hi^-0.5 · Di^-0.5; QSA: Di^-0.5): no
// softmax, no sigmoid, a ReLU per head and a weighted sum. Columns j ≥ n_keys[t] of row t are not written.
//
// Fused selection: when `selected` is set, row t of it receives the top-k of token t's candidates
// j < n_keys[t] by score[t, j], exactly as ops/topk.h selects them over this backend's scores (highest
// first, ties to the lower index, NaN last; picks ascending, then −1 up to width k; a row without
// candidates is all −1). Then `scores` may be nullptr (nothing is written there); when both are set,
// both are written.
#pragma once

#include <cstdint>

#include "sieve/core/dtype.h"
#include "sieve/core/status.h"
#include "sieve/ops/block_tables.h"
#include "sieve/ops/cache_record.h"
#include "sieve/ops/cache_view.h"

namespace sieve {

struct IndexerScoresParams {
    const void* q = nullptr;             // [n_tokens, n_heads, head_dim], q_type; (t, h, i) at t·q_token_stride + h·q_head_stride + i
    DType q_type = DType::f32;           // f32 | bf16 | f8_e4m3
    const float* q_scale = nullptr;      // [n_tokens, n_heads], f8_e4m3 q only (else nullptr); (t, h) at t·q_scale_token_stride + h
    const float* weights = nullptr;      // [n_tokens, n_heads] or nullptr (every head weight 1); (t, h) at t·weights_token_stride + h
    float weight_scale = 1.0f;           // finite
    CacheView keys;                      // the indexer key cache
    CacheRecordFormat key_format = CacheRecordFormat::f32;  // f32 | bf16 | fp8_row_scale
    int64_t n_slots = 0;                 // slots in the key cache: every block a token reads is below it
    BlockTables tables;                  // the key cache group's tables for this step
    const int32_t* n_keys = nullptr;     // [n_tokens] candidates per token, in [0, n_cols]; their entries resident
    float* scores = nullptr;             // [n_tokens, n_cols], row t at scores + t·scores_row_stride
    int64_t n_tokens = 0, n_heads = 0, head_dim = 0;
    int64_t n_cols = 0;                  // capacity of a score row (≥ every n_keys[t])
    int64_t q_token_stride = 0, q_head_stride = 0, q_scale_token_stride = 0;  // elements
    int64_t weights_token_stride = 0;    // elements
    int64_t scores_row_stride = 0;       // elements, ≥ n_cols when n_tokens > 1
    int32_t* selected = nullptr;         // [n_tokens, k] or nullptr (no fused selection)
    int64_t k = 0;                       // ≥ 1 when selected is set
    int64_t selected_row_stride = 0;     // elements, ≥ k when n_tokens > 1

    CacheRecordLayout key_layout() const { return {key_format, head_dim, 0}; }
};

// Shapes, dtypes (q_scale exactly with f8_e4m3 q), strides, the tables' shape, and the outputs (scores,
// selected) disjoint from every input and from each other.
// validate never reads memory behind the pointers; check_indices reads index arrays and may only be
// called on host-readable memory (ops/op_common.h).
Status validate(const IndexerScoresParams& p);
// Every token_request[t] ∈ [0, n_requests), every n_keys[t] ∈ [0, n_cols] and, when some token has a
// candidate, q (and q_scale for f8_e4m3 q) and, without a fused selection, scores present, the key cache
// view consistent with the format and n_slots, and every candidate's block resident and below n_slots (reads token_request, n_keys and the
// block table rows the tokens use).
Status check_indices(const IndexerScoresParams& p);

}  // namespace sieve
