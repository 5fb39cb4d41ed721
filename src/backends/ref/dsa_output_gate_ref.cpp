// ref sigmoid output gate (ops/dsa_output_gate.h), in double.
#include <cmath>

#include "backends/ref/dsa_ref_ops.h"
#include "backends/ref/ref_ops.h"
#include "sieve/ops/op_common.h"

namespace sieve::ref {

Status dsa_output_gate(const DsaOutputGateParams& p) {
    SIEVE_RETURN_IF_ERROR(validate_and_check_indices(p));
    for (int64_t t = 0; t < p.n_tokens; ++t)
        for (int64_t h = 0; h < p.n_heads; ++h)
            for (int64_t i = 0; i < p.head_dim; ++i) {
                const int64_t gi = t * p.gate_row_stride + (p.mode == DsaGateMode::elementwise ? h * p.head_dim + i : h);
                const double g = load(p.gate, p.gate_type, gi);
                const double x = load(p.x, p.x_type, t * p.x_token_stride + h * p.x_head_stride + i);
                store(p.y, p.y_type, t * p.y_token_stride + h * p.y_head_stride + i,
                      static_cast<float>(x / (1.0 + std::exp(-g))));
            }
    return Status::ok();
}

}  // namespace sieve::ref
