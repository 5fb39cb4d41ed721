// The scalar vector layer of cpu/simd.h computes what the AVX2 and AVX-512 ones compute where NaN,
// signed zeros, infinities and out-of-range conversions decide the result: MAXPS / MINPS return their
// second operand when either is NaN (and for two zeros), CVTPS2DQ gives INT32_MIN for NaN and values
// outside int32, vf_exp_nonpositive keeps NaN, vf_store_bf16 quiets NaN with its sign. Every pair of a
// list of special and ordinary values goes through each ISA the machine has (simd_probe.h); the scalar
// results must equal the vector ones bit for bit (exp: within the two roundings of the scalar FMA) and
// the stated values. Every e4m3 byte decodes exactly, NaN bytes to a NaN of their sign, on every ISA.
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstring>
#include <limits>
#include <string>
#include <string_view>
#include <vector>

#include "core/cpu_features.h"
#include "sieve/core/dtype.h"
#include "simd_probe.h"

namespace sieve::test {
namespace {

uint32_t bits(float f) { return std::bit_cast<uint32_t>(f); }

struct ProbeResults {
    std::vector<float> max, min, exp;
    std::vector<int32_t> cvt;
    std::vector<uint16_t> bf16;
    std::vector<float> e4m3_vector, e4m3_scalar, e4m3_loaded;
    explicit ProbeResults(size_t n)
        : max(n), min(n), exp(n), cvt(n), bf16(n), e4m3_vector(256), e4m3_scalar(256), e4m3_loaded(256) {}
    SimdProbeOut out() {
        return {max.data(),         min.data(),         cvt.data(),         exp.data(),
                bf16.data(),        e4m3_vector.data(), e4m3_scalar.data(), e4m3_loaded.data()};
    }
};

// Every e4m3 byte decodes to core/dtype.h's value, the NaN bytes to a NaN of their sign, in both the
// scalar and the vector decoder of an ISA.
void expect_e4m3_exact(const ProbeResults& r, std::string_view isa) {
    for (int b = 0; b < 256; ++b) {
        const float want = fp8_e4m3_to_f32(static_cast<uint8_t>(b));
        for (const float got : {r.e4m3_vector[static_cast<size_t>(b)], r.e4m3_scalar[static_cast<size_t>(b)]}) {
            if (std::isnan(want)) {
                EXPECT_TRUE(std::isnan(got)) << isa << " byte " << b;
                EXPECT_EQ(std::signbit(got), (b & 0x80) != 0) << isa << " byte " << b;
            } else {
                EXPECT_EQ(bits(got), bits(want)) << isa << " byte " << b << ": " << got << " vs " << want;
            }
        }
        // The linear's decode (vf_load_e4m3), exact; NaN bytes are ruled out before it.
        if (!std::isnan(want)) {
            EXPECT_EQ(bits(r.e4m3_loaded[static_cast<size_t>(b)]), bits(want)) << isa << " byte " << b;
        }
    }
}

TEST(SimdNan, ScalarLayerModelsTheVectorIsas) {
    const float nan = std::numeric_limits<float>::quiet_NaN(), inf = std::numeric_limits<float>::infinity();
    const float neg_nan = -nan;
    // NaNs of both signs (and a payload), zeros of both signs, infinities, int32 range edges (2^31 − 128
    // is the largest float below 2^31), ties of round-to-nearest-even, exp's clamp at −87.
    const std::vector<float> specials = {nan,   neg_nan,      std::bit_cast<float>(0x7fc12345u), 0.0f, -0.0f, inf, -inf,
                                         1.0f,  -1.0f,        2147483648.0f, 2147483520.0f, -2147483648.0f,
                                         -2147483904.0f, 0.5f, 1.5f, 2.5f, -2.5f, -87.0f, -87.5f, -100.0f,
                                         -3.0f, 1e-40f, std::numeric_limits<float>::max()};
    std::vector<float> a, b;
    for (float x : specials)
        for (float y : specials) {
            a.push_back(x);
            b.push_back(y);
        }
    while (a.size() % 16 != 0) {
        a.push_back(0.0f);
        b.push_back(0.0f);
    }
    const size_t n = a.size();
    ProbeResults scalar(n);
    simd_probe_scalar(a.data(), b.data(), static_cast<int64_t>(n), scalar.out());

    expect_e4m3_exact(scalar, "scalar");
    // The stated rules, on the scalar layer itself.
    for (size_t i = 0; i < n; ++i) {
        SCOPED_TRACE(testing::Message() << "a " << a[i] << " (0x" << std::hex << bits(a[i]) << ") b " << b[i]
                                        << " (0x" << bits(b[i]) << ")");
        const bool either_nan = std::isnan(a[i]) || std::isnan(b[i]);
        EXPECT_EQ(bits(scalar.max[i]), bits(either_nan || !(a[i] > b[i]) ? b[i] : a[i])) << "vf_max";
        EXPECT_EQ(bits(scalar.min[i]), bits(either_nan || !(a[i] < b[i]) ? b[i] : a[i])) << "vf_min";
        const float r = std::nearbyint(a[i]);
        const bool in_range = r >= -2147483648.0f && r < 2147483648.0f;
        EXPECT_EQ(scalar.cvt[i], in_range ? static_cast<int32_t>(r) : std::numeric_limits<int32_t>::min()) << "vi_cvt_rne";
        if (std::isnan(a[i])) {
            EXPECT_TRUE(std::isnan(scalar.exp[i])) << "vf_exp_nonpositive(NaN) = " << scalar.exp[i];
        } else if (a[i] <= 0.0f) {
            // ≈ expf, with exp(x < −87) ≈ 2^-126 (attention_kernels_impl.inl)
            const double want = std::exp(static_cast<double>(std::max(a[i], -87.0f)));
            EXPECT_NEAR(scalar.exp[i], want, 1e-6 * want) << "vf_exp_nonpositive";
        }
        EXPECT_EQ(scalar.bf16[i], f32_to_bf16(a[i])) << "vf_store_bf16";
    }

    // The vector layers: the same bits.
    struct Level {
        Isa isa;
        void (*probe)(const float*, const float*, int64_t, const SimdProbeOut&);
    };
    const Level levels[] = {{Isa::avx2, simd_probe_avx2}, {Isa::avx512, simd_probe_avx512}};
    int compared = 0;
    for (const Level& level : levels) {
        if (hardware_isa() < level.isa) continue;  // not on this machine
        ++compared;
        ProbeResults v(n);
        level.probe(a.data(), b.data(), static_cast<int64_t>(n), v.out());
        expect_e4m3_exact(v, isa_name(level.isa));
        for (size_t i = 0; i < n; ++i) {
            SCOPED_TRACE(testing::Message() << isa_name(level.isa) << ": a " << a[i] << " (0x" << std::hex << bits(a[i])
                                            << ") b " << b[i] << " (0x" << bits(b[i]) << ")");
            EXPECT_EQ(bits(scalar.max[i]), bits(v.max[i])) << "vf_max";
            EXPECT_EQ(bits(scalar.min[i]), bits(v.min[i])) << "vf_min";
            EXPECT_EQ(scalar.cvt[i], v.cvt[i]) << "vi_cvt_rne";
            if (std::isnan(a[i]) || a[i] <= 0.0f) {  // the domain of vf_exp_nonpositive
                EXPECT_EQ(std::isnan(scalar.exp[i]), std::isnan(v.exp[i])) << "vf_exp_nonpositive " << v.exp[i];
                if (std::isfinite(v.exp[i])) {
                    EXPECT_NEAR(scalar.exp[i], v.exp[i], 4e-7 * std::fabs(v.exp[i])) << "vf_exp_nonpositive";
                }
            }
            EXPECT_EQ(scalar.bf16[i], v.bf16[i]) << "vf_store_bf16";
        }
    }
    if (compared == 0) GTEST_SKIP() << "no AVX2 on this machine: only the scalar rules were checked";
}

}  // namespace
}  // namespace sieve::test
