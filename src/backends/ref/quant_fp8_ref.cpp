// ref per-group FP8 quantization: the rules of ops/quant_fp8.h with core's scalar conversions. The group
// quantizer is the one every ref op that writes FP8 uses (quant_fp8, cache_store).
#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "backends/ref/ref_ops.h"
#include "sieve/ops/op_common.h"
#include "sieve/ops/quant_fp8.h"

namespace sieve::ref {

float quant_fp8_group(const float* v, int64_t n, uint8_t* q) {
    float amax = 0.0f;
    bool finite = true;
    for (int64_t j = 0; j < n; ++j) {
        if (!std::isfinite(v[j])) finite = false;
        amax = std::max(amax, std::fabs(v[j]));
    }
    if (!finite) {  // no finite scale represents the group: poisoned loudly (ops/quant_fp8.h)
        for (int64_t j = 0; j < n; ++j) q[j] = static_cast<uint8_t>(0x7f | (std::signbit(v[j]) ? 0x80 : 0x00));
        return std::numeric_limits<float>::quiet_NaN();
    }
    const float s = ue8m0_scale_for_amax(amax);  // deepseek_v4.md §2.4, dsa_mla.md §3.2
    for (int64_t j = 0; j < n; ++j) q[j] = f32_to_fp8_e4m3(std::clamp(v[j] / s, -kFp8E4m3Max, kFp8E4m3Max));
    return s;
}

uint8_t ue8m0_byte_of_scale(float s) { return std::isnan(s) ? uint8_t{0xff} : ue8m0_from_pow2(s); }

Status quant_fp8(const QuantFp8Params& p) {
    SIEVE_RETURN_IF_ERROR(validate_and_check_indices(p));
    const int64_t n_groups = p.dim / p.group_size;
    const float nan = std::numeric_limits<float>::quiet_NaN();
    std::vector<float> v(static_cast<size_t>(p.group_size));
    std::vector<uint8_t> q(static_cast<size_t>(p.group_size));
    for (int64_t t = 0; t < p.n_tokens; ++t) {
        for (int64_t h = 0; h < p.n_heads; ++h) {
            const int64_t xo = t * p.x_token_stride + h * p.x_head_stride;
            for (int64_t g = 0; g < n_groups; ++g) {
                const int64_t g0 = g * p.group_size;
                for (int64_t j = 0; j < p.group_size; ++j) v[static_cast<size_t>(j)] = load(p.x, p.x_type, xo + g0 + j);
                const float s = quant_fp8_group(v.data(), p.group_size, q.data());
                const int64_t so = t * p.scale_token_stride + h * p.scale_head_stride + g;
                if (p.scale_ue8m0) p.scale_ue8m0[so] = ue8m0_byte_of_scale(s);
                if (p.scale_f32) p.scale_f32[so] = s;
                for (int64_t j = 0; j < p.group_size; ++j) {
                    if (p.q) p.q[t * p.q_token_stride + h * p.q_head_stride + g0 + j] = q[static_cast<size_t>(j)];
                    if (p.dequant)
                        store(p.dequant, p.dequant_type, t * p.dequant_token_stride + h * p.dequant_head_stride + g0 + j,
                              std::isnan(s) ? nan : fp8_e4m3_to_f32(q[static_cast<size_t>(j)]) * s);
                }
            }
        }
    }
    return Status::ok();
}

}  // namespace sieve::ref
