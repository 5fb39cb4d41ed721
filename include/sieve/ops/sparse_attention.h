// ops/sparse_attention.h — attention of each token over an explicit list of cache entries, with an optional
// per-head sink: the sparse attention core of DeepSeek-V4 (deepseek_v4.md §3.8, §3.10) and of DSA on MLA
// (dsa_mla.md §2.5, §2.8, §3.4, §4.3; DeepSeek-V3.2, Tencent Hy4). The params follow the shape of FlashMLA's
// sparse decode: q, a main KV list, an optional extra KV list into a second cache, a sink, a scale.
//
// Every cache entry holds qk_dim values K_j (ops/kv_load.h's dequantization of the list's format: f32 rows,
// fp8_model1 records, fp8_v32 records; the last rope_dim values of an fp8 record are its bf16 tail,
// ops/cache_record.h). The value vector V_j is the first v_dim values of K_j:
//   DeepSeek-V4  MQA, one shared K = V row (num_key_value_heads = 1): v_dim = qk_dim = head_dim (§3.8)
//   DSA on MLA   weight-absorbed MLA: K = [c | kr], qk_dim = kv_lora_rank + rope_dim, V = c, v_dim =
//                kv_lora_rank (§2.5); q = [q_nope·W_UK | RoPE(q_pe)]
//
// The lists. Token t reads, in this order,
//   main:  main.slots[t, 0 … main.width)    into main.cache
//   extra: extra.slots[t, 0 … extra.width)  into extra.cache (extra.width = 0: no extra list)
// Slots are global cache slots (block_table[req][e / B] · B + e % B, dsa_mla.md §4.3), resolved by the caller;
// a slot of −1 is skipped, and a slot listed twice counts twice (lists do not deduplicate).
//   DeepSeek-V4 passes main = the sliding-window entries (§3.2) and extra = the compressed entries (HCA: every
//   visible entry, CSA: the indexer's top-k; §3.5, §3.7), none on SWA-only layers. The window is main because
//   every layer has one (the compressed list is the optional one), and because §3.8 orders the candidates
//   window first: the cpu kernel gathers them in that order, so its sums stay in the reference's order.
//   DSA passes main = the latent entries of the top-k selection (§2.8) and no extra list.
//
// Attention, for token t and head h, over the listed entries j (of both lists):
//   l_j      = scale · ⟨q[t, h], K_j⟩                 fp32 products and sums, order unspecified
//   M        = max(max_j l_j, σ_h)                    σ_h = sink[h], −inf when sink is nullptr
//   p_j      = exp(l_j − M)
//   den      = Σ_j p_j + exp(σ_h − M)
//   out[t,h] = Σ_j P_j · V_j / den                      fp32 accumulation, cast to out_type once; P_j by math
//              (ops/attention_math.h):
//                math f32:  P_j = p_j                           (`exact` profile)
//                math bf16: P_j = bf16(p_j), den unrounded      (`deployed`: the authors' kernel, FlashMLA and
//                           vLLM cast the weights to bf16 for P·V, deepseek_v4.md §3.8)
//              fp8_v32 entries carry fp32 group scales s (V_j = s·e_j): with math bf16 their product may be
//              taken as bf16(bf16(p_j)·s)·e_j, which is P_j·V_j whenever s is a power of two (the UE8M0 scales
//              every cache store writes, dsa_mla.md §3.4).
// i.e. the sink is a virtual key of logit σ_h with a zero value (deepseek_v4.md §3.8 "sink in softmax
// denominator", dsa_mla.md §2.8), a natural-log logit NOT multiplied by `scale`; M only guards the exponentials.
// A backend may run the softmax online, over chunks of the listed entries (split-K included): M is then a
// reference of the entry's chunk, the running max up to it within its split or below that by a bounded slack
// (the cuda wgmma kernel: 8), and the sums gathered so far are rescaled by exp(M_old − M_new) in fp32 when it
// moves; the splits' sums are rescaled to their common max and added. In exact
// arithmetic this is the formula above; with math bf16 it rounds exp(l_j − M_chunk) instead of exp(l_j − M),
// a difference within P's own rounding (ref: one chunk, the global max).
// Rows set to 0, and only these: a token with no listed entry (FlashMLA's "lonely q", §3.8 and §2.8), and a
// head with σ_h = +inf (the virtual key takes all the weight: FlashMLA "+inf will cause the result to become
// 0", §2.8). σ_h = −inf has no effect. Every other row is the quotient above in IEEE arithmetic, never masked:
// a NaN in q[t, h], in σ_h or anywhere in a listed entry (values, rope dims, an fp8 scale or NaN byte), a
// logit of +inf (inf / inf), or logits that are all −inf without a sink (−inf − (−inf)) give out[t, h] = NaN;
// only a −inf logit beside a finite maximum simply weighs 0. Non-finite inputs show as non-finite outputs.
// Computed in fp32 (ref: double) with any accumulation order; q rows of bf16 are widened exactly. Where both
// factors of a product are bf16 values (bf16 q, entries exact in bf16, math bf16's P_j), a backend may form the
// products in bf16 matrix units that read operands below 2^-126 (subnormal) as 0 and flush subnormal sums
// (the cpu backend's AMX tiles): a change far below the fp32 sums' rounding next to any normal term.
// `scale`: DeepSeek-V4 head_dim^-0.5, no YaRN mscale (deepseek_v4.md §1.2); DSA the config's softmax scale
// Dqk^-0.5 · m² (dsa_mla.md §2.3).
//
// The cpu backend dequantizes each listed entry once for all the heads of a work item (the vLLM CPU
// kernel's structure, §3.8); run needs the workspace sparse_attention_workspace_size() gives.
#pragma once

