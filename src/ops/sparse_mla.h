// ops/sparse_mla.h — the weight-absorbed sparse MLA attention of DSA-on-MLA layers over their latent
// cache (specs/dsa_mla.md §2.5, §2.8, §3.4, §4.3; DeepSeek-V3.2 and Tencent Hy4).
//
// Cache entry of one token: the latent c (kv_lora_rank = R values, post kv_a_layernorm) and the
// RoPE'd shared rope key kr (rope_dim = Dr values), K = [c | kr] (R + Dr dims), V = c (first R dims),
// in the format f32 (plain [R + Dr] rows, the `exact` profile) or fp8_v32 (FlashMLA's 656-byte "FP8 with
// scale" record, §3.4) of ops/cache_record.h; written by ops/cache_store.h as rows [c | kr] (no bf16
// rounding before the quantization: round_bf16 = false).
//
// Attention (sparse_mla_attention), for token t and head h, over the listed entries j of row t
// (slots[t, j] ≥ 0; entries < 0 are skipped; a slot listed twice counts twice):
//   K_j      = dequant(entry) ∈ R^(R+Dr) (ops/kv_load.h): f32 as stored; fp8_v32: c_i = e4m3(byte_i) ·
//              scale[i / g] (one fp32 product), kr widened from bf16
//   l_j      = scale · ⟨q[t, h], K_j⟩                      fp32 products and sums, order unspecified
//   M        = max(max_j l_j, σ_h)                         σ_h = sink[h] (−inf when sink is nullptr)
//   den      = Σ_j exp(l_j − M) + exp(σ_h − M)             the sink has no value vector (§2.8)
//   out[t,h] = Σ_j exp(l_j − M) · c_j / den                (V = the first R dims of K_j), cast once
// The sink is a natural-log logit, not multiplied by `scale` (§2.8, "Decisions for sieve"). A row with no
// listed entry gets out = 0 (FlashMLA's "lonely q"); σ_h = +inf gives out = 0; σ_h = −inf has no effect.
// Those are the only rows set to 0; every other row is the quotient above in IEEE arithmetic, never masked:
// a NaN in q[t, h], in σ_h or anywhere in a listed entry (latent, rope dims, fp8 scale or NaN byte), a logit
// of +inf (inf / inf), or logits that are all −inf without a sink (−inf − (−inf)) give out[t, h] = NaN; only
// a −inf logit beside a finite maximum simply weighs 0. So non-finite inputs show as non-finite outputs.
// `scale` is the config's softmax scale (Dqk^-0.5 · m², §2.3), the same as for the naive form.
// Slots are global cache slots (block_table[req][e / B] · B + e % B, §4.3), resolved by the caller.
#pragma once

#include <cstdint>

#include "core/dtype.h"
#include "core/status.h"
#include "ops/cache_record.h"
#include "ops/cache_view.h"

namespace sieve {

struct SparseMlaAttentionParams {
    const void* q = nullptr;        // [n_tokens, n_heads, kv_lora_rank + rope_dim], q_type; (t, h, i) at
                                    //   t·q_token_stride + h·q_head_stride + i: [q_nope·W_UK | RoPE(q_pe)] (§2.5)
    CacheView cache;                // the layer's latent cache
    int64_t n_slots = 0;            // slots in the cache: every listed slot must be < n_slots
    const int32_t* slots = nullptr; // [n_tokens, topk] global slots of the selected entries, −1 = none;
                                    //   row t at slots + t·slots_row_stride
    const float* sink = nullptr;    // [n_heads] natural-log sink logits, or nullptr (no sink)
    void* out = nullptr;            // [n_tokens, n_heads, kv_lora_rank], out_type; (t, h, i) at
                                    //   t·out_token_stride + h·out_head_stride + i
    float scale = 0.0f;             // softmax scale (finite, > 0)
    int64_t n_tokens = 0, n_heads = 0, kv_lora_rank = 0, rope_dim = 0, topk = 0;
    int64_t q_token_stride = 0, q_head_stride = 0;
    int64_t slots_row_stride = 0;
    int64_t out_token_stride = 0, out_head_stride = 0;
    CacheRecordFormat format = CacheRecordFormat::f32;  // f32 | fp8_v32
    DType q_type = DType::f32;    // f32 | bf16
    DType out_type = DType::f32;  // f32 | bf16

    // The latent cache's entries: [c | kr], the last rope_dim values the bf16 tail of fp8_v32.
    CacheRecordLayout layout() const { return {format, kv_lora_rank + rope_dim, rope_dim}; }
};

// Geometry (the layout representable: fp8_v32 needs whole 128-value groups, else unsupported), strides
// (out rows disjoint, out disjoint from q, the slots and the sink), dtypes, scale.
// validate never reads memory behind the pointers; check_indices reads index arrays and may only be
// called on host-readable memory (ops/op_common.h).
Status validate(const SparseMlaAttentionParams& p);
// Every slot in [−1, n_slots) and, when some slot is listed, the cache view consistent with the format
// (reads the slot rows).
Status check_indices(const SparseMlaAttentionParams& p);

}  // namespace sieve
