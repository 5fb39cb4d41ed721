// ops/sparse_mqa.h — multi-query attention of each token over an explicit list of cache rows, with
// a per-head attention sink: DeepSeek-V4's sparse attention core (deepseek_v4.md §3.8, §3.10).
//
// One shared K = V vector per cache row (num_key_value_heads = 1) serves every head. Token t reads
// the rows listed in two slot lists, each into its own paged cache:
//   window:     window_slots[t, 0 … n_window)          — the sliding-window entries (§3.2)
//   compressed: compressed_slots[t, 0 … n_compressed)  — HCA: all visible entries; CSA: the indexer's
//               top-k (§3.5, §3.7); n_compressed = 0 for SWA-only layers
// A slot of −1 is skipped. Every listed slot counts once per listing (lists do not deduplicate).
// Row values are what ops/kv_load.h's kv_load returns for the cache's format (f32 rows, or
// dequantized fp8_model1 records). For token t and head h, over the listed rows v_j:
//   l_j   = scale · <q[t, h], v_j>                                    fp32 (scale = head_dim^-0.5 for V4,
//                                                                      no YaRN mscale: §1.2)
//   M     = max(max_j l_j, sink[h])                                   (sink omitted when sink is null)
//   o     = Σ_j e^(l_j − M) · v_j / (Σ_j e^(l_j − M) + e^(sink[h] − M))
// i.e. the sink is a virtual key of logit sink[h] (natural-log units, not scaled) with a zero value
// (§3.8 "sink in softmax denominator"); M only guards the exponentials. A token with no valid row gets
// o = 0 (§3.8 FlashMLA "lonely query"), the only case set to 0: every other o is the quotient above in
// IEEE arithmetic, never masked, so a NaN in q[t, h], in sink[h] or in a listed row, a logit or sink of
// +inf (inf / inf), or logits that are all −inf without a sink give o[t, h] = NaN (a −inf logit beside a
// finite maximum weighs 0). Computed in fp32 (ref: double) with any accumulation order; the result is
// cast to out_type once. q rows of bf16 are widened exactly.
//
// The cpu backend dequantizes each selected row once for all heads of the token (DESIGN.md; the
// vLLM CPU kernel's structure, §3.8); run needs the workspace sparse_mqa_workspace_size() gives.
#pragma once

#include <cstdint>

#include "core/dtype.h"
#include "core/status.h"
#include "ops/cache_view.h"
#include "ops/cache_record.h"

namespace sieve {

struct SparseMqaParams {
    const void* q = nullptr;                  // [n_tokens, n_heads, head_dim], q_type; (t, h, i) at t·q_token_stride + h·q_head_stride + i
    CacheView window;                         // window cache, format f32 | fp8_model1 (ops/cache_record.h)
    CacheRecordFormat window_format = CacheRecordFormat::f32;
    const int32_t* window_slots = nullptr;    // [n_tokens, n_window], row t at window_slots + t·window_slots_stride; −1 = none
    CacheView compressed;                     // compressed cache; unused when n_compressed == 0
    CacheRecordFormat compressed_format = CacheRecordFormat::f32;  // f32 | fp8_model1
    const int32_t* compressed_slots = nullptr;  // [n_tokens, n_compressed], row stride compressed_slots_stride; −1 = none
    const float* sink = nullptr;              // [n_heads] or nullptr (no sink)
    float scale = 1.0f;                       // logit scale, finite
    void* out = nullptr;                      // [n_tokens, n_heads, head_dim], out_type, out strides
    int64_t n_tokens = 0, n_heads = 0, head_dim = 0;
    int64_t rope_dim = 0;                     // fp8_model1 records: the bf16 tail (cache_record.h); else ignored
    int64_t n_window = 0, n_compressed = 0;
    int64_t window_slots_stride = 0, compressed_slots_stride = 0;  // elements, ≥ the list widths
    int64_t q_token_stride = 0, q_head_stride = 0;
    int64_t out_token_stride = 0, out_head_stride = 0;
    DType q_type = DType::f32;                // f32 | bf16
    DType out_type = DType::f32;              // f32 | bf16

    CacheRecordLayout window_layout() const { return {window_format, head_dim, rope_dim}; }
    CacheRecordLayout compressed_layout() const { return {compressed_format, head_dim, rope_dim}; }
};

// Shapes, dtypes, strides, cache geometry (entry bytes of the format), list strides ≥ widths, out
// disjoint from q and the slot lists, finite scale.
// validate never reads memory behind the pointers; check_indices reads index arrays and may only be
// called on host-readable memory (ops/op_common.h).
Status validate(const SparseMqaParams& p);
// Every window and compressed slot ≥ −1 (reads both lists).
Status check_indices(const SparseMqaParams& p);

}  // namespace sieve
