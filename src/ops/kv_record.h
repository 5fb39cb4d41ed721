// ops/kv_record.h — the entry formats of DeepSeek-V4's paged caches (sliding-window KV, compressed
// KV, indexer keys) and the two ops that write rows into them and read rows back
// (deepseek_v4.md §4.1, §4.3; exact profile §3.10).
//
// Formats (one entry = one cache row; `dim` values, the last `rope_dim` of them rotated):
//   f32         plain row of dim fp32 values, entry_bytes = 4·dim (the exact profile).
//   fp8_ds_mla  vLLM / FlashMLA "MODEL1_FP8Sparse" token record (§4.1). nope = dim − rope_dim dims
//               in FP8 e4m3 with one UE8M0 scale per tile of 64 nope dims (the last tile may be
//               partial when nope % 64 ≠ 0, as in small test models), rope dims in bf16:
//                 data_bytes  = nope + 2·rope_dim                      (576 for 448 + 64)
//                 scale_bytes = ⌈nope/64⌉ rounded up to a multiple of 8  (7 scales + 1 zero pad = 8)
//                 entry_bytes = data_bytes + scale_bytes                (584)
//               Laid out PER BLOCK, not per entry (block = cache.block_size entries):
//                 [0, bs·data_bytes)                   entry j's data at j·data_bytes: nope e4m3 bytes,
//                                                      then rope_dim little-endian bf16
//                 [bs·data_bytes, bs·entry_bytes)      entry j's scales at bs·data_bytes + j·scale_bytes:
//                                                      tile bytes (ue8m0), then zero padding
//   fp8_scaled  indexer key (§4.3): dim e4m3 bytes and ONE fp32 scale for the whole row,
//               entry_bytes = dim + 4, per block [bs·dim data][bs·4 scales] (132 B for dim 128).
//
// Store semantics (kv_store). For a row x (x_type values widened to fp32) and its slot s ≥ 0:
//   f32:         entry = x as fp32.
//   fp8_*:       v_i = bf16(x_i) first (round to nearest even; exact when x is bf16): the records hold
//                the bf16 row vLLM quantizes (§3.2 "bf16 round-trip + UE8M0 FP8 quant", §4.3 "bf16-rounded
//                post-RoPE key"). Then per group (a 64-dim nope tile for fp8_ds_mla, the whole row for
//                fp8_scaled), with amax = max |v_i| over the group:
//                  amax finite:  s = ue8m0_scale_for_amax(amax) = 2^⌈log2(max(amax, 1e-4)/448)⌉ (core/dtype.h;
//                                §2.4 [ref] clamp on amax), q_i = f32_to_fp8_e4m3(clamp(v_i / s, ±448))
//                                (RNE, subnormals kept: the same bytes as ops/quant_fp8.h)
//                  otherwise:    s = NaN (ue8m0 byte 0xFF), q_i = 0x7F | sign(v_i) — poisoned loudly, as
//                                ops/quant_fp8.h does.
//                fp8_ds_mla stores the ue8m0 byte log2(s) + 127 per tile and the rope dims as bf16 bits of
//                v_i; fp8_scaled stores s as an fp32 value.
//   A slot of −1 skips the row. Slots must be distinct (each entry written once) and address blocks of
//   the cache view (the runtime resolves them: kv/paged_cache.h). Bytes of an entry's block other than
//   that entry's data and scale bytes are not touched.
// Load semantics (kv_load): y[r] = the fp32 value of entry slots[r]:
//   f32: as stored; fp8_ds_mla: nope_i = e4m3(q_i) · 2^(e_tile − 127) (one fp32 product, exact),
//   rope_i = widen(bf16); fp8_scaled: e4m3(q_i) · s. A slot of −1 gives a row of zeros. The result is
//   cast to y_type once.
// Every backend writes and reads the same bytes (the conformance tests compare them).
#pragma once

#include <cstdint>
#include <string_view>

#include "core/dtype.h"
#include "core/status.h"
#include "ops/cache_view.h"

