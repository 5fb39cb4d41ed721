// ref Walsh–Hadamard: the butterfly order of ops/hadamard.h on an fp32 copy of the row.
#include "backends/ref/ref_ops.h"
#include "sieve/ops/hadamard.h"
#include "sieve/ops/op_common.h"

namespace sieve::ref {

Status hadamard(const HadamardParams& p) {
    SIEVE_RETURN_IF_ERROR(validate_and_check_indices(p));
    std::vector<float> v(static_cast<size_t>(p.dim));
    for (int64_t t = 0; t < p.n_tokens; ++t) {
        for (int64_t hd = 0; hd < p.n_heads; ++hd) {
            const int64_t xo = t * p.x_token_stride + hd * p.x_head_stride;
            const int64_t yo = t * p.y_token_stride + hd * p.y_head_stride;
            for (int64_t i = 0; i < p.dim; ++i) v[static_cast<size_t>(i)] = load(p.x, p.x_type, xo + i);
            for (int64_t h = 1; h < p.dim; h *= 2) {
                for (int64_t j = 0; j < p.dim; ++j) {
                    if (j & h) continue;
                    const float a = v[static_cast<size_t>(j)], b = v[static_cast<size_t>(j + h)];
                    v[static_cast<size_t>(j)] = a + b;
                    v[static_cast<size_t>(j + h)] = a - b;
                }
            }
            for (int64_t i = 0; i < p.dim; ++i) store(p.y, p.y_type, yo + i, v[static_cast<size_t>(i)] * p.scale);
        }
    }
    return Status::ok();
}

}  // namespace sieve::ref
