// ref per-head projection (ops/mla_head_proj.h): one dot product per output, in double.
#include "backends/ref/dsa_ref_ops.h"
#include "backends/ref/ref_ops.h"
#include "sieve/ops/op_common.h"

namespace sieve::ref {

Status mla_head_proj(const MlaHeadProjParams& p) {
    SIEVE_RETURN_IF_ERROR(validate_and_check_indices(p));
    const bool round_x = p.math == LinearMath::bf16;
    std::vector<double> x(static_cast<size_t>(p.in_features));
    for (int64_t t = 0; t < p.n_tokens; ++t)
        for (int64_t h = 0; h < p.n_heads; ++h) {
            for (int64_t i = 0; i < p.in_features; ++i) {
                const float v = load(p.x, p.x_type, t * p.x_token_stride + h * p.x_head_stride + i);
                x[static_cast<size_t>(i)] = round_x ? round_to_bf16(v) : v;
            }
            const int64_t w0 = h * p.in_features * p.out_features;
            for (int64_t o = 0; o < p.out_features; ++o) {
                double s = 0;
                for (int64_t i = 0; i < p.in_features; ++i)
                    s += x[static_cast<size_t>(i)] * static_cast<double>(load(p.w, p.w_type, w0 + i * p.out_features + o));
                store(p.y, p.y_type, t * p.y_token_stride + h * p.y_head_stride + o, static_cast<float>(s));
            }
        }
    return Status::ok();
}

}  // namespace sieve::ref