namespace sieve {

enum class KvRecordFormat : uint8_t { f32, fp8_ds_mla, fp8_scaled };
std::string_view kv_record_format_name(KvRecordFormat f);  // "f32", "fp8_ds_mla", "fp8_scaled"

inline constexpr int64_t kFp8DsMlaTile = 64;  // nope dims per UE8M0 scale (§2.4 "block 64", §4.1 7 tiles)

struct KvRecordLayout {
    KvRecordFormat format = KvRecordFormat::f32;
    int64_t dim = 0;       // values per row (head_dim, or index_head_dim for indexer keys)
    int64_t rope_dim = 0;  // fp8_ds_mla: the last rope_dim dims are stored as bf16; ignored otherwise

    int64_t nope_dim() const { return dim - rope_dim; }
    int64_t n_tiles() const { return (nope_dim() + kFp8DsMlaTile - 1) / kFp8DsMlaTile; }  // fp8_ds_mla
    // fp8_ds_mla: bytes of an entry's data part / scale part (see the file comment).
    int64_t data_bytes() const;
    int64_t scale_bytes() const;
    int64_t entry_bytes() const;  // bytes one entry takes in its block, all formats
};

// dim ≥ 1; fp8_ds_mla: dim and rope_dim even, 0 ≤ rope_dim ≤ dim.
Status validate(const KvRecordLayout& l);
// The view's geometry fits the layout: entry_bytes equal, block_size ≥ 1, block_bytes ≥ block_size·entry_bytes.
Status validate_cache_view(std::string_view op, std::string_view name, const CacheView& v, const KvRecordLayout& l);

struct KvStoreParams {
    const void* x = nullptr;         // [n_rows, dim], x_type; row r at x + r·x_row_stride (elements)
    const int32_t* slots = nullptr;  // [n_rows] global slots in `cache`, −1 = skip
    CacheView cache;                 // the layer's storage (entry_bytes = layout.entry_bytes())
    KvRecordLayout layout;
    int64_t n_rows = 0;
    int64_t x_row_stride = 0;        // elements, ≥ 0
    DType x_type = DType::f32;       // f32 | bf16
};
// validate never reads memory behind the pointers; check_indices reads index arrays and may only be
// called on host-readable memory (ops/op_common.h).
Status validate(const KvStoreParams& p);
// Every slot ≥ −1 (reads the n_rows slots).
Status check_indices(const KvStoreParams& p);

struct KvLoadParams {
    CacheView cache;
    KvRecordLayout layout;
    const int32_t* slots = nullptr;  // [n_rows], −1 = zeros
    void* y = nullptr;               // [n_rows, dim], y_type; row r at y + r·y_row_stride (elements)
    int64_t n_rows = 0;
    int64_t y_row_stride = 0;        // elements, ≥ dim when n_rows > 1
    DType y_type = DType::f32;       // f32 | bf16
};
// validate never reads memory behind the pointers; check_indices reads index arrays and may only be
// called on host-readable memory (ops/op_common.h).
Status validate(const KvLoadParams& p);
// Every slot ≥ −1 (reads the n_rows slots).
Status check_indices(const KvLoadParams& p);

// Address helpers every backend uses (the layout rule above, in one place).
inline uint8_t* kv_record_data(const CacheView& v, const KvRecordLayout& l, int64_t slot) {
    const int64_t j = slot % v.block_size;
    uint8_t* block = v.base + (slot / v.block_size) * v.block_bytes;
    switch (l.format) {
        case KvRecordFormat::f32: return block + j * 4 * l.dim;
        case KvRecordFormat::fp8_ds_mla: return block + j * l.data_bytes();
        case KvRecordFormat::fp8_scaled: return block + j * l.dim;
    }
    return block;
}
// fp8_ds_mla: the entry's ue8m0 tile bytes; fp8_scaled: its fp32 scale (4 bytes, unaligned access
// through memcpy); f32: nullptr.
inline uint8_t* kv_record_scales(const CacheView& v, const KvRecordLayout& l, int64_t slot) {
    const int64_t j = slot % v.block_size;
    uint8_t* block = v.base + (slot / v.block_size) * v.block_bytes;
    switch (l.format) {
        case KvRecordFormat::f32: return nullptr;
        case KvRecordFormat::fp8_ds_mla: return block + v.block_size * l.data_bytes() + j * l.scale_bytes();
        case KvRecordFormat::fp8_scaled: return block + v.block_size * l.dim + j * 4;
    }
    return nullptr;
}

}  // namespace sieve
