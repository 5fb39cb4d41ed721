// ops/qsa_score.h — QSA's weight-free indexer scores of every query token against the compressed
// keys of the complete groups it may see (specs/qsa.md §4.4, §4.5, §9 item 2).
//
// Semantics. For token t of request row q = tables.token_request[t] and group g ∈ [0, n_groups[t]):
//   k_g      = the [head_dim] key_type entry g of `keys` (the compressed-key cache, §5.3; one entry per
//              group, already pooled, k_layernorm'ed and rotated), addressed through `tables`
//              (ops/block_tables.h)
//   d_h      = Σ_i q[t, h, i] · k_g[i]                     fp32 products and sums, order unspecified
//   s[t, g]  = scale · Σ_{h < n_heads} max(0, d_h)          ReLU per head BEFORE the sum over heads
//                                                          (not a max over heads, §4.4); fp32
// with scale = indexer_head_dim^-0.5 (§4.4; it does not change the ranking but is part of the
// reference). Every index head is scored against the same single key (indexer_kv_heads = 1, MQA).
// Scores are ≥ 0 (+0.0 when every head's product is ≤ 0). Columns g ≥ n_groups[t] of row t are not
// written; a row with n_groups[t] = 0 writes nothing (the caller's dense short-context rows, §4.5).
// n_groups[t] is the caller's visible-group count, min((p + 1) / r, L / r) (§4.5).
// The ref backend accumulates in double and rounds once; others differ by fp32 summation order.
//
// Fused selection: when `selected` is set, row t of it receives the top-k of token t's groups
// g < n_groups[t] by s[t, g], exactly as ops/topk.h selects them over this backend's scores (highest
// first, ties to the lower group, §4.6; picks ascending, then −1 up to width k), so that no score row
// needs to be written (performance_facts.md §5). Then `scores` may be nullptr; when both are set,
// both are written. A row with n_groups[t] = 0 selects nothing (all −1).
#pragma once

#include <cstdint>

#include "core/dtype.h"
#include "core/status.h"
#include "ops/cache_view.h"
#include "ops/block_tables.h"

namespace sieve {

struct QsaScoreParams {
    const void* q = nullptr;            // [n_tokens, n_heads, head_dim] q_type; (t, h, i) at t·q_token_stride + h·q_head_stride + i
    CacheView keys;                     // compressed keys, one entry = [head_dim] of key_type
    BlockTables tables;              // the compressed-key cache group's tables for this step
    const int32_t* n_groups = nullptr;  // [n_tokens] groups to score per token, each in [0, n_cols]
    float* scores = nullptr;            // [n_tokens, n_cols] f32, row t at scores + t·scores_row_stride
    int64_t n_tokens = 0, n_heads = 0, head_dim = 0;
    int64_t q_token_stride = 0, q_head_stride = 0;  // elements
    int64_t n_cols = 0;                 // capacity of a score row (≥ every n_groups[t])
    int64_t scores_row_stride = 0;      // elements, ≥ n_cols when n_tokens > 1
    float scale = 1.0f;                 // Di^-0.5 (§4.4)
    DType q_type = DType::f32;          // f32 | bf16
    DType key_type = DType::f32;        // f32 | bf16
    int32_t* selected = nullptr;        // [n_tokens, k] or nullptr (no fused selection)
    int64_t k = 0;                      // ≥ 1 when selected is set
    int64_t selected_row_stride = 0;    // elements, ≥ k when n_tokens > 1
};

// Shapes, dtypes, strides, the tables' shape, the outputs (scores, selected) disjoint from the inputs
// and from each other.
// validate never reads memory behind the pointers; check_indices reads index arrays and may only be
// called on host-readable memory (ops/op_common.h).
Status validate(const QsaScoreParams& p);
// Every token_request[t] ∈ [0, n_requests), every n_groups[t] ∈ [0, n_cols] and, when some row has a
// group, q and scores present, the key cache view consistent and every scored entry resident (reads
// token_request, n_groups and the block table rows the tokens use).
Status check_indices(const QsaScoreParams& p);

}  // namespace sieve
