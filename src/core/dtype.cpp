#include "sieve/core/dtype.h"

#include <array>
#include <cmath>
#include <limits>

#include "core/assert.h"

namespace sieve {

size_t dtype_size(DType t) {
    switch (t) {
        case DType::f64: case DType::i64: case DType::u64: return 8;
        case DType::f32: case DType::i32: case DType::u32: return 4;
        case DType::f16: case DType::bf16: case DType::i16: case DType::u16: return 2;
        case DType::f8_e4m3: case DType::f8_e5m2: case DType::f8_e8m0:
        case DType::i8: case DType::u8: case DType::boolean: return 1;
    }
    SIEVE_ASSERT(false, "unknown dtype");
}

std::string_view dtype_name(DType t) {
    switch (t) {
        case DType::f64: return "f64";
        case DType::f32: return "f32";
        case DType::f16: return "f16";
        case DType::bf16: return "bf16";
        case DType::f8_e4m3: return "f8_e4m3";
        case DType::f8_e5m2: return "f8_e5m2";
        case DType::f8_e8m0: return "f8_e8m0";
        case DType::i64: return "i64";
        case DType::i32: return "i32";
        case DType::i16: return "i16";
        case DType::i8: return "i8";
        case DType::u64: return "u64";
        case DType::u32: return "u32";
        case DType::u16: return "u16";
        case DType::u8: return "u8";
        case DType::boolean: return "bool";
    }
    return "?";
}

std::string_view dtype_safetensors_name(DType t) {
    switch (t) {
        case DType::f64: return "F64";
        case DType::f32: return "F32";
        case DType::f16: return "F16";
        case DType::bf16: return "BF16";
        case DType::f8_e4m3: return "F8_E4M3";
        case DType::f8_e5m2: return "F8_E5M2";
        case DType::f8_e8m0: return "F8_E8M0";
        case DType::i64: return "I64";
        case DType::i32: return "I32";
        case DType::i16: return "I16";
        case DType::i8: return "I8";
        case DType::u64: return "U64";
        case DType::u32: return "U32";
        case DType::u16: return "U16";
        case DType::u8: return "U8";
        case DType::boolean: return "BOOL";
    }
    return "?";
}

std::optional<DType> dtype_from_safetensors_name(std::string_view name) {
    for (DType t : kAllDTypes)
        if (dtype_safetensors_name(t) == name) return t;
    return std::nullopt;
}

bool dtype_is_float(DType t) {
    switch (t) {
        case DType::f64: case DType::f32: case DType::f16: case DType::bf16:
        case DType::f8_e4m3: case DType::f8_e5m2: case DType::f8_e8m0: return true;
        default: return false;
    }
}

// ---- fp16 ---------------------------------------------------------------------------------
float f16_to_f32(uint16_t h) {
    const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
    const uint32_t exp = (h >> 10) & 0x1fu;
    const uint32_t mant = h & 0x3ffu;
    if (exp == 0) {  // zero or subnormal: mant · 2^-24, exact in fp32
        const float v = static_cast<float>(mant) * 0x1p-24f;
        return std::bit_cast<float>(std::bit_cast<uint32_t>(v) | sign);
    }
    if (exp == 31) return std::bit_cast<float>(sign | 0x7f800000u | (mant << 13));
    return std::bit_cast<float>(sign | ((exp + 112u) << 23) | (mant << 13));
}

uint16_t f32_to_f16(float f) {
    const uint32_t u = std::bit_cast<uint32_t>(f);
    const uint16_t sign = static_cast<uint16_t>((u >> 16) & 0x8000u);
    const uint32_t a = u & 0x7fffffffu;
    if (a > 0x7f800000u) return static_cast<uint16_t>(sign | 0x7e00u | ((a >> 13) & 0x3ffu));
    if (a >= 0x477ff000u) return static_cast<uint16_t>(sign | 0x7c00u);  // rounds to ≥ 65520: inf
    if (a < 0x38800000u) {  // below 2^-14: subnormal half, q = RNE(|f| · 2^24)
        const float q = std::nearbyint(std::bit_cast<float>(a) * 0x1p24f);
        return static_cast<uint16_t>(sign | static_cast<uint16_t>(q));
    }
    const uint32_t rounded = a + 0xfffu + ((a >> 13) & 1u);
    return static_cast<uint16_t>(sign | ((rounded - 0x38000000u) >> 13));
}

// ---- fp8 e4m3fn -----------------------------------------------------------------------------
uint8_t f32_to_fp8_e4m3(float f) {
    const uint32_t u = std::bit_cast<uint32_t>(f);
    const uint8_t sign = static_cast<uint8_t>((u >> 24) & 0x80u);
    const uint32_t a = u & 0x7fffffffu;
    if (a > 0x7f800000u) return static_cast<uint8_t>(sign | 0x7f);
    const float af = std::bit_cast<float>(a);
    if (af >= kFp8E4m3Max) return static_cast<uint8_t>(sign | 0x7e);
    const int exp = static_cast<int>(a >> 23) - 127;
    if (exp < -6) {
        // Subnormal range: q = RNE(|f| / 2^-9) ∈ [0, 8]; q = 8 is the smallest normal (0x08),
        // which the code q happens to spell correctly.
        const float q = std::nearbyint(af * 512.0f);
        return static_cast<uint8_t>(sign | static_cast<uint8_t>(q));
    }
    uint32_t mant3 = (a >> 20) & 0x7u;
    const uint32_t rest = a & 0xfffffu;
    int e = exp;
    if (rest > 0x80000u || (rest == 0x80000u && (mant3 & 1u))) {
        if (++mant3 == 8) {
            mant3 = 0;
            ++e;
        }
    }
    if (e > 8 || (e == 8 && mant3 == 7)) return static_cast<uint8_t>(sign | 0x7e);  // saturate
    return static_cast<uint8_t>(sign | static_cast<uint8_t>((e + 7) << 3) | static_cast<uint8_t>(mant3));
}

float fp8_e5m2_to_f32(uint8_t b) { return f16_to_f32(static_cast<uint16_t>(b) << 8); }

// ---- ue8m0 --------------------------------------------------------------------------------
float ue8m0_to_f32(uint8_t b) {
    if (b == 0xff) return std::numeric_limits<float>::quiet_NaN();
    return std::ldexp(1.0f, static_cast<int>(b) - 127);
}

uint8_t ue8m0_from_pow2(float s) {
    int e = 0;
    const float m = std::frexp(s, &e);  // s = m · 2^e, m ∈ [0.5, 1)
    SIEVE_ASSERT(m == 0.5f, "ue8m0 needs a power of two");
    const int biased = e - 1 + 127;
    SIEVE_ASSERT(biased >= 0 && biased <= 254, "ue8m0 exponent out of range");
    return static_cast<uint8_t>(biased);
}

float ue8m0_scale_for_amax(float amax) {
    // amax·(1/448) in fp32, then the exponent rounded up: the reference's fast_round_scale
    // (deepseek_v4.md §2.4: exponent bits, +1 when any mantissa bit is set).
    const float raw = std::max(amax, 1e-4f) * (1.0f / kFp8E4m3Max);
    const uint32_t bits = std::bit_cast<uint32_t>(raw);
    int exp = static_cast<int>((bits >> 23) & 0xffu) - 127;
    if ((bits & 0x7fffffu) != 0) ++exp;
    return std::ldexp(1.0f, exp);
}

}  // namespace sieve
