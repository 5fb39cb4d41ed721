// ops/topk.h — row-wise top-k selection over f32 scores (the indexer's selection: deepseek_v4.md
// §3.6, dsa_mla.md §2.7, qsa.md §4.5).
//
// Semantics ("Decisions for sieve", Top-k, in every family spec). For row r, the candidates are the
// column indices c ∈ [0, valid_len[r]) (all n_cols when valid_len is nullptr). Candidates are ranked by
// score, highest first, with
//   * equal scores ordered by the LOWER index first (−0.0 and +0.0 are equal);
//   * NaN ranked below every number, −inf included (sieve's choice: a NaN score is never picked before
//     any non-NaN candidate; NaNs among themselves again by lower index).
// The picks are the first min(k, valid_len[r]) candidates of that ranking. Output row r holds the picks
// in ASCENDING INDEX order, then −1 up to width k. Any k ≥ 1, also k > n_cols (never hard-coded).
// Optionally out_count[r] = number of picks. The result is a function of the input alone: every backend
// returns the same indices.
#pragma once

#include <cstdint>

#include "sieve/core/status.h"

namespace sieve {

struct TopkParams {
    const float* scores = nullptr;       // [n_rows, n_cols], row r at scores + r·scores_row_stride
    const int32_t* valid_len = nullptr;  // [n_rows], each in [0, n_cols]; nullptr = n_cols for every row
    int32_t* out = nullptr;              // [n_rows, k], row r at out + r·out_row_stride
    int32_t* out_count = nullptr;        // [n_rows] or nullptr
    int64_t n_rows = 0, n_cols = 0, k = 0;
    int64_t scores_row_stride = 0;       // elements, ≥ 0 (0 repeats one row)
    int64_t out_row_stride = 0;          // elements, ≥ k when n_rows > 1
};

// Shapes, strides, n_cols ≤ INT32_MAX (indices are int32), outputs disjoint from the inputs and from
// each other.
// validate never reads memory behind the pointers; check_indices reads index arrays and may only be
// called on host-readable memory (ops/op_common.h).
Status validate(const TopkParams& p);
// Every valid_len[r] in [0, n_cols] (reads the n_rows values).
Status check_indices(const TopkParams& p);

}  // namespace sieve
