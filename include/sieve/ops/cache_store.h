// ops/cache_store.h — writes rows into the entries of a paged cache, in any format of
// ops/cache_record.h: DeepSeek-V4's window, compressed and indexer-key caches (deepseek_v4.md §4.1,
// §4.3), DSA's latent and indexer-key caches (dsa_mla.md §3.3, §3.4) and QSA's K|V, raw-key ring and
// compressed-key caches (qsa.md §5.1–§5.3).
//
// Semantics. Row r holds dim values x[r, i] (x_type widened to fp32) and goes to entry s = slots[r]:
// s = −1 skips the row. For the plain formats the row is a sub-row of the entry:
//   f32:   value entry_offset + i of the entry = x[r, i] (exact).
//   bf16:  value entry_offset + i of the entry = bf16(x[r, i]) (round to nearest even, NaN kept quiet with
//          its sign; exact when x is bf16).
// The other values of the entry are not touched: QSA stores the K and V heads of its [Hkv, 2, D] entries
// as 2·Hkv sub-rows of D values (K of kv head g at entry_offset 2g·D, V at (2g + 1)·D).
// For the fp8 formats the row is the whole entry (dim = layout.dim, entry_offset = 0):
//   v_i = bf16(x[r, i]) when round_bf16, else x[r, i]. DeepSeek-V4 rounds (§3.2 "bf16 round-trip + UE8M0
//         FP8 quant", §4.3 "bf16-rounded post-RoPE key": vLLM quantizes the bf16 row); DSA does not (its
//         rows are quantized as the op gets them, dsa_mla.md §3.3, §3.4). The flag changes nothing for bf16 x.
//   The first quant_dim values are quantized per group of layout.group_size() (fp8_model1's last group
//   may be shorter) by ops/quant_fp8.h's rule, with amax = max |v_i| over the group:
//     amax finite: s = ue8m0_scale_for_amax(amax) = 2^⌈log2(max(amax, 1e-4)/448)⌉ (core/dtype.h),
//                  q_i = f32_to_fp8_e4m3(clamp(v_i / s, ±448)) (RNE, subnormals kept)
//     otherwise:   s = NaN, q_i = 0x7F | sign(v_i): the group is poisoned loudly.
//   The scale is stored as a ue8m0 byte log2(s) + 127 (0xFF for NaN) for fp8_model1, followed by zero
//   padding bytes up to scale_bytes; as an fp32 value for fp8_row_scale and fp8_v32. The bf16 tail
//   (rope_dim values of fp8_model1 and fp8_v32) holds the bf16 bits of v_i.
//   The bytes are those of ops/quant_fp8.h with group_size = the group (on the bf16-rounded row when
//   round_bf16).
// Bytes of a slot's block other than its entry's parts (data, scales, tail) are never touched. Slots of
// one call must be distinct (each entry written once; the caller's invariant, not checked: it would need
// memory). Every backend writes the same bytes (tests/ops/cache_store_test.cpp compares them).
#pragma once

#include <cstdint>

#include "sieve/core/dtype.h"
#include "sieve/core/status.h"
#include "sieve/ops/cache_record.h"
#include "sieve/ops/cache_view.h"

namespace sieve {

struct CacheStoreParams {
    const void* x = nullptr;         // [n_rows, dim], x_type; row r at x + r·x_row_stride (elements)
    const int32_t* slots = nullptr;  // [n_rows] global slots in `cache` (kv/paged_cache.h), −1 = skip
    CacheView cache;                 // the layer's storage; entry_bytes = layout.entry_bytes()
    CacheRecordLayout layout;
    int64_t n_slots = 0;             // slots of the cache (num_blocks · block_size): every slot < n_slots
    int64_t n_rows = 0;
    int64_t dim = 0;                 // values per row: layout.dim for the fp8 formats; plain formats ≥ 1
    int64_t entry_offset = 0;        // plain formats: the first entry value written (elements of the entry's
                                     //   dtype), entry_offset + dim ≤ layout.dim; fp8 formats: 0
    int64_t x_row_stride = 0;        // elements, ≥ 0
    bool round_bf16 = false;         // fp8 formats: quantize bf16(x) (DeepSeek-V4) instead of x (DSA)
    DType x_type = DType::f32;       // f32 | bf16
};

// The store of whole rows x [n_rows, layout.dim] (row stride x_row_stride elements, x_type) into entries
// `slots` [n_rows] of `cache` (n_slots slots): the params every family starts from; a sub-row store sets
// dim and entry_offset, DeepSeek-V4 sets round_bf16.
CacheStoreParams whole_row_store(const void* x, DType x_type, int64_t x_row_stride, int64_t n_rows,
                                 const int32_t* slots, const CacheView& cache, int64_t n_slots,
                                 const CacheRecordLayout& layout);

// Dtypes, sizes, the row layout of x (int64 overflow), the cache view against the layout and n_slots, the
// sub-row inside the entry, x disjoint from the cache storage.
// validate never reads memory behind the pointers; check_indices reads index arrays and may only be
// called on host-readable memory (ops/op_common.h).
Status validate(const CacheStoreParams& p);
// Every slot in [−1, n_slots) (reads the n_rows slots).
Status check_indices(const CacheStoreParams& p);

}  // namespace sieve
