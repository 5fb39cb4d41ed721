#include "sieve/core/dtype.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <random>

namespace sieve {
namespace {

float from_bits(uint32_t u) { return std::bit_cast<float>(u); }

TEST(Bf16, EveryFiniteValueRoundTrips) {
    for (uint32_t b = 0; b < 0x10000; ++b) {
        const float f = bf16_to_f32(static_cast<uint16_t>(b));
        if (std::isnan(f)) continue;
        ASSERT_EQ(f32_to_bf16(f), b) << "bf16 0x" << std::hex << b;
    }
}

TEST(Bf16, MidpointsRoundToEven) {
    for (uint32_t b = 0; b < 0x7f7f; ++b) {  // positive finite, next value finite
        const uint32_t mid = (b << 16) | 0x8000u;  // exactly halfway to b + 1
        const uint16_t want = (b & 1u) ? static_cast<uint16_t>(b + 1) : static_cast<uint16_t>(b);
        ASSERT_EQ(f32_to_bf16(from_bits(mid)), want) << "bf16 0x" << std::hex << b;
        ASSERT_EQ(f32_to_bf16(from_bits(mid + 1)), b + 1);  // just above: up
        ASSERT_EQ(f32_to_bf16(from_bits(mid - 1)), b);      // just below: down
    }
}

TEST(Bf16, NanStaysQuietNanWithSign) {
    const uint16_t pos = f32_to_bf16(from_bits(0x7f800001u));  // signalling NaN, low payload
    EXPECT_TRUE(std::isnan(bf16_to_f32(pos)));
    EXPECT_TRUE(pos & 0x0040u);
    const uint16_t neg = f32_to_bf16(from_bits(0xffc00000u));
    EXPECT_TRUE(std::isnan(bf16_to_f32(neg)));
    EXPECT_TRUE(neg & 0x8000u);
    EXPECT_EQ(f32_to_bf16(std::numeric_limits<float>::infinity()), 0x7f80);
    EXPECT_EQ(f32_to_bf16(from_bits(0x7f7fffffu)), 0x7f80);  // FLT_MAX rounds up to inf
}

// Independent oracle for e4m3: the nearest of the 127 non-negative finite codes, ties to the
// code with an even mantissa (the lowest bit of the code).
uint8_t nearest_e4m3(float f) {
    const float a = std::fabs(f);
    uint8_t best = 0;
    double best_err = std::numeric_limits<double>::infinity();
    for (int c = 0; c <= 0x7e; ++c) {
        const double err = std::fabs(static_cast<double>(fp8_e4m3_to_f32(static_cast<uint8_t>(c))) - a);
        if (err < best_err || (err == best_err && (c & 1) == 0)) {
            best = static_cast<uint8_t>(c);
            best_err = err;
        }
    }
    return static_cast<uint8_t>(best | (std::signbit(f) ? 0x80 : 0));
}

TEST(Fp8E4m3, DecodeTableKnownValues) {
    EXPECT_EQ(fp8_e4m3_to_f32(0x00), 0.0f);
    EXPECT_TRUE(std::signbit(fp8_e4m3_to_f32(0x80)));
    EXPECT_EQ(fp8_e4m3_to_f32(0x01), std::ldexp(1.0f, -9));   // smallest subnormal
    EXPECT_EQ(fp8_e4m3_to_f32(0x07), 7 * std::ldexp(1.0f, -9));
    EXPECT_EQ(fp8_e4m3_to_f32(0x08), std::ldexp(1.0f, -6));   // smallest normal
    EXPECT_EQ(fp8_e4m3_to_f32(0x38), 1.0f);
    EXPECT_EQ(fp8_e4m3_to_f32(0x7e), 448.0f);
    EXPECT_EQ(fp8_e4m3_to_f32(0xfe), -448.0f);
    EXPECT_TRUE(std::isnan(fp8_e4m3_to_f32(0x7f)));
    EXPECT_TRUE(std::isnan(fp8_e4m3_to_f32(0xff)));
}

TEST(Fp8E4m3, EveryCodeRoundTrips) {
    for (int c = 0; c < 256; ++c) {
        if (c == 0x7f || c == 0xff) continue;
        ASSERT_EQ(f32_to_fp8_e4m3(fp8_e4m3_to_f32(static_cast<uint8_t>(c))), c) << c;
    }
}

TEST(Fp8E4m3, MidpointsAndNeighboursMatchNearestEven) {
    for (int c = 0; c < 0x7e; ++c) {
        const float lo = fp8_e4m3_to_f32(static_cast<uint8_t>(c));
        const float hi = fp8_e4m3_to_f32(static_cast<uint8_t>(c + 1));
        const float mid = 0.5f * (lo + hi);  // exact in fp32
        for (float f : {mid, std::nextafter(mid, 0.0f), std::nextafter(mid, 1e9f)}) {
            ASSERT_EQ(f32_to_fp8_e4m3(f), nearest_e4m3(f)) << f;
            ASSERT_EQ(f32_to_fp8_e4m3(-f), nearest_e4m3(-f)) << -f;
        }
        ASSERT_EQ(f32_to_fp8_e4m3(mid), (c & 1) ? c + 1 : c);
    }
}

TEST(Fp8E4m3, RandomValuesMatchNearestEven) {
    std::mt19937 rng(7);
    std::uniform_real_distribution<float> exponent(-14.0f, 9.0f);
    for (int i = 0; i < 20000; ++i) {
        const float f = std::exp2(exponent(rng)) * ((i & 1) ? -1.0f : 1.0f);
        if (std::fabs(f) >= 448.0f) continue;
        ASSERT_EQ(f32_to_fp8_e4m3(f), nearest_e4m3(f)) << f;
    }
}

TEST(Fp8E4m3, SaturatesAndKeepsNan) {
    EXPECT_EQ(f32_to_fp8_e4m3(448.0f), 0x7e);
    EXPECT_EQ(f32_to_fp8_e4m3(463.9f), 0x7e);
    EXPECT_EQ(f32_to_fp8_e4m3(464.0f), 0x7e);
    EXPECT_EQ(f32_to_fp8_e4m3(1e30f), 0x7e);
    EXPECT_EQ(f32_to_fp8_e4m3(-1e30f), 0xfe);
    EXPECT_EQ(f32_to_fp8_e4m3(std::numeric_limits<float>::infinity()), 0x7e);
    EXPECT_EQ(f32_to_fp8_e4m3(-std::numeric_limits<float>::infinity()), 0xfe);
    EXPECT_EQ(f32_to_fp8_e4m3(std::numeric_limits<float>::quiet_NaN()), 0x7f);
    EXPECT_EQ(f32_to_fp8_e4m3(-std::numeric_limits<float>::quiet_NaN()), 0xff);
    EXPECT_EQ(f32_to_fp8_e4m3(std::ldexp(1.0f, -11)), 0x00);  // a quarter step: to zero
    EXPECT_EQ(f32_to_fp8_e4m3(std::ldexp(1.0f, -10)), 0x00);  // half step, tie to even zero
    EXPECT_EQ(f32_to_fp8_e4m3(std::ldexp(3.0f, -10)), 0x02);  // 1.5 steps, tie to even 2
}

TEST(Fp16, EveryValueRoundTrips) {
    for (uint32_t h = 0; h < 0x10000; ++h) {
        const float f = f16_to_f32(static_cast<uint16_t>(h));
        if (std::isnan(f)) {
            ASSERT_TRUE(std::isnan(f16_to_f32(f32_to_f16(f))));
            continue;
        }
        ASSERT_EQ(f32_to_f16(f), h) << std::hex << h;
    }
    EXPECT_EQ(f16_to_f32(0x3c00), 1.0f);
    EXPECT_EQ(f16_to_f32(0x0001), std::ldexp(1.0f, -24));
    EXPECT_EQ(f32_to_f16(65520.0f), 0x7c00);  // rounds to inf
    EXPECT_EQ(f32_to_f16(65519.0f), 0x7bff);
}

TEST(Fp8E5m2, DecodesAsTopByteOfHalf) {
    EXPECT_EQ(fp8_e5m2_to_f32(0x3c), 1.0f);
    EXPECT_EQ(fp8_e5m2_to_f32(0x7b), 57344.0f);
    EXPECT_TRUE(std::isinf(fp8_e5m2_to_f32(0x7c)));
}

TEST(Ue8m0, DecodesEveryByte) {
    for (int b = 0; b < 255; ++b) {
        ASSERT_EQ(ue8m0_to_f32(static_cast<uint8_t>(b)), std::ldexp(1.0f, b - 127)) << b;
        ASSERT_EQ(ue8m0_from_pow2(ue8m0_to_f32(static_cast<uint8_t>(b))), b);
    }
    EXPECT_TRUE(std::isnan(ue8m0_to_f32(0xff)));
    EXPECT_GT(ue8m0_to_f32(0), 0.0f);  // 2^-127 is an fp32 subnormal, not zero
}

TEST(Ue8m0, ScaleForAmaxIsSmallestPowerOfTwoCoveringIt) {
    EXPECT_EQ(ue8m0_scale_for_amax(448.0f), 1.0f);
    EXPECT_EQ(ue8m0_scale_for_amax(449.0f), 2.0f);
    EXPECT_EQ(ue8m0_scale_for_amax(224.0f), 0.5f);
    EXPECT_EQ(ue8m0_scale_for_amax(0.0f), std::ldexp(1.0f, -22));  // clamp amax at 1e-4
    EXPECT_EQ(ue8m0_scale_for_amax(1e-9f), ue8m0_scale_for_amax(1e-4f));
    std::mt19937 rng(3);
    std::uniform_real_distribution<double> exponent(-10.0, 20.0);
    for (int i = 0; i < 10000; ++i) {
        const float amax = static_cast<float>(std::exp2(exponent(rng)));
        const float s = ue8m0_scale_for_amax(amax);
        const float raw = amax * (1.0f / 448.0f);
        ASSERT_GE(s, raw);
        ASSERT_LT(s / 2, raw);
    }
}

TEST(DType, SafetensorsNamesRoundTrip) {
    for (DType t : kAllDTypes) {
        auto back = dtype_from_safetensors_name(dtype_safetensors_name(t));
        ASSERT_TRUE(back.has_value());
        EXPECT_EQ(*back, t);
    }
    EXPECT_FALSE(dtype_from_safetensors_name("F4").has_value());
    EXPECT_EQ(dtype_size(DType::bf16), 2u);
    EXPECT_EQ(dtype_size(DType::f8_e8m0), 1u);
    EXPECT_EQ(dtype_size(DType::i64), 8u);
}

}  // namespace
}  // namespace sieve
