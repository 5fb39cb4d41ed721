// ref RMSNorm and LayerNorm: double sums, then the fp32 formulas of ops/rms_norm.h and ops/layer_norm.h.
#include <algorithm>
#include <cmath>

#include "backends/ref/ref_ops.h"
#include "sieve/ops/layer_norm.h"
#include "sieve/ops/op_common.h"
#include "sieve/ops/rms_norm.h"

namespace sieve::ref {

Status rms_norm(const RmsNormParams& p) {
    SIEVE_RETURN_IF_ERROR(validate_and_check_indices(p));
    for (int64_t t = 0; t < p.n_tokens; ++t) {
        for (int64_t h = 0; h < p.n_heads; ++h) {
            const int64_t xo = t * p.x_token_stride + h * p.x_head_stride;
            const int64_t yo = t * p.y_token_stride + h * p.y_head_stride;
            double sum_sq = 0.0;
            for (int64_t i = 0; i < p.dim; ++i) {
                const double v = load(p.x, p.x_type, xo + i);
                sum_sq += v * v;
            }
            const float ms = static_cast<float>(sum_sq / static_cast<double>(p.dim));
            const float inv = 1.0f / std::sqrt(ms + p.eps);
            for (int64_t i = 0; i < p.dim; ++i) {
                float g = 1.0f;
                if (p.weight_mode == RmsNormWeight::multiply) g = p.weight[i];
                if (p.weight_mode == RmsNormWeight::one_plus) g = 1.0f + p.weight[i];
                store(p.y, p.y_type, yo + i, (load(p.x, p.x_type, xo + i) * inv) * g);
            }
        }
    }
    return Status::ok();
}

Status layer_norm(const LayerNormParams& p) {
    SIEVE_RETURN_IF_ERROR(validate_and_check_indices(p));
    for (int64_t t = 0; t < p.n_tokens; ++t) {
        for (int64_t h = 0; h < p.n_heads; ++h) {
            const int64_t xo = t * p.x_token_stride + h * p.x_head_stride;
            const int64_t yo = t * p.y_token_stride + h * p.y_head_stride;
            double sum = 0.0;
            for (int64_t i = 0; i < p.dim; ++i) sum += load(p.x, p.x_type, xo + i);
            const double mean_d = sum / static_cast<double>(p.dim);
            double sum_sq = 0.0;
            for (int64_t i = 0; i < p.dim; ++i) {
                const double d = load(p.x, p.x_type, xo + i) - mean_d;
                sum_sq += d * d;
            }
            const float mean = static_cast<float>(mean_d);
            const float inv = 1.0f / std::sqrt(static_cast<float>(sum_sq / static_cast<double>(p.dim)) + p.eps);
            for (int64_t i = 0; i < p.dim; ++i) {
                float v = (load(p.x, p.x_type, xo + i) - mean) * inv;
                if (p.weight) v *= p.weight[i];
                if (p.bias) v += p.bias[i];
                store(p.y, p.y_type, yo + i, v);
            }
        }
    }
    return Status::ok();
}

}  // namespace sieve::ref
