// ops/sparse_mla.h — the latent (MLA) cache of DSA-on-MLA layers and the weight-absorbed sparse MLA
// attention over it (specs/dsa_mla.md §2.5, §2.8, §3.4, §4.3; DeepSeek-V3.2 and Tencent Hy4).
//
// Cache entry of one token: the latent c (kv_lora_rank = R values, post kv_a_layernorm) and the
// RoPE'd shared rope key kr (rope_dim = Dr values), K = [c | kr] (R + Dr dims), V = c (first R dims).
// Formats (SparseMlaCacheFormat):
//   f32         [R + Dr] f32, plain rows (`exact` profile).
//   fp8_ds_mla  FlashMLA's "FP8 with scale" record (§3.4; 656 bytes for R = 512, Dr = 64), generalized
//               to the config: bytes [0, R) e4m3 latent; bytes [R, R + 4·G) G = R / g fp32 scales, scale i
//               covering latent values [g·i, g·i + g); bytes [R + 4·G, R + 4·G + 2·Dr) bf16 rope dims.
//               g = sparse_mla_quant_group(R) = 128 (a tile of §3.4), or R when R < 128. Scales are UE8M0
//               values stored as fp32 (specs/README.md "Open points settled").
//
// Cache write (sparse_mla_cache_write), for token t with slot s = slots[t] ≥ 0 (s < 0: skipped):
//   f32:        entry[i] = latent[t, i] (i < R), entry[R + j] = rope[t, j] (j < Dr), widened exactly.
//   fp8_ds_mla: each group of g latent values is quantized by ops/quant_fp8.h's rule (amax, UE8M0 scale
//               2^ceil(log2(max(amax, 1e-4)/448)), saturating RNE e4m3, NaN/inf poisoning) — the same bytes
//               as quant_fp8 with group_size g; rope values are rounded to bf16 (RNE).
//
// Attention (sparse_mla_attention), for token t and head h, over the listed entries j of row t
// (slots[t, j] ≥ 0; entries < 0 are skipped; a slot listed twice counts twice):
//   K_j      = dequant(entry) ∈ R^(R+Dr):  f32 as stored; fp8_ds_mla: c_i = e4m3(byte_i) · scale[i / g]
//              (one fp32 product), kr widened from bf16
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
#include "ops/cache_view.h"

namespace sieve {

enum class SparseMlaCacheFormat : uint8_t { f32, fp8_ds_mla };

const char* sparse_mla_cache_format_name(SparseMlaCacheFormat f);  // "f32" / "fp8_ds_mla"
// Latent values per fp8 scale: 128, or kv_lora_rank when it is smaller (§3.4).
int64_t sparse_mla_quant_group(int64_t kv_lora_rank);
// Bytes of one entry: f32 4·(R + Dr); fp8_ds_mla R + 4·R/g + 2·Dr (656 for 512/64).
int64_t sparse_mla_entry_bytes(SparseMlaCacheFormat f, int64_t kv_lora_rank, int64_t rope_dim);
// The kv_lora_rank / format combination is representable: fp8_ds_mla needs R % g == 0.
Status sparse_mla_check_geometry(SparseMlaCacheFormat f, int64_t kv_lora_rank, int64_t rope_dim);

struct SparseMlaCacheWriteParams {
    const void* latent = nullptr;  // [n_tokens, kv_lora_rank], latent_type; row t at latent + t·latent_row_stride
    const void* rope = nullptr;    // [n_tokens, rope_dim], rope_type; row t at rope + t·rope_row_stride (RoPE'd kr)
    const int64_t* slots = nullptr;  // [n_tokens] global slots, −1 = skip
    CacheView cache;               // entry_bytes = sparse_mla_entry_bytes(format, ...)
    int64_t n_slots = 0;           // slots in the cache (num_blocks · block_size): every slot must be < n_slots
    int64_t n_tokens = 0, kv_lora_rank = 0, rope_dim = 0;
    int64_t latent_row_stride = 0, rope_row_stride = 0;  // elements
    SparseMlaCacheFormat format = SparseMlaCacheFormat::f32;
    DType latent_type = DType::f32;  // f32 | bf16
    DType rope_type = DType::f32;    // f32 | bf16
};

// Geometry, strides, dtypes, cache view consistent with the format. Slots of one call must be distinct
// (the caller's invariant; not checked: it would need memory).
// validate never reads memory behind the pointers; check_indices reads index arrays and may only be
// called on host-readable memory (ops/op_common.h).
Status validate(const SparseMlaCacheWriteParams& p);
// Every slot in [−1, n_slots) (reads the slots).
Status check_indices(const SparseMlaCacheWriteParams& p);

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
    SparseMlaCacheFormat format = SparseMlaCacheFormat::f32;
    DType q_type = DType::f32;    // f32 | bf16
    DType out_type = DType::f32;  // f32 | bf16
};

// Geometry, strides (out rows disjoint, out disjoint from q, the slots and the sink), dtypes, scale.
// validate never reads memory behind the pointers; check_indices reads index arrays and may only be
// called on host-readable memory (ops/op_common.h).
Status validate(const SparseMlaAttentionParams& p);
// Every slot in [−1, n_slots) and, when some slot is listed, the cache view consistent with the format
// (reads the slot rows).
Status check_indices(const SparseMlaAttentionParams& p);

}  // namespace sieve
