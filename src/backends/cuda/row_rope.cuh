// RoPE's c_i and s_i in device code: the rule of ops/rope.h (rope_cos_sin in src/ops/rope.cpp), bit for bit
// the host's except in vanishingly rare cases (below). Any CUDA kernel that rotates by RoPE angles (rope,
// or a later fused kernel) must take its cos/sin from here.
//   angle_i = float(p) · f_i                          fp32 product (float(p): round to nearest even, as the
//                                                     host's static_cast; rounds above 2^24)
//   c_i = (float)cos((double)angle_i) · a,  s_i = (float)sin((double)angle_i) · a    the fp32 product rounded
// Why double: the host evaluates cos/sin of the widened angle with glibc's double routines, then rounds
// once to fp32; the device's double cos/sin are within a couple of double ulps of the true value, so the
// two fp32 results can differ only when the exact value lies within a few double ulps (~2^-51 relative) of
// a midpoint between two floats: a chance of the order of 2^-28 per value (none in 2·10^6 angles compared
// on an H200). glibc's cosf/sinf, which the contract named before, have no device counterpart that
// reproduces their bits.
#pragma once

#include <cstdint>

namespace sieve::cuda {

__device__ __forceinline__ void rope_cos_sin_one(int64_t position, float inv_freq, float attention_factor,
                                                 float& cos_out, float& sin_out) {
    const float angle = __fmul_rn(static_cast<float>(position), inv_freq);  // no contraction (ops/rope.h)
    const double a = static_cast<double>(angle);
    cos_out = __fmul_rn(static_cast<float>(::cos(a)), attention_factor);  // double → float: RNE (cvt.rn)
    sin_out = __fmul_rn(static_cast<float>(::sin(a)), attention_factor);
}

}  // namespace sieve::cuda
