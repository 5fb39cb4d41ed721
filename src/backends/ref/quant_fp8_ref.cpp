// ref per-group FP8 quantization: the rules of ops/quant_fp8.h with core's scalar conversions.
#include <algorithm>
#include <cmath>
#include <limits>

#include "backends/ref/ref_ops.h"
#include "ops/op_common.h"

namespace sieve::ref {

Status quant_fp8(const QuantFp8Params& p) {
    SIEVE_RETURN_IF_ERROR(validate_and_check_indices(p));
    const int64_t n_groups = p.dim / p.group_size;
    const float nan = std::numeric_limits<float>::quiet_NaN();
    for (int64_t t = 0; t < p.n_tokens; ++t) {
        for (int64_t h = 0; h < p.n_heads; ++h) {
            const int64_t xo = t * p.x_token_stride + h * p.x_head_stride;
            for (int64_t g = 0; g < n_groups; ++g) {
                const int64_t g0 = g * p.group_size;
                float amax = 0.0f;
                bool finite = true;
                for (int64_t j = 0; j < p.group_size; ++j) {
                    const float v = load(p.x, p.x_type, xo + g0 + j);
                    if (!std::isfinite(v)) finite = false;
                    amax = std::max(amax, std::fabs(v));
                }
                const float s = finite ? ue8m0_scale_for_amax(amax) : nan;
                const int64_t so = t * p.scale_token_stride + h * p.scale_head_stride + g;
                if (p.scale_ue8m0) p.scale_ue8m0[so] = finite ? ue8m0_from_pow2(s) : uint8_t{0xff};
                if (p.scale_f32) p.scale_f32[so] = s;
                for (int64_t j = 0; j < p.group_size; ++j) {
                    const float v = load(p.x, p.x_type, xo + g0 + j);
                    uint8_t q;
                    if (finite) {
                        q = f32_to_fp8_e4m3(std::clamp(v / s, -kFp8E4m3Max, kFp8E4m3Max));
                    } else {
                        q = static_cast<uint8_t>(0x7f | (std::signbit(v) ? 0x80 : 0x00));
                    }
                    if (p.q) p.q[t * p.q_token_stride + h * p.q_head_stride + g0 + j] = q;
                    if (p.dequant)
                        store(p.dequant, p.dequant_type, t * p.dequant_token_stride + h * p.dequant_head_stride + g0 + j,
                              finite ? fp8_e4m3_to_f32(q) * s : nan);
                }
            }
        }
    }
    return Status::ok();
}

}  // namespace sieve::ref
