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

// Eight e4m3 values (the first in the low byte of eight.x) times the UE8M0 scale 2^(scale − 127), each rounded
// to bf16 (nearest even), as four words of two bf16 values (the first in the low half): bit for bit
// bf16(e4m3_to_f32(byte) · ue8m0_to_f32(scale)), whose fp32 product is exact (at least 2^-9 · 2^-127), so that
// this is that product's one rounding. The attention kernels convert every fp8_model1 value they read through
// it, so the common octet takes few instructions: without a NaN byte and with scale ≤ 134, each byte's sign and
// seven magnitude bits are placed into a bf16 as they are (the e4m3 exponent field read with bf16's bias 127
// instead of 7: the value times 2^-120, exactly; e4m3 subnormals land on bf16 subnormals, which bf16
// arithmetic keeps), and one bf16x2 multiply by 2^(scale − 7) (a normal bf16 while scale ≤ 134) rounds each
// product as the fp32 path does. Octets with a NaN byte, a NaN scale or a larger one take the fp32 path.
__device__ __forceinline__ uint32_t e4m3x2_times_2_pow_minus_120(uint32_t four, uint32_t selector) {
    // Byte k of `four` into the low bits of a half and its sign replicated into the byte above (prmt's
    // sign mode), so that one shift by 4 puts the magnitude at bf16 bits 4 … 10 and a sign copy at bit 15.
    uint32_t t;
    asm("prmt.b32 %0, %1, 0, %2;\n" : "=r"(t) : "r"(four), "r"(selector));
    return (t << 4) & 0x87f087f0u;
}
__device__ __forceinline__ uint32_t bf16x2_mul(uint32_t a, uint32_t b) {
    uint32_t d;
    asm("mul.rn.bf16x2 %0, %1, %2;\n" : "=r"(d) : "r"(a), "r"(b));
    return d;
}
__device__ __forceinline__ uint4 e4m3x8_scaled_to_bf16(uint2 eight, uint32_t scale) {
    // A NaN byte (magnitude 0x7f) is the only one that carries out of its byte when 0x80 is set in every byte
    // and one added to each: the carried-into byte may lose its top bit too, but only above a NaN byte.
    const uint32_t u0 = (eight.x | 0x80808080u) + 0x01010101u, u1 = (eight.y | 0x80808080u) + 0x01010101u;
    const bool nan_byte = (~(u0 & u1) & 0x80808080u) != 0u;
    if (!nan_byte && scale <= 134u) {
        const uint32_t m = (scale + 120u) * 0x00800080u;  // 2^(scale − 7) in both halves
        constexpr uint32_t kLow = 0x9180u, kHigh = 0xb3a2u;  // bytes 0, 1 / 2, 3 of a word, each with its sign byte
        return make_uint4(bf16x2_mul(e4m3x2_times_2_pow_minus_120(eight.x, kLow), m),
                          bf16x2_mul(e4m3x2_times_2_pow_minus_120(eight.x, kHigh), m),
                          bf16x2_mul(e4m3x2_times_2_pow_minus_120(eight.y, kLow), m),
                          bf16x2_mul(e4m3x2_times_2_pow_minus_120(eight.y, kHigh), m));
    }
    const float s = ue8m0_to_f32(static_cast<uint8_t>(scale));
    uint32_t w[4];
    for (int k = 0; k < 4; ++k) {
        const uint32_t word = k < 2 ? eight.x : eight.y, shift = 16 * (k % 2);
        const float lo = e4m3_to_f32(static_cast<uint8_t>(word >> shift)) * s;
        const float hi = e4m3_to_f32(static_cast<uint8_t>(word >> (shift + 8))) * s;
        uint32_t pair;
        asm("cvt.rn.bf16x2.f32 %0, %1, %2;\n" : "=r"(pair) : "f"(hi), "f"(lo));
        w[k] = pair;
    }
    return make_uint4(w[0], w[1], w[2], w[3]);
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
