// Element types and the scalar conversions every layer relies on.
// bf16: round-to-nearest-even, NaN stays a quiet NaN. fp8 e4m3fn (OCP "FN": no infinities,
// 0x7F/0xFF = NaN, max finite 448, subnormals m·2^-9): saturating encode with RNE, decode via a
// table. ue8m0: a bare biased exponent, value 2^(b−127), 0xFF = NaN (specs/deepseek_v4.md §2.4,
// specs/dsa_mla.md §3.1–3.2).
#pragma once

#include <array>
#include <bit>
#include <limits>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string_view>

namespace sieve {

enum class DType : uint8_t {
    f64,
    f32,
    f16,
    bf16,
    f8_e4m3,   // float8_e4m3fn
    f8_e5m2,
    f8_e8m0,   // ue8m0 scale bytes
    i64,
    i32,
    i16,
    i8,
    u64,
    u32,
    u16,
    u8,
    boolean,
};

inline constexpr DType kAllDTypes[] = {DType::f64, DType::f32, DType::f16, DType::bf16,
                                       DType::f8_e4m3, DType::f8_e5m2, DType::f8_e8m0,
                                       DType::i64, DType::i32, DType::i16, DType::i8,
                                       DType::u64, DType::u32, DType::u16, DType::u8,
                                       DType::boolean};

size_t dtype_size(DType t);
// Short lowercase name used in messages: "bf16", "f8_e4m3", ...
std::string_view dtype_name(DType t);
// The safetensors header spelling ("BF16", "F8_E4M3", ...), and its inverse.
std::string_view dtype_safetensors_name(DType t);
std::optional<DType> dtype_from_safetensors_name(std::string_view name);
bool dtype_is_float(DType t);

// ---- bf16 -------------------------------------------------------------------------------
struct bf16 {
    uint16_t bits;
};

inline float bf16_to_f32(uint16_t b) { return std::bit_cast<float>(static_cast<uint32_t>(b) << 16); }

// Round-to-nearest-even; a NaN input gives a quiet NaN with its sign kept.
inline uint16_t f32_to_bf16(float f) {
    uint32_t u = std::bit_cast<uint32_t>(f);
    if ((u & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((u >> 16) | 0x0040u);
    u += 0x7fffu + ((u >> 16) & 1u);
    return static_cast<uint16_t>(u >> 16);
}

inline float round_to_bf16(float f) { return bf16_to_f32(f32_to_bf16(f)); }

// ---- fp16 (IEEE binary16), needed to read F16 checkpoint tensors -------------------------
float f16_to_f32(uint16_t h);
uint16_t f32_to_f16(float f);  // RNE, overflow to inf, NaN kept quiet

// ---- fp8 e4m3fn ---------------------------------------------------------------------------
inline constexpr float kFp8E4m3Max = 448.0f;

namespace detail {
constexpr float e4m3_decode(uint8_t b) {
    const float sign = (b & 0x80) ? -1.0f : 1.0f;
    const int exp = (b >> 3) & 0xf;
    const int mant = b & 0x7;
    if (exp == 0xf && mant == 0x7)  // NaN built from bits: clang rejects NaN arithmetic here
        return std::bit_cast<float>((b & 0x80) ? 0xffc00000u : 0x7fc00000u);
    if (exp == 0) return sign * static_cast<float>(mant) / 512.0f;  // m · 2^-9
    float scale = 1.0f / 1024.0f;  // normal: (8 + m) · 2^(exp − 10) = (1 + m/8) · 2^(exp − 7)
    for (int e = 0; e < exp; ++e) scale *= 2.0f;
    return sign * static_cast<float>(8 + mant) * scale;
}
constexpr std::array<float, 256> e4m3_table() {
    std::array<float, 256> table{};
    for (int b = 0; b < 256; ++b) table[b] = e4m3_decode(static_cast<uint8_t>(b));
    return table;
}
}  // namespace detail

// Decode table; constexpr so that no static initialisation order can bite.
inline constexpr std::array<float, 256> kFp8E4m3ToF32 = detail::e4m3_table();
inline float fp8_e4m3_to_f32(uint8_t b) { return kFp8E4m3ToF32[b]; }
// Saturating: |x| ≥ 448 (infinities included) encodes as ±448; NaN encodes as 0x7F with the
// sign of the input; otherwise round-to-nearest-even, subnormals kept.
uint8_t f32_to_fp8_e4m3(float f);

// ---- fp8 e5m2 (decode only: listed by safetensors, not produced by sieve) -----------------
float fp8_e5m2_to_f32(uint8_t b);

// ---- ue8m0 --------------------------------------------------------------------------------
// 2^(b − 127); b = 0xFF is NaN; b = 0 is 2^-127 (an fp32 subnormal).
float ue8m0_to_f32(uint8_t b);
// The byte of a power of two s = 2^e, e ∈ [−127, 127]; anything else is a caller bug.
uint8_t ue8m0_from_pow2(float s);
// The UE8M0 scale the model authors' act_quant picks for a block with absolute maximum `amax`:
// 2^ceil(log2(max(amax, 1e-4) / 448)) (specs/README.md "Open points settled"; deepseek_v4.md §2.4).
float ue8m0_scale_for_amax(float amax);

}  // namespace sieve
