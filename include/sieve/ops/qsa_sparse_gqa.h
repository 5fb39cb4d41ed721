// ops/qsa_sparse_gqa.h — QSA's main attention: gated GQA softmax attention of each query token over
// an explicit list of token positions of its request, read from the paged main KV cache
// (specs/qsa.md §4.7, §4.8, §9 items 5–6).
//
// Semantics. For token t of request row q = tables.token_request[t], query head h and its KV head
// g = h / (n_heads / n_kv_heads) (consecutive query heads share a KV head, §4.7), over the valid
// entries j of row t of `indices` (values ≥ 0, request-relative token positions; −1 = none):
//   K_j, V_j = key and value of KV head g in the kv entry of position j (entry layout below),
//              addressed through `tables` (ops/block_tables.h)
//   l_j      = scale · Σ_i q[t, h, i] · K_j[i]        fp32 (order unspecified), scale = head_dim^-0.5
//                                                    (§4.7: no sink, no softcap, no other scaling)
//   M        = max_j l_j;   p_j = exp(l_j − M)        fp32
//   o        = Σ_j P_j · V_j / Σ_j p_j                fp32 accumulation; P_j by math:
//                math f32:  P_j = p_j                           (`exact` profile)
//                math bf16: P_j = bf16(p_j), Σ p_j unrounded    (`deployed`: vLLM casts P to BF16 for PV, §9 item 5)
// A backend may run the softmax split-K, over chunks of the rows in order (an online softmax, as vLLM's
// kernel does with its split-K partials merged in fp32, §9 item 5): M is then the running max up to
// the row's chunk, and the sums gathered so far are rescaled by exp(M_old − M_new) in fp32 when it grows.
// In exact arithmetic this is the formula above; with bf16 P it rounds exp(l_j − M_chunk) instead of
// exp(l_j − M), a difference within P's own rounding (ref: one chunk, the global max).
//   a row with no valid entry gives o = 0 (§4.6: padding rows produce zero output), the only case set to 0:
//   every other o is the quotient above in IEEE arithmetic, never masked, so a NaN in q[t, h] or in a listed
//   K_j, a logit of +inf (inf / inf), or logits that are all −inf give o = NaN, and a NaN in dim i of a
//   listed V_j gives o[i] = NaN (then y too: the gate multiplies); a −inf logit beside a finite maximum
//   weighs 0.
// Output gate (§4.8; gate == nullptr: y = o):
//   math f32:  y = o · σ(gate[t, h, i]),  σ(x) = 1 / (1 + exp(−x))   fp32
//   math bf16: y = bf16( bf16(o) · bf16(σ(gate)) )                   (§9 item 6: sigmoid and multiply in BF16)
// then y is cast to out_type (bf16: round to nearest even).
// Each listed entry counts once per listing: rows should not repeat a position (the expansion op's
// rows never do). The order of entries in a row does not matter beyond fp32 summation order.
//
// KV entry layout (one entry per token position): [n_kv_heads, 2, head_dim] of kv_type: for KV head
// g, K at elements [2g·head_dim, (2g+1)·head_dim) and V at [(2g+1)·head_dim, (2g+2)·head_dim). The
// stored K is post k_norm and RoPE; V is raw (§4.1, §5.1).
//
// The ref backend accumulates in double; others differ by summation order and their exp(). Products of bf16
// values (bf16 q and caches; math bf16's P_j) may run in units that read bf16 subnormals as 0 and flush
// subnormal sums (the cpu backend's vdpbf16ps and AMX tiles).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>

#include "sieve/core/dtype.h"
#include "sieve/core/status.h"
#include "sieve/ops/attention_math.h"
#include "sieve/ops/cache_view.h"
#include "sieve/ops/block_tables.h"

namespace sieve {

struct QsaSparseGqaParams {
    const void* q = nullptr;          // [n_tokens, n_heads, head_dim] q_type; (t, h, i) at t·q_token_stride + h·q_head_stride + i
    CacheView kv;                     // main KV cache; entry = [n_kv_heads, 2, head_dim] of kv_type
    BlockTables tables;            // the main KV cache group's tables for this step
    const int32_t* indices = nullptr; // [n_tokens, n_indices] positions, −1 = none; row t at indices + t·index_row_stride
    const void* gate = nullptr;       // [n_tokens, n_heads, head_dim] gate_type, or nullptr (no gate)
    void* out = nullptr;              // [n_tokens, n_heads, head_dim] out_type
    int64_t n_tokens = 0, n_heads = 0, n_kv_heads = 0, head_dim = 0;
    int64_t n_indices = 0;            // row width (budget + r − 1 for QSA rows, §4.6)
    int64_t index_row_stride = 0;     // elements, ≥ 0
    int64_t q_token_stride = 0, q_head_stride = 0;
    int64_t gate_token_stride = 0, gate_head_stride = 0;
    int64_t out_token_stride = 0, out_head_stride = 0;
    float scale = 1.0f;               // head_dim^-0.5 (§4.7)
    AttentionMath math = AttentionMath::f32;
    DType q_type = DType::f32;        // f32 | bf16
    DType kv_type = DType::f32;       // f32 | bf16
    DType gate_type = DType::f32;     // f32 | bf16
    DType out_type = DType::f32;      // f32 | bf16
};

// Shapes (n_heads a multiple of n_kv_heads, the kv entry holding [n_kv_heads, 2, head_dim]), dtypes,
// strides (int64 overflow, output rows disjoint), the tables' shape, the output disjoint from every input.
// validate never reads memory behind the pointers; check_indices reads index arrays and may only be
// called on host-readable memory (ops/op_common.h).
Status validate(const QsaSparseGqaParams& p);
// Every token_request[t] ∈ [0, n_requests), every index ≥ −1 and, when some index is valid, the kv
// cache view consistent and every listed position resident (reads token_request, the index rows and the
// block table rows the tokens use).
Status check_indices(const QsaSparseGqaParams& p);

}  // namespace sieve
