// ref index scores: the formulas of ops/dsa_indexer.h, one key at a time, sums
// in double.
#include <algorithm>
#include <cstring>
#include <limits>
#include <vector>

#include "backends/ref/dsa_ref_ops.h"
#include "backends/ref/ref_ops.h"
#include "ops/op_common.h"

namespace sieve::ref {

Status dsa_indexer_scores(const DsaIndexerScoresParams& p) {
    SIEVE_RETURN_IF_ERROR(validate_and_check_indices(p));
    const int64_t d = p.head_dim;
    const bool fp8 = p.format == CacheRecordFormat::fp8_row_scale;
    const CacheRecordLayout layout = p.key_layout();
    std::vector<double> key(static_cast<size_t>(d)), q(static_cast<size_t>(p.n_heads * d)), w(static_cast<size_t>(p.n_heads));
    // The fused selection is the plain top-k over this backend's scores (a full row: ref is the oracle).
    std::vector<float> own_scores;
    int64_t scores_row_stride = p.scores_row_stride;
    float* scores = indexer_score_rows(p.scores, &scores_row_stride, p.selected != nullptr, p.n_tokens, p.n_cols, own_scores);
    for (int64_t t = 0; t < p.n_tokens; ++t) {
        for (int64_t j = 0; j < p.n_heads; ++j) {
            // Head weight with every scale folded in (ops/dsa_indexer.h).
            double wj = static_cast<double>(p.weights[t * p.weights_token_stride + j]) * p.weight_scale;
            if (fp8) wj *= p.q_scale[t * p.q_scale_token_stride + j];
            w[j] = wj;
            for (int64_t i = 0; i < d; ++i) {
                const int64_t o = t * p.q_token_stride + j * p.q_head_stride + i;
                q[j * d + i] = fp8 ? fp8_e4m3_to_f32(static_cast<const uint8_t*>(p.q)[o])
                                   : static_cast<const float*>(p.q)[o];
            }
        }
        const int32_t n_keys = p.n_keys[t];
        const int32_t* table = p.block_table + static_cast<int64_t>(p.token_seq[t]) * p.block_table_stride;
        float* out = scores + t * scores_row_stride;
        for (int64_t u = 0; u < n_keys; ++u) {
            const int64_t slot = static_cast<int64_t>(table[u / p.keys.block_size]) * p.keys.block_size + u % p.keys.block_size;
            double k_scale = 1.0;
            if (fp8) {
                const uint8_t* kv = cache_record_data(p.keys, layout, slot);
                float s;
                std::memcpy(&s, cache_record_scales(p.keys, layout, slot), 4);
                k_scale = s;
                for (int64_t i = 0; i < d; ++i) key[i] = fp8_e4m3_to_f32(kv[i]);
            } else {
                const float* kv = reinterpret_cast<const float*>(p.keys.row(slot));
                for (int64_t i = 0; i < d; ++i) key[i] = kv[i];
            }
            double sum = 0.0;
            for (int64_t j = 0; j < p.n_heads; ++j) {
                double dot = 0.0;
                for (int64_t i = 0; i < d; ++i) dot += q[j * d + i] * key[i];
                sum += w[j] * std::max(dot, 0.0);
            }
            out[u] = static_cast<float>(k_scale * sum);
        }
        for (int64_t u = n_keys; u < p.n_cols; ++u) out[u] = -std::numeric_limits<float>::infinity();
    }
    if (p.selected == nullptr || p.n_tokens == 0) return Status::ok();
    return select_from_scores(scores, scores_row_stride, p.n_keys, p.n_tokens, p.n_cols, p.selected, p.k,
                              p.selected_row_stride);
}

}  // namespace sieve::ref
