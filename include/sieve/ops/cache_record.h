// ops/cache_record.h — the entry formats of every paged cache (one name per byte layout), their
// geometry and the address of each part of an entry. The ops that write entries (ops/cache_store.h),
// read them back (ops/kv_load.h), score them (ops/indexer_scores.h) or attend over them
// (ops/sparse_attention.h, qsa_sparse_gqa) all address entries through the helpers below.
//
// An entry holds `dim` values; the fp8 formats quantize the first quant_dim() of them in groups (one
// scale per group, ops/quant_fp8.h's rule) and keep the last rope_dim as bf16. B = the view's
// block_size, j = slot % B, and "block" = the slot's block (CacheView::block).
//
//   f32            plain row of dim fp32 values; entry_bytes = 4·dim. The exact profile of every family
//                  (deepseek_v4.md §3.10, dsa_mla.md "Decisions for sieve", qsa.md §5 "exact").
//   bf16           plain row of dim bf16 values (little endian); entry_bytes = 2·dim. QSA's deployed main
//                  KV, raw-key ring and compressed keys (qsa.md §5.1–§5.3).
//   fp8_row_scale  dim ≤ 128 e4m3 values, ONE scale for the whole row stored as fp32, laid out PER BLOCK:
//                  [0, B·dim) the values (entry j at j·dim), [B·dim, B·(dim + 4)) the scales (entry j at
//                  B·dim + 4·j); entry_bytes = dim + 4 (132 for dim 128). The indexer key cache of
//                  DeepSeek-V4 (deepseek_v4.md §4.3) and of DSA (dsa_mla.md §3.3), one layout: vLLM's
//                  indexer_k_quant_and_cache / DeepGEMM's paged fp8_mqa_logits keys. A dim above 128 would
//                  take one scale per 128 values there (head_dim + head_dim/128·4 bytes): unsupported.
//   fp8_model1     DeepSeek-V4's 584-byte token record: FlashMLA "MODEL1_FP8Sparse", vLLM's fp8_ds_mla
//                  for DeepSeek-V4 (deepseek_v4.md §4.1). quant_dim = dim − rope_dim values in e4m3 with one
//                  UE8M0 byte per tile of 64 (the last tile partial when quant_dim % 64 ≠ 0, as in small
//                  test models), then rope_dim bf16 values. Laid out PER BLOCK:
//                    data_bytes  = quant_dim + 2·rope_dim                           (576 for 448 + 64)
//                    scale_bytes = ⌈quant_dim/64⌉ rounded up to a multiple of 8       (7 scales + 1 zero pad)
//                    [0, B·data_bytes)               entry j's data at j·data_bytes: e4m3 bytes, then bf16 rope
//                    [B·data_bytes, B·entry_bytes)   entry j's scales at B·data_bytes + j·scale_bytes: the
//                                                    tile bytes (ue8m0), then zero padding
//                  entry_bytes = data_bytes + scale_bytes (584).
//   fp8_v32        DeepSeek-V3.2 / Hy4's 656-byte latent record: FlashMLA "FP8 with scale" (V32), vLLM's
//                  fp8_ds_mla for DeepSeek-V3.2 (dsa_mla.md §3.4). Laid out PER ENTRY (entry j at
//                  j·entry_bytes): bytes [0, R) R = quant_dim e4m3 latent values; [R, R + 4·G) G = R / g
//                  fp32 scales, scale i covering values [g·i, g·i + g), g = min(128, R) (R % g = 0, else
//                  unsupported); [R + 4·G, R + 4·G + 2·rope_dim) bf16 rope values. The scales are UE8M0
//                  values stored as fp32 (specs/README.md "Open points settled"). entry_bytes = 656 for
//                  R = 512, rope_dim = 64.
//
// rope_dim is used by fp8_model1 and fp8_v32 only; the other formats ignore it (a plain row holds the
// rope dims like any other value).
#pragma once

#include <cstdint>
#include <string_view>

#include "sieve/core/status.h"
#include "sieve/ops/cache_view.h"

namespace sieve {

enum class CacheRecordFormat : uint8_t { f32, bf16, fp8_row_scale, fp8_model1, fp8_v32 };
// "f32", "bf16", "fp8_row_scale", "fp8_model1", "fp8_v32".
std::string_view cache_record_format_name(CacheRecordFormat f);

inline constexpr int64_t kFp8Model1Tile = 64;     // values per UE8M0 byte (deepseek_v4.md §2.4 "block 64", §4.1)
inline constexpr int64_t kFp8V32Group = 128;      // values per fp32 scale (dsa_mla.md §3.4: 4 tiles of 128)
inline constexpr int64_t kFp8RowScaleMaxDim = 128;  // one scale per row (deepseek_v4.md §4.3, dsa_mla.md §3.3)

struct CacheRecordLayout {
    CacheRecordFormat format = CacheRecordFormat::f32;
    int64_t dim = 0;       // values per entry
    int64_t rope_dim = 0;  // fp8_model1, fp8_v32: the last rope_dim values are kept as bf16; ignored otherwise

