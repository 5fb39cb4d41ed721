// ops/kv_load.h — reads entries of a paged cache back as rows, in any format of ops/cache_record.h:
// the dequantization every attention and indexer op applies to the entries it reads
// (ops/sparse_attention.h, ops/indexer_scores.h, ops/dsa_indexer.h), as an op of its own for tests and tools.
//
// Semantics: y[r] = the dim values of entry slots[r] as fp32, then cast to y_type once:
//   f32: as stored; bf16: widened (exact);
//   fp8_row_scale: e4m3(q_i) · s (s the row's fp32 scale);
//   fp8_model1: e4m3(q_i) · 2^(e_tile − 127) (ue8m0 byte e_tile of value i's 64-value tile; one fp32
//               product, exact), the bf16 tail widened;
//   fp8_v32: e4m3(q_i) · scale[i / g] (one fp32 product), the bf16 tail widened.
// A slot of −1 gives a row of zeros. Every backend returns the same values (no reduction).
#pragma once

#include <cstdint>

#include "sieve/core/dtype.h"
#include "sieve/core/status.h"
#include "sieve/ops/cache_record.h"
#include "sieve/ops/cache_view.h"

namespace sieve {

struct KvLoadParams {
    CacheView cache;
    CacheRecordLayout layout;
    const int32_t* slots = nullptr;  // [n_rows], −1 = zeros
    void* y = nullptr;               // [n_rows, layout.dim], y_type; row r at y + r·y_row_stride (elements)
    int64_t n_rows = 0;
    int64_t y_row_stride = 0;        // elements, ≥ dim when n_rows > 1
    DType y_type = DType::f32;       // f32 | bf16
};
// validate never reads memory behind the pointers; check_indices reads index arrays and may only be
// called on host-readable memory (ops/op_common.h).
Status validate(const KvLoadParams& p);
// Every slot ≥ −1 (reads the n_rows slots).
Status check_indices(const KvLoadParams& p);

}  // namespace sieve
