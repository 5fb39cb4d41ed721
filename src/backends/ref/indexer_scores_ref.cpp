// ref indexer scores (ops/indexer_scores.h): Σ_h w_h · ReLU(<q_h, K_j>) in double, key by key.
#include <algorithm>
#include <cmath>
#include <vector>

#include "backends/ref/ref_ops.h"
#include "backends/ref/ref_ops_dsv4.h"
#include "ops/op_common.h"

namespace sieve::ref {

Status indexer_scores(const IndexerScoresParams& p) {
    SIEVE_RETURN_IF_ERROR(validate_and_check_indices(p));
    const int64_t d = p.head_dim;
    std::vector<float> key(static_cast<size_t>(d));
    // The fused selection is the plain top-k over this backend's scores (a full row: ref is the oracle).
    std::vector<float> own_scores;
    int64_t scores_row_stride = p.scores_row_stride;
    float* scores = indexer_score_rows(p.scores, &scores_row_stride, p.selected != nullptr, p.n_tokens, p.max_keys, own_scores);
    for (int64_t t = 0; t < p.n_tokens; ++t) {
        const int32_t* slots = p.key_slots + static_cast<int64_t>(p.token_list[t]) * p.key_slots_stride;
        for (int64_t j = 0; j < p.n_keys[t]; ++j) {
            float* out = scores + t * scores_row_stride + j;
            if (slots[j] < 0) {
                *out = -INFINITY;
                continue;
            }
            load_record(p.keys, p.key_layout(), slots[j], key.data());
            double score = 0.0;
            for (int64_t h = 0; h < p.n_heads; ++h) {
                double dot = 0.0;
                for (int64_t i = 0; i < d; ++i)
                    dot += static_cast<double>(load(p.q, p.q_type, t * p.q_token_stride + h * p.q_head_stride + i)) *
                           key[static_cast<size_t>(i)];
                score += static_cast<double>(p.weights[t * p.weights_row_stride + h] * p.weight_scale) * std::max(dot, 0.0);
            }
            *out = static_cast<float>(score);
        }
    }
    if (p.selected == nullptr || p.n_tokens == 0) return Status::ok();
    return select_from_scores(scores, scores_row_stride, p.n_keys, p.n_tokens, p.max_keys, p.selected, p.k,
                              p.selected_row_stride);
}

}  // namespace sieve::ref