    bool is_fp8() const;
    // Values stored as e4m3: dim − rope_dim (fp8_model1, fp8_v32), dim (fp8_row_scale), 0 (f32, bf16).
    int64_t quant_dim() const;
    // Values kept as bf16 after the e4m3 ones: rope_dim (fp8_model1, fp8_v32), 0 otherwise.
    int64_t bf16_tail() const;
    // Values per scale: 64 (fp8_model1; the last group may be shorter), min(128, quant_dim) (fp8_v32),
    // dim (fp8_row_scale), 0 (f32, bf16).
    int64_t group_size() const;
    int64_t n_groups() const;  // scales per entry: ⌈quant_dim / group_size⌉, 0 for the plain formats
    // Bytes of an entry in its block's data part (fp8_row_scale, fp8_model1: the per-block layout), or the
    // whole entry (the per-entry formats f32, bf16, fp8_v32).
    int64_t data_bytes() const;
    // Bytes of an entry's scales: 4 (fp8_row_scale), the padded tile bytes (fp8_model1), 4·n_groups
    // (fp8_v32), 0 (f32, bf16).
    int64_t scale_bytes() const;
    int64_t entry_bytes() const;  // bytes one entry takes in its block, every format
    // fp8_row_scale and fp8_model1 keep all data parts of a block first, then all scale parts.
    bool scales_after_block_data() const;
};

// The layout is representable: dim in [1, 2^40]; fp8_model1: dim and rope_dim even (the bf16 values stay
// 2-byte aligned), 0 ≤ rope_dim ≤ dim; fp8_v32: 0 ≤ rope_dim < dim and quant_dim a multiple of its group
// (unsupported otherwise); fp8_row_scale: dim ≤ 128 (unsupported otherwise).
Status validate(const CacheRecordLayout& l);
// The view holds entries of the layout: validate(l), base non-null, entry_bytes equal, block_size ≥ 1,
// block_bytes ≥ block_size · entry_bytes. `name` names the view in messages ("" for an op's only cache).
Status validate_cache_view(std::string_view op, std::string_view name, const CacheView& v, const CacheRecordLayout& l);
// As above, for a cache of n_slots slots: n_slots a multiple of block_size whose byte extent fits int64
// (base may be null only when n_slots = 0).
Status validate_cache_view(std::string_view op, std::string_view name, const CacheView& v, const CacheRecordLayout& l,
                           int64_t n_slots);

// ---- addresses of an entry's parts (the layouts above, in one place) ----------------------------

// First byte of the entry's data: the plain row (f32, bf16), its e4m3 values (fp8 formats).
inline uint8_t* cache_record_data(const CacheView& v, const CacheRecordLayout& l, int64_t slot) {
    return v.block(slot) + (slot % v.block_size) * l.data_bytes();
}
// The entry's scales: fp8_row_scale one fp32 (4 bytes, possibly unaligned: access through memcpy);
// fp8_model1 scale_bytes() ue8m0 bytes (tiles, then zero padding); fp8_v32 n_groups() fp32 values;
// nullptr for f32 and bf16.
inline uint8_t* cache_record_scales(const CacheView& v, const CacheRecordLayout& l, int64_t slot) {
    if (l.scales_after_block_data())
        return v.block(slot) + v.block_size * l.data_bytes() + (slot % v.block_size) * l.scale_bytes();
    if (l.format == CacheRecordFormat::fp8_v32) return cache_record_data(v, l, slot) + l.quant_dim();
    return nullptr;
}
// The entry's bf16 tail (rope values) for fp8_model1 and fp8_v32; nullptr otherwise.
inline uint8_t* cache_record_bf16_tail(const CacheView& v, const CacheRecordLayout& l, int64_t slot) {
    switch (l.format) {
        case CacheRecordFormat::fp8_model1: return cache_record_data(v, l, slot) + l.quant_dim();
        case CacheRecordFormat::fp8_v32: return cache_record_data(v, l, slot) + l.quant_dim() + l.scale_bytes();
        default: return nullptr;
    }
}

}  // namespace sieve
