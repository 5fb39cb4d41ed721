// ops/qsa_pool.h — QSA's group pooling: the mean of the raw index keys of each completed group
// (specs/qsa.md §4.3, §9 item 1). The k_layernorm and the RoPE at the group's first position that
// follow are the rms_norm (one_plus) and rope ops.
//
// Semantics. For group row g ∈ [0, n_groups) and dim i ∈ [0, head_dim):
//   sum        = Σ_{j=0..ratio−1} key_j[i]     fp32, sequentially in member order j = 0, 1, …, ratio − 1
//   pooled[g,i] = sum / ratio                  one fp32 division (a true mean, §4.3: "use the mean")
//   out[g, i]  = cast(pooled[g, i], out_type)  bf16: round to nearest even (§4.3: "rounded to BF16")
// where key_j is the [head_dim] row of key_type stored at keys.row(member_slots[g·ratio + j]): the
// raw-key cache (§5.2), whose entries are one token's UNNORMALIZED, unrotated raw index key (§4.2).
// The summation order is fixed, so every backend produces the same bits.
#pragma once

#include <cstdint>

#include "sieve/core/dtype.h"
#include "sieve/core/status.h"
#include "sieve/ops/cache_view.h"

namespace sieve {

struct QsaPoolParams {
    CacheView keys;                       // raw index keys, one entry = [head_dim] of key_type (row layout)
    const int64_t* member_slots = nullptr; // [n_groups, ratio] global slots of keys (≥ 0), group members in order
    void* out = nullptr;                  // [n_groups, head_dim] out_type, row g at out + g·out_row_stride
    int64_t n_groups = 0;
    int64_t ratio = 0;                    // r = indexer_compress_ratio, ≥ 1
    int64_t head_dim = 0;                 // Di, ≥ 1
    int64_t out_row_stride = 0;           // elements, ≥ head_dim when n_groups > 1
    DType key_type = DType::f32;          // f32 | bf16
    DType out_type = DType::f32;          // f32 | bf16
};

// Shapes, dtypes, the cache entry holding head_dim keys, the output disjoint from the slot list.
// validate never reads memory behind the pointers; check_indices reads index arrays and may only be
// called on host-readable memory (ops/op_common.h).
Status validate(const QsaPoolParams& p);
// Every member slot ≥ 0 (reads them all).
Status check_indices(const QsaPoolParams& p);

}  // namespace sieve
