// ref top-k: sort the candidates by the ranking of ops/topk.h, keep the first k, sort by index.
#include <algorithm>
#include <cmath>

#include "backends/ref/ref_ops.h"
#include "sieve/ops/op_common.h"
#include "sieve/ops/topk.h"

namespace sieve::ref {

namespace {

// True when candidate (a, ia) ranks before (b, ib): higher score first, NaN last, ties to the lower index.
bool ranks_before(float a, int32_t ia, float b, int32_t ib) {
    const bool a_nan = std::isnan(a), b_nan = std::isnan(b);
    if (a_nan != b_nan) return b_nan;
    if (!a_nan && a != b) return a > b;  // −0.0 == +0.0 falls through to the index
    return ia < ib;
}

}  // namespace

Status topk(const TopkParams& p) {
    SIEVE_RETURN_IF_ERROR(validate_and_check_indices(p));
    std::vector<int32_t> order;
    for (int64_t r = 0; r < p.n_rows; ++r) {
        const float* s = p.scores + r * p.scores_row_stride;
        const int32_t n = p.valid_len ? p.valid_len[r] : static_cast<int32_t>(p.n_cols);
        order.resize(static_cast<size_t>(n));
        for (int32_t i = 0; i < n; ++i) order[static_cast<size_t>(i)] = i;
        std::sort(order.begin(), order.end(), [s](int32_t a, int32_t b) { return ranks_before(s[a], a, s[b], b); });
        const int64_t picks = std::min<int64_t>(p.k, n);
        std::sort(order.begin(), order.begin() + picks);
        int32_t* out = p.out + r * p.out_row_stride;
        for (int64_t j = 0; j < p.k; ++j) out[j] = j < picks ? order[static_cast<size_t>(j)] : -1;
        if (p.out_count) p.out_count[r] = static_cast<int32_t>(picks);
    }
    return Status::ok();
}

Status select_from_scores(const float* scores, int64_t scores_row_stride, const int32_t* n_keys, int64_t n_rows,
                          int64_t n_cols, int32_t* selected, int64_t k, int64_t selected_row_stride) {
    TopkParams p;
    p.scores = scores;
    p.valid_len = n_keys;
    p.out = selected;
    p.n_rows = n_rows;
    p.n_cols = n_cols;
    p.k = k;
    p.scores_row_stride = scores_row_stride;
    p.out_row_stride = selected_row_stride;
    return topk(p);
}

float* indexer_score_rows(float* scores, int64_t* row_stride, bool selecting, int64_t n_rows, int64_t n_cols,
                          std::vector<float>& own) {
    if (scores != nullptr || !selecting) return scores;
    own.resize(static_cast<size_t>(std::max<int64_t>(n_rows * n_cols, 1)));
    *row_stride = n_cols;
    return own.data();
}

}  // namespace sieve::ref
