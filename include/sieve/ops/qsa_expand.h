// ops/qsa_expand.h — QSA's selected groups → the token positions main attention reads: whole
// selected groups, then the query's own incomplete group (the open tail), then −1 padding
// (specs/qsa.md §4.5, §4.6; test vectors §10).
//
// Semantics. For token t at request-relative position p = positions[t] in a request of seq_len
// L = seq_lens[t] (tokens after this step), with r = ratio and k = block_topk:
//   visible = min((p + 1) / r, L / r)               complete groups t may see (§4.5)
//   groups  = 0, 1, …, visible − 1                  when visible ≤ k: every group fits the budget and
//                                                   is taken without scoring (sel row t is not read);
//                                                   attention is then exactly dense (§4.5)
//           = sel[t, 0], …, sel[t, nb − 1]          otherwise: the row's entries ≥ 0, in row order
//                                                   (the top-k op's: ascending), nb ≤ k
//   out[t, c]                = groups[c / r] · r + c % r      for c < nb·r (whole groups)
//   tail_start               = ((p + 1) / r) · r              first position of the open group
//   out[t, nb·r + j]         = tail_start + j                 for j < (p + 1) − tail_start (0 … r − 1 tokens,
//                                                             p itself whenever the tail is not empty)
//   every other out[t, c]    = −1                             up to out_width
// Any produced value < 0 or ≥ L is written as −1 (§4.6). Valid entries are left-compacted; with an
// ascending sel row the whole row is ascending. out_count[t] (optional) = number of valid entries.
// A sel row must hold its valid entries first (distinct, each in [0, visible)), then −1.
#pragma once

#include <cstdint>

#include "sieve/core/status.h"

namespace sieve {

struct QsaExpandParams {
    const int32_t* sel = nullptr;        // [n_tokens, block_topk] selected groups (−1 padded), row t at sel + t·sel_row_stride
    const int64_t* positions = nullptr;  // [n_tokens] request-relative positions p
    const int64_t* seq_lens = nullptr;   // [n_tokens] L of each token's request (p < L)
    int32_t* out = nullptr;              // [n_tokens, out_width] token positions, row t at out + t·out_row_stride
    int32_t* out_count = nullptr;        // [n_tokens] or nullptr
    int64_t n_tokens = 0;
    int64_t ratio = 0;                   // r ≥ 1
    int64_t block_topk = 0;              // k = budget / r ≥ 1
    int64_t out_width = 0;               // ≥ k·r + r − 1 (budget + r − 1, §4.6)
    int64_t sel_row_stride = 0;          // elements, ≥ 0
    int64_t out_row_stride = 0;          // elements, ≥ out_width when n_tokens > 1
};

// Shapes, strides, outputs disjoint from the inputs and from each other.
// validate never reads memory behind the pointers; check_indices reads index arrays and may only be
// called on host-readable memory (ops/op_common.h).
Status validate(const QsaExpandParams& p);
// 0 ≤ p < L ≤ INT32_MAX for every token, sel present when some token selects and each read sel row well
// formed (see above); reads positions, seq_lens and the sel rows of the selecting tokens.
Status check_indices(const QsaExpandParams& p);

}  // namespace sieve
