// ref linear: dequantize once at prepare, then a double-accumulated dot product per output.
#include "backends/ref/ref_ops.h"
#include "sieve/ops/op_common.h"

namespace sieve::ref {

Expected<std::unique_ptr<PreparedLinear>> linear_prepare(const LinearWeights& w) {
    SIEVE_RETURN_IF_ERROR(validate_and_check_indices(w));
    const int64_t n_out = w.out_features, n_in = w.in_features;
    std::vector<float> weight(static_cast<size_t>(n_out * n_in));
    for (int64_t o = 0; o < n_out; ++o) {
        for (int64_t i = 0; i < n_in; ++i) {
            const int64_t src = o * w.weight_row_stride + i;
            float v = 0.0f;
            switch (w.weight_type) {
                case DType::f32: v = static_cast<const float*>(w.weight)[src]; break;
                case DType::bf16: v = bf16_to_f32(static_cast<const uint16_t*>(w.weight)[src]); break;
                case DType::f8_e4m3: {
                    // W[o, i] = e4m3(w) · block_scale[⌊o/128⌋, ⌊i/128⌋] (ops/linear.h)
                    const int64_t n_kb = (n_in + kLinearFp8Block - 1) / kLinearFp8Block;
                    const float s = w.block_scale[(o / kLinearFp8Block) * n_kb + i / kLinearFp8Block];
                    v = fp8_e4m3_to_f32(static_cast<const uint8_t*>(w.weight)[src]) * s;
                    break;
                }
                default: return internal_error("ref linear_prepare: weight_type {}", dtype_name(w.weight_type));
            }
            if (w.math == LinearMath::bf16) v = round_to_bf16(v);
            weight[static_cast<size_t>(o * n_in + i)] = v;
        }
    }
    std::vector<float> bias;
    if (w.bias != nullptr) {
        bias.resize(static_cast<size_t>(n_out));
        for (int64_t o = 0; o < n_out; ++o) bias[static_cast<size_t>(o)] = load(w.bias, w.bias_type, o);
    }
    return std::unique_ptr<PreparedLinear>(new RefPreparedLinear(w, std::move(weight), std::move(bias)));
}

Status linear(const RefPreparedLinear& w, const LinearParams& p) {
    SIEVE_RETURN_IF_ERROR(validate_and_check_indices(p, w.x_features(), w.out_features()));
    const int64_t n_in = w.in_features(), n_out = w.out_features(), group_rows = n_out / w.groups();
    const float* weight = w.weight().data();
    for (int64_t t = 0; t < p.n_tokens; ++t) {
        for (int64_t o = 0; o < n_out; ++o) {
            const int64_t x0 = (o / group_rows) * n_in;  // output o reads its group's x values (Groups)
            double acc = 0.0;  // fp32 × fp32 products are exact in double
            for (int64_t i = 0; i < n_in; ++i) {
                float xv = load(p.x, p.x_type, t * p.x_row_stride + x0 + i);
                if (w.math() == LinearMath::bf16) xv = round_to_bf16(xv);
                acc += static_cast<double>(xv) * static_cast<double>(weight[o * n_in + i]);
            }
            float y = static_cast<float>(acc);
            if (!w.bias().empty()) y += w.bias()[static_cast<size_t>(o)];
            store(p.y, p.y_type, t * p.y_row_stride + o, y);
        }
    }
    return Status::ok();
}

}  // namespace sieve::ref
