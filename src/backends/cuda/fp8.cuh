// fp8 e4m3fn and ue8m0 in device code, bit for bit core/dtype.h's host rules (f32_to_fp8_e4m3: saturating,
// NaN → 0x7F with the input's sign, round-to-nearest-even with subnormals; ue8m0_scale_for_amax: the
// exponent of max(amax, 1e-4)·(1/448) rounded up). Shared by every CUDA kernel that reads or writes FP8.
#pragma once

#include <cstdint>

namespace sieve::cuda {

__device__ __forceinline__ float e4m3_to_f32(uint8_t b) {
    const uint32_t sign = static_cast<uint32_t>(b & 0x80u) << 24;
    const uint32_t exp = (b >> 3) & 0xfu, mant = b & 0x7u;
    if (exp == 0xf && mant == 0x7) return __uint_as_float(sign | 0x7fc00000u);  // NaN
    if (exp == 0) return (sign ? -1.0f : 1.0f) * (static_cast<float>(mant) * 0x1p-9f);  // m · 2^-9
    return __uint_as_float(sign | ((exp + 120u) << 23) | (mant << 20));  // (1 + m/8) · 2^(exp − 7)
}

__device__ __forceinline__ uint8_t f32_to_e4m3(float f) {
    const uint32_t u = __float_as_uint(f);
    const uint8_t sign = static_cast<uint8_t>((u >> 24) & 0x80u);
    const uint32_t a = u & 0x7fffffffu;
    if (a > 0x7f800000u) return static_cast<uint8_t>(sign | 0x7f);
    const float af = __uint_as_float(a);
    if (af >= 448.0f) return static_cast<uint8_t>(sign | 0x7e);
    const int exp = static_cast<int>(a >> 23) - 127;
    if (exp < -6) return static_cast<uint8_t>(sign | static_cast<uint8_t>(rintf(af * 512.0f)));  // q ∈ [0, 8]
    uint32_t mant3 = (a >> 20) & 0x7u;
    const uint32_t rest = a & 0xfffffu;
    int e = exp;
    if (rest > 0x80000u || (rest == 0x80000u && (mant3 & 1u))) {
        if (++mant3 == 8) {
            mant3 = 0;
            ++e;
        }
    }
    if (e > 8 || (e == 8 && mant3 == 7)) return static_cast<uint8_t>(sign | 0x7e);
    return static_cast<uint8_t>(sign | static_cast<uint8_t>((e + 7) << 3) | static_cast<uint8_t>(mant3));
}

// 2^(b − 127); 0xFF is NaN.
// Selects, not branches: it runs once per group of values in the attention kernels' conversion loops.
__device__ __forceinline__ float ue8m0_to_f32(uint8_t b) {
    const uint32_t bits = b == 0 ? 0x00400000u : static_cast<uint32_t>(b) << 23;  // 0: 2^−127, an fp32 subnormal
    return __uint_as_float(b == 0xff ? 0x7fc00000u : bits);
}

// The UE8M0 power of two for a group whose absolute maximum is amax (core/dtype.h ue8m0_scale_for_amax).
__device__ __forceinline__ int ue8m0_exponent_for_amax(float amax) {
    const float raw = __fmul_rn(fmaxf(amax, 1e-4f), 1.0f / 448.0f);
    const uint32_t bits = __float_as_uint(raw);
    int exp = static_cast<int>((bits >> 23) & 0xffu) - 127;
    if ((bits & 0x7fffffu) != 0) ++exp;
    return exp;
}
__device__ __forceinline__ float ue8m0_scale_for_amax(float amax) { return ldexpf(1.0f, ue8m0_exponent_for_amax(amax)); }
__device__ __forceinline__ uint8_t ue8m0_byte_for_amax(float amax) {
    return static_cast<uint8_t>(ue8m0_exponent_for_amax(amax) + 127);
}

}  // namespace sieve::cuda
