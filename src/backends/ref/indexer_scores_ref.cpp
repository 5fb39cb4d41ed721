// ref indexer scores (ops/indexer_scores.h): s_j · Σ_h w_h · ReLU(<q_h, v_j>) in double, key by key, one
// rounding.
#include <cstring>
#include <vector>

#include "backends/ref/ref_ops.h"
#include "sieve/ops/cache_record.h"
#include "sieve/ops/indexer_scores.h"
#include "sieve/ops/op_common.h"

namespace sieve::ref {

namespace {

// Element i of q as its exact value (f32, bf16 widened, or e4m3).
double q_value(const IndexerScoresParams& p, int64_t i) {
    if (p.q_type == DType::f8_e4m3) return fp8_e4m3_to_f32(static_cast<const uint8_t*>(p.q)[i]);
    return load(p.q, p.q_type, i);
}

}  // namespace

Status indexer_scores(const IndexerScoresParams& p) {
    SIEVE_RETURN_IF_ERROR(validate_and_check_indices(p));
    const int64_t d = p.head_dim;
    const CacheRecordLayout layout = p.key_layout();
    std::vector<double> key(static_cast<size_t>(d)), q(static_cast<size_t>(p.n_heads * d)), w(static_cast<size_t>(p.n_heads));
    // The fused selection is the plain top-k over this backend's scores (a full row: ref is the oracle).
    std::vector<float> own_scores;
    int64_t scores_row_stride = p.scores_row_stride;
    float* scores = indexer_score_rows(p.scores, &scores_row_stride, p.selected != nullptr, p.n_tokens, p.n_cols, own_scores);
    for (int64_t t = 0; t < p.n_tokens; ++t) {
        const int32_t n_keys = p.n_keys[t];
        if (n_keys == 0) continue;
        for (int64_t h = 0; h < p.n_heads; ++h) {
            // The head weight, rounded in fp32 as the contract states.
            float wh = p.weights != nullptr ? p.weights[t * p.weights_token_stride + h] * p.weight_scale : p.weight_scale;
            if (p.q_type == DType::f8_e4m3) wh = wh * p.q_scale[t * p.q_scale_token_stride + h];
            w[static_cast<size_t>(h)] = wh;
            for (int64_t i = 0; i < d; ++i) q[static_cast<size_t>(h * d + i)] = q_value(p, t * p.q_token_stride + h * p.q_head_stride + i);
        }
        const int32_t* row = p.tables.block_table + static_cast<int64_t>(p.tables.token_request[t]) * p.tables.block_table_stride;
        float* out = scores + t * scores_row_stride;
        for (int64_t j = 0; j < n_keys; ++j) {
            const int64_t slot = paged_slot(row, j, p.keys.block_size);
            const uint8_t* data = cache_record_data(p.keys, layout, slot);
            double k_scale = 1.0;
            if (p.key_format == CacheRecordFormat::fp8_row_scale) {
                float s;
                std::memcpy(&s, cache_record_scales(p.keys, layout, slot), 4);
                k_scale = s;
                for (int64_t i = 0; i < d; ++i) key[static_cast<size_t>(i)] = fp8_e4m3_to_f32(data[i]);
            } else {
                const DType kt = p.key_format == CacheRecordFormat::bf16 ? DType::bf16 : DType::f32;
                for (int64_t i = 0; i < d; ++i) key[static_cast<size_t>(i)] = load(data, kt, i);
            }
            double sum = 0.0;
            for (int64_t h = 0; h < p.n_heads; ++h) {
                double dot = 0.0;
                for (int64_t i = 0; i < d; ++i) dot += q[static_cast<size_t>(h * d + i)] * key[static_cast<size_t>(i)];
                sum += w[static_cast<size_t>(h)] * (dot > 0.0 ? dot : 0.0);  // ReLU; a NaN dot counts 0
            }
            out[j] = static_cast<float>(k_scale * sum);
        }
    }
    if (p.selected == nullptr || p.n_tokens == 0) return Status::ok();
    return select_from_scores(scores, scores_row_stride, p.n_keys, p.n_tokens, p.n_cols, p.selected, p.k,
                              p.selected_row_stride);
}

}  // namespace sieve::ref
