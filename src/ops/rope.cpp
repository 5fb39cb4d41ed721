#include "sieve/ops/rope.h"

#include <algorithm>
#include <cmath>
#include <numbers>

#include "sieve/ops/op_common.h"

namespace sieve {

namespace {

Status validate_frequency_config(const RopeFrequencyConfig& c) {
    constexpr std::string_view op = "rope_inv_freq";
    if (c.rot_dim < 2 || c.rot_dim % 2 != 0)
        return invalid_argument_error("{}: rot_dim = {}, expected an even number ≥ 2", op, c.rot_dim);
    if (!(c.base > 1.0) || !std::isfinite(c.base))
        return invalid_argument_error("{}: base = {}, expected finite and > 1", op, c.base);
    if (!c.yarn) return Status::ok();
    const RopeYarn& y = c.yarn_params;
    if (!(y.factor > 0.0) || !std::isfinite(y.factor))
        return invalid_argument_error("{}: yarn factor = {}, expected finite and > 0", op, y.factor);
    if (!(y.original_max_position > 0.0) || !std::isfinite(y.original_max_position))
        return invalid_argument_error("{}: yarn original_max_position = {}, expected finite and > 0", op,
                                      y.original_max_position);
    if (!(y.beta_fast > 0.0) || !(y.beta_slow > 0.0) || !std::isfinite(y.beta_fast) || !std::isfinite(y.beta_slow))
        return invalid_argument_error("{}: yarn beta_fast = {}, beta_slow = {}, expected finite and > 0", op,
                                      y.beta_fast, y.beta_slow);
    return Status::ok();
}

}  // namespace

Expected<RopeYarnRange> rope_yarn_range(const RopeFrequencyConfig& c) {
    SIEVE_RETURN_IF_ERROR(validate_frequency_config(c));
    if (!c.yarn) return invalid_argument_error("rope_yarn_range: the config has no YaRN");
    const RopeYarn& y = c.yarn_params;
    const double d = static_cast<double>(c.rot_dim);
    // corr(n) = D · ln(L0 / (n · 2π)) / (2 · ln base)   (deepseek_v4.md §2.3, in double as Python's math)
    auto corr = [&](double n_rot) {
        return d * std::log(y.original_max_position / (n_rot * 2.0 * std::numbers::pi)) / (2.0 * std::log(c.base));
    };
    double low = corr(y.beta_fast), high = corr(y.beta_slow);
    if (y.truncate) {
        low = std::floor(low);
        high = std::ceil(high);
    }
    low = std::max(low, 0.0);
    high = std::min(high, d - 1.0);  // clamped to D − 1, not D/2 − 1 (deepseek_v4.md §2.3)
    if (low == high) high += 0.001;  // avoid a division by zero in the ramp (deepseek_v4.md §2.3)
    return RopeYarnRange{low, high};
}

Status rope_inv_freq(const RopeFrequencyConfig& c, float* inv_freq) {
    SIEVE_RETURN_IF_ERROR(validate_frequency_config(c));
    if (inv_freq == nullptr) return invalid_argument_error("rope_inv_freq: inv_freq is null");
    const int64_t half = c.rot_dim / 2;
    const float base = static_cast<float>(c.base);
    const float dim = static_cast<float>(c.rot_dim);
    RopeYarnRange range;
    if (c.yarn) {
        SIEVE_ASSIGN_OR_RETURN(range, rope_yarn_range(c));
    }
    const float factor = static_cast<float>(c.yarn_params.factor);
    const float low = static_cast<float>(range.low);
    const float span = static_cast<float>(range.high - range.low);  // Python computes max − min in double
    for (int64_t i = 0; i < half; ++i) {
        const float p = std::pow(base, static_cast<float>(2 * i) / dim);  // fp32, as torch
        const float extrapolation = 1.0f / p;
        if (!c.yarn) {
            inv_freq[i] = extrapolation;
            continue;
        }
        const float interpolation = 1.0f / (factor * p);
        const float ramp = std::clamp((static_cast<float>(i) - low) / span, 0.0f, 1.0f);
        const float extra = 1.0f - ramp;  // transformers' inv_freq_extrapolation_factor
        inv_freq[i] = interpolation * (1.0f - extra) + extrapolation * extra;
    }
    return Status::ok();
}

double rope_yarn_mscale(double factor, double mscale) {
    if (factor <= 1.0) return 1.0;
    return 0.1 * mscale * std::log(factor) + 1.0;
}

void rope_cos_sin(int64_t position, const float* inv_freq, int64_t n_freq, float attention_factor,
                  float* cos_out, float* sin_out) {
    const float pos = static_cast<float>(position);  // torch `positions.float()`: rounds above 2^24
    for (int64_t i = 0; i < n_freq; ++i) {
        const float angle = pos * inv_freq[i];  // fp32 product (ops/rope.h)
        // cos/sin of the widened angle in double, rounded once to fp32 (ops/rope.h): reproducible by the CUDA
        // backend's double cos/sin (backends/cuda/row_rope.cuh), which glibc's cosf/sinf are not.
        const double a = static_cast<double>(angle);
        cos_out[i] = static_cast<float>(std::cos(a)) * attention_factor;
        sin_out[i] = static_cast<float>(std::sin(a)) * attention_factor;
    }
}

Status validate(const RopeParams& p) {
    constexpr std::string_view op = "rope";
    using namespace op_check;
    SIEVE_RETURN_IF_ERROR(require_dtype(op, "x_type", p.x_type, {DType::f32, DType::bf16}));
    SIEVE_RETURN_IF_ERROR(require_dtype(op, "y_type", p.y_type, {DType::f32, DType::bf16}));
    SIEVE_RETURN_IF_ERROR(require_dtype(op, "positions_type", p.positions_type, {DType::i64, DType::i32}));
    SIEVE_RETURN_IF_ERROR(require_at_least(op, "head_dim", p.head_dim, 1));
    if (p.rot_dim < 2 || p.rot_dim % 2 != 0 || p.rot_dim > p.head_dim)
        return invalid_argument_error("{}: rot_dim = {}, expected even, ≥ 2 and ≤ head_dim {}", op, p.rot_dim,
                                      p.head_dim);
    if (p.pairing != RopePairing::interleaved && p.pairing != RopePairing::half_split)
        return invalid_argument_error("{}: pairing = {} is not a RopePairing", op, static_cast<int>(p.pairing));
    if (p.slice != RopeSlice::first && p.slice != RopeSlice::last)
        return invalid_argument_error("{}: slice = {} is not a RopeSlice", op, static_cast<int>(p.slice));
    if (!std::isfinite(p.attention_factor))
        return invalid_argument_error("{}: attention_factor = {}, expected finite", op, p.attention_factor);
    const RowsLayout xl{p.n_tokens, p.n_heads, p.head_dim, p.x_token_stride, p.x_head_stride};
    const RowsLayout yl{p.n_tokens, p.n_heads, p.head_dim, p.y_token_stride, p.y_head_stride};
    SIEVE_ASSIGN_OR_RETURN(int64_t x_extent, rows_extent(op, "x", xl, dtype_size(p.x_type)));
    SIEVE_ASSIGN_OR_RETURN(int64_t y_extent, output_rows_extent(op, "y", yl, dtype_size(p.y_type)));
    SIEVE_RETURN_IF_ERROR(require_ptr(op, "inv_freq", p.inv_freq));
    if (x_extent == 0) return Status::ok();
    SIEVE_RETURN_IF_ERROR(require_ptr(op, "x", p.x));
    SIEVE_RETURN_IF_ERROR(require_ptr(op, "y", p.y));
    SIEVE_RETURN_IF_ERROR(require_ptr(op, "positions", p.positions));
    const bool same_view = p.x_type == p.y_type && p.x_token_stride == p.y_token_stride &&
                           p.x_head_stride == p.y_head_stride;
    return require_same_or_disjoint(op, "x", p.x, x_extent * static_cast<int64_t>(dtype_size(p.x_type)), "y", p.y,
                                    y_extent * static_cast<int64_t>(dtype_size(p.y_type)), same_view);
}

}  // namespace sieve
