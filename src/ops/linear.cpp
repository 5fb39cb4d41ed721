#include "sieve/ops/linear.h"

#include <limits>

#include "sieve/ops/op_common.h"

namespace sieve {

std::string_view linear_math_name(LinearMath m) {
    switch (m) {
        case LinearMath::f32: return "f32";
        case LinearMath::bf16: return "bf16";
    }
    return "?";
}

float linear_weight_value(const LinearWeights& w, int64_t o, int64_t i) {
    const int64_t src = o * w.weight_row_stride + i;
    float v = 0.0f;
    switch (w.weight_type) {
        case DType::bf16: v = bf16_to_f32(static_cast<const uint16_t*>(w.weight)[src]); break;
        case DType::f8_e4m3: {
            const int64_t n_kb = (w.in_features + kLinearFp8Block - 1) / kLinearFp8Block;
            v = fp8_e4m3_to_f32(static_cast<const uint8_t*>(w.weight)[src]) *
                w.block_scale[(o / kLinearFp8Block) * n_kb + i / kLinearFp8Block];
            break;
        }
        default: v = static_cast<const float*>(w.weight)[src]; break;
    }
    return w.math == LinearMath::bf16 ? round_to_bf16(v) : v;
}

Status validate(const LinearWeights& w) {
    constexpr std::string_view op = "linear weights";
    using namespace op_check;
    SIEVE_RETURN_IF_ERROR(require_dtype(op, "weight_type", w.weight_type, {DType::f32, DType::bf16, DType::f8_e4m3}));
    SIEVE_RETURN_IF_ERROR(require_dtype(op, "bias_type", w.bias_type, {DType::f32, DType::bf16}));
    if (w.math != LinearMath::f32 && w.math != LinearMath::bf16)
        return invalid_argument_error("{}: math = {} is not a LinearMath", op, static_cast<int>(w.math));
    SIEVE_RETURN_IF_ERROR(require_at_least(op, "out_features", w.out_features, 1));
    SIEVE_RETURN_IF_ERROR(require_at_least(op, "in_features", w.in_features, 1));
    SIEVE_RETURN_IF_ERROR(require_at_least(op, "groups", w.groups, 1));
    if (w.out_features % w.groups != 0)
        return invalid_argument_error("{}: out_features {} is not a multiple of groups {}", op, w.out_features, w.groups);
    if (w.groups > 1 && w.weight_type == DType::f8_e4m3 && (w.out_features / w.groups) % kLinearFp8Block != 0)
        return invalid_argument_error("{}: f8_e4m3 groups of {} rows: each group must be whole {}-row scale blocks", op,
                                      w.out_features / w.groups, kLinearFp8Block);
    if (w.in_features > std::numeric_limits<int64_t>::max() / w.groups)
        return invalid_argument_error("{}: groups {} · in_features {} overflows int64", op, w.groups, w.in_features);
    if (w.weight_row_stride < w.in_features)
        return invalid_argument_error("{}: weight_row_stride = {} < in_features {}", op, w.weight_row_stride,
                                      w.in_features);
    SIEVE_RETURN_IF_ERROR(require_ptr(op, "weight", w.weight));
    SIEVE_RETURN_IF_ERROR(rows_extent(op, "weight", {w.out_features, 1, w.in_features, w.weight_row_stride, 0},
                                      dtype_size(w.weight_type))
                              .status());
    if (w.weight_type == DType::f8_e4m3) {
        if (w.block_scale == nullptr)
            return invalid_argument_error("{}: f8_e4m3 weight [{}, {}] needs block_scale [{}, {}]", op, w.out_features,
                                          w.in_features, (w.out_features + kLinearFp8Block - 1) / kLinearFp8Block,
                                          (w.in_features + kLinearFp8Block - 1) / kLinearFp8Block);
    } else if (w.block_scale != nullptr) {
        return invalid_argument_error("{}: block_scale given for a {} weight (only f8_e4m3 has block scales)", op,
                                      dtype_name(w.weight_type));
    }
    return Status::ok();
}

Status validate(const LinearParams& p, int64_t in_features, int64_t out_features, bool check_pointers) {
    constexpr std::string_view op = "linear";
    using namespace op_check;
    SIEVE_RETURN_IF_ERROR(require_dtype(op, "x_type", p.x_type, {DType::f32, DType::bf16}));
    SIEVE_RETURN_IF_ERROR(require_dtype(op, "y_type", p.y_type, {DType::f32, DType::bf16}));
    SIEVE_RETURN_IF_ERROR(require_at_least(op, "n_tokens", p.n_tokens, 0));
    SIEVE_RETURN_IF_ERROR(require_at_least(op, "x_row_stride", p.x_row_stride, 0));
    if (p.n_tokens > 1 && p.y_row_stride < out_features)
        return invalid_argument_error("{}: y_row_stride = {} < out_features {}: output rows overlap", op,
                                      p.y_row_stride, out_features);
    SIEVE_ASSIGN_OR_RETURN(int64_t x_extent,
                           rows_extent(op, "x", {p.n_tokens, 1, in_features, p.x_row_stride, 0}, dtype_size(p.x_type)));
    SIEVE_ASSIGN_OR_RETURN(int64_t y_extent,
                           rows_extent(op, "y", {p.n_tokens, 1, out_features, p.y_row_stride, 0}, dtype_size(p.y_type)));
    if (!check_pointers || p.n_tokens == 0) return Status::ok();
    SIEVE_RETURN_IF_ERROR(require_ptr(op, "x", p.x));
    SIEVE_RETURN_IF_ERROR(require_ptr(op, "y", p.y));
    return require_same_or_disjoint(op, "x", p.x, x_extent * static_cast<int64_t>(dtype_size(p.x_type)), "y", p.y,
                                    y_extent * static_cast<int64_t>(dtype_size(p.y_type)), false);
}

}  // namespace sieve