#include <cstdint>

#include "sieve/core/dtype.h"
#include "sieve/core/status.h"
#include "sieve/ops/attention_math.h"
#include "sieve/ops/cache_record.h"
#include "sieve/ops/cache_view.h"

namespace sieve {

// One list of cache entries and its cache.
struct SparseKvList {
    CacheView cache;                                    // the list's paged cache; unused when width == 0
    CacheRecordFormat format = CacheRecordFormat::f32;  // f32 | fp8_model1 | fp8_v32
    int64_t n_slots = 0;                                // slots in the cache: every listed slot must be < n_slots
    const int32_t* slots = nullptr;                     // [n_tokens, width], row t at slots + t·slots_stride; −1 = none
    int64_t width = 0;                                  // entries listed per token; 0 = no list
    int64_t slots_stride = 0;                           // elements, ≥ width when n_tokens > 1
};

struct SparseAttentionParams {
    const void* q = nullptr;        // [n_tokens, n_heads, qk_dim], q_type; (t, h, i) at t·q_token_stride + h·q_head_stride + i
    SparseKvList main;              // the entries every token reads first
    SparseKvList extra;             // optional second list into its own cache (extra.width = 0: none)
    const float* sink = nullptr;    // [n_heads] natural-log sink logits, or nullptr (no sink)
    float scale = 0.0f;             // logit scale, finite and > 0
    void* out = nullptr;            // [n_tokens, n_heads, v_dim], out_type; (t, h, i) at t·out_token_stride + h·out_head_stride + i
    int64_t n_tokens = 0, n_heads = 0;
    int64_t qk_dim = 0;             // values of q and of every cache entry
    int64_t v_dim = 0;              // values of V = the first v_dim of an entry, 1 ≤ v_dim ≤ qk_dim
    int64_t rope_dim = 0;           // fp8_model1, fp8_v32 entries: the bf16 tail (ops/cache_record.h); else ignored
    int64_t q_token_stride = 0, q_head_stride = 0;
    int64_t out_token_stride = 0, out_head_stride = 0;
    DType q_type = DType::f32;      // f32 | bf16
    DType out_type = DType::f32;    // f32 | bf16
    AttentionMath math = AttentionMath::f32;  // the P·V weights (above)

    // The entries of a list's cache: qk_dim values, the last rope_dim the bf16 tail of the fp8 formats.
    CacheRecordLayout layout(const SparseKvList& l) const { return {l.format, qk_dim, rope_dim}; }
};

// Shapes, dtypes, strides, finite scale > 0; per present list (width > 0): its pointer and row stride, the
// format one of the three, its layout representable (fp8_v32 needs whole 128-value groups, else unsupported)
// and the cache view consistent with it and with n_slots; out rows disjoint, out disjoint from q, the slot
// lists and the sink.
// validate never reads memory behind the pointers; check_indices reads index arrays and may only be
// called on host-readable memory (ops/op_common.h).
Status validate(const SparseAttentionParams& p);
// Every listed slot of both lists in [−1, n_slots) (reads the lists).
Status check_indices(const SparseAttentionParams& p);

}  // namespace sieve
