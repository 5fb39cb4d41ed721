// The oracle checked against values computed by hand or quoted in the specs, so that the
// conformance tests do not only compare ref with itself.
#include <limits>

#include "harness.h"
#include "sieve/ops/hadamard.h"
#include "sieve/ops/layer_norm.h"
#include "sieve/ops/quant_fp8.h"
#include "sieve/ops/rms_norm.h"
#include "sieve/ops/rope.h"
#include "sieve/ops/topk.h"

namespace sieve::test {
namespace {

TEST(RopeFrequencies, YarnRangeMatchesTheSpecs) {
    RopeFrequencyConfig c;
    c.rot_dim = 64;
    c.yarn = true;
    c.yarn_params.factor = 16;
    c.yarn_params.original_max_position = 65536;
    c.base = 160000;  // DeepSeek-V4 compress_rope_theta: corr = 15.453, 24.708 (deepseek_v4.md §2.3)
    auto r = rope_yarn_range(c);
    ASSERT_TRUE(r.has_value()) << r.status().to_string();
    EXPECT_EQ(r->low, 15.0);
    EXPECT_EQ(r->high, 25.0);
    c.base = 10000;  // "base 10000 would give 20/33" before the clamp of high to D − 1 = 63 (deepseek_v4.md §2.3)
    r = rope_yarn_range(c);
    EXPECT_EQ(r->low, 20.0);
    EXPECT_EQ(r->high, 33.0);
    c.yarn_params.original_max_position = 4096;  // DeepSeek-V3.2: 10 and 23 (dsa_mla.md §2.2)
    c.yarn_params.factor = 40;
    r = rope_yarn_range(c);
    EXPECT_EQ(r->low, 10.0);
    EXPECT_EQ(r->high, 23.0);
    c.yarn_params.truncate = false;  // corr values themselves
    r = rope_yarn_range(c);
    EXPECT_NEAR(r->low, 64 * std::log(4096 / (32 * 2 * M_PI)) / (2 * std::log(10000.0)), 1e-12);
    // low == high → high += 0.001: L0 = 6 puts corr(β_slow) = 3.47·ln(6/2π) = −0.16 in (−1, 0], so
    // low = max(floor(·), 0) = 0 and high = ceil(−0.16) = 0
    c.yarn_params.truncate = true;
    c.yarn_params.original_max_position = 6;
    r = rope_yarn_range(c);
    EXPECT_EQ(r->low, 0.0);
    EXPECT_EQ(r->high, 0.001);
    // high clamps to D − 1
    c.rot_dim = 8;
    c.yarn_params.original_max_position = 1e12;
    r = rope_yarn_range(c);
    EXPECT_EQ(r->high, 7.0);
}

TEST(RopeFrequencies, InvFreqPlainAndYarn) {
    RopeFrequencyConfig c;
    c.rot_dim = 64;
    c.base = 160000;
    std::vector<float> plain(32), yarn(32);
    ASSERT_TRUE(rope_inv_freq(c, plain.data()).is_ok());
    for (int i = 0; i < 32; ++i)  // 1 / base^(2i/D), fp32 pow: within 2 ulp of the double value
        EXPECT_NEAR(plain[i], 1.0 / std::pow(160000.0, 2.0 * i / 64), 2 * kU * 2 / std::pow(160000.0, 2.0 * i / 64)) << i;
    EXPECT_EQ(plain[0], 1.0f);
    c.yarn = true;
    c.yarn_params.factor = 16;
    c.yarn_params.original_max_position = 65536;
    ASSERT_TRUE(rope_inv_freq(c, yarn.data()).is_ok());
    for (int i = 0; i <= 15; ++i) EXPECT_EQ(yarn[i], plain[i]) << i;  // ramp 0 below low = 15: extrapolation
    for (int i = 25; i < 32; ++i)  // ramp 1 from high = 25: interpolation 1/(16·p)
        EXPECT_NEAR(yarn[i], plain[i] / 16, 2 * kU * plain[i] / 16) << i;
    // in between: f = f/s · r + f · (1 − r), r = (i − 15)/10
    for (int i = 16; i < 25; ++i) {
        const double r = (i - 15) / 10.0;
        EXPECT_NEAR(yarn[i], plain[i] / 16.0 * r + plain[i] * (1 - r), 4 * kU * plain[i]) << i;
    }
}

TEST(RopeFrequencies, YarnMscale) {
    EXPECT_NEAR(rope_yarn_mscale(40, 1), 1.3688879, 1e-7);  // dsa_mla.md "Decisions", V3.2
    EXPECT_NEAR(rope_yarn_mscale(16, 1), 1.2772589, 1e-7);  // deepseek_v4.md §1.4: ≈ 1.277
    EXPECT_EQ(rope_yarn_mscale(1, 1), 1.0);
}

// RoPE on one head by hand: interleaved and half-split, slice first/last, forward and inverse.
TEST(RefRope, HandComputedRotation) {
    auto ref = ref_backend();
    const float inv_freq[2] = {1.0f, 0.25f};
    const int64_t pos = 3;
    const float x[6] = {1, 2, 3, 4, 5, 6};
    auto run = [&](RopePairing pairing, RopeSlice slice, bool inverse) {
        std::vector<float> y(6, -99.0f);
        RopeParams p;
        p.x = x;
        p.y = y.data();
        p.positions = &pos;
        p.inv_freq = inv_freq;
        p.n_tokens = 1;
        p.head_dim = 6;
        p.rot_dim = 4;
        p.x_token_stride = p.y_token_stride = 6;
        p.x_head_stride = p.y_head_stride = 6;
        p.pairing = pairing;
        p.slice = slice;
        p.inverse = inverse;
        EXPECT_TRUE(ref->rope(p).is_ok());
        return y;
    };
    const double c0 = std::cos(3.0), s0 = std::sin(3.0), c1 = std::cos(0.75), s1 = std::sin(0.75);
    auto rot = [](double a, double b, double c, double s) { return std::pair{a * c - b * s, a * s + b * c}; };
    // interleaved on the last 4 dims: pairs (2,3) with f0 and (4,5) with f1; dims 0,1 copied
    auto y = run(RopePairing::interleaved, RopeSlice::last, false);
    EXPECT_EQ(y[0], 1.0f);
    EXPECT_EQ(y[1], 2.0f);
    EXPECT_NEAR(y[2], rot(3, 4, c0, s0).first, 1e-6);
    EXPECT_NEAR(y[3], rot(3, 4, c0, s0).second, 1e-6);
    EXPECT_NEAR(y[4], rot(5, 6, c1, s1).first, 1e-6);
    EXPECT_NEAR(y[5], rot(5, 6, c1, s1).second, 1e-6);
    // half-split on the first 4 dims: pairs (0,2) with f0 and (1,3) with f1; dims 4,5 copied
    y = run(RopePairing::half_split, RopeSlice::first, false);
    EXPECT_NEAR(y[0], rot(1, 3, c0, s0).first, 1e-6);
    EXPECT_NEAR(y[2], rot(1, 3, c0, s0).second, 1e-6);
    EXPECT_NEAR(y[1], rot(2, 4, c1, s1).first, 1e-6);
    EXPECT_NEAR(y[3], rot(2, 4, c1, s1).second, 1e-6);
    EXPECT_EQ(y[4], 5.0f);
    EXPECT_EQ(y[5], 6.0f);
    // inverse = rotation by −angle
    y = run(RopePairing::interleaved, RopeSlice::first, true);
    EXPECT_NEAR(y[0], rot(1, 2, c0, -s0).first, 1e-6);
    EXPECT_NEAR(y[1], rot(1, 2, c0, -s0).second, 1e-6);
}

TEST(RefRmsNorm, HandComputed) {
    auto ref = ref_backend();
    const float x[2] = {3, 4};  // mean(x²) = 12.5
    const float w[2] = {2.0f, 0.5f};
    const float eps = 0.5f;     // inv = 1/sqrt(13)
    auto run = [&](RmsNormWeight mode, const float* weight) {
        std::vector<float> y(2);
        RmsNormParams p;
        p.x = x;
        p.y = y.data();
        p.weight = weight;
        p.weight_mode = mode;
        p.n_tokens = 1;
        p.dim = 2;
        p.x_token_stride = p.y_token_stride = 2;
        p.eps = eps;
        EXPECT_TRUE(ref->rms_norm(p).is_ok());
        return y;
    };
    const double inv = 1 / std::sqrt(13.0);
    auto y = run(RmsNormWeight::none, nullptr);
    EXPECT_NEAR(y[0], 3 * inv, 1e-6);
    EXPECT_NEAR(y[1], 4 * inv, 1e-6);
    y = run(RmsNormWeight::multiply, w);
    EXPECT_NEAR(y[0], 6 * inv, 1e-6);
    EXPECT_NEAR(y[1], 2 * inv, 1e-6);
    y = run(RmsNormWeight::one_plus, w);  // Gemma: (1 + w)
    EXPECT_NEAR(y[0], 9 * inv, 1e-6);
    EXPECT_NEAR(y[1], 6 * inv, 1e-6);
}

TEST(RefLayerNorm, HandComputed) {
    auto ref = ref_backend();
    const float x[4] = {1, 2, 3, 4};  // mean 2.5, biased var 1.25
    const float w[4] = {1, 2, 3, 4}, b[4] = {0.5f, 0, 0, -1};
    std::vector<float> y(4);
    LayerNormParams p;
    p.x = x;
    p.y = y.data();
    p.weight = w;
    p.bias = b;
    p.n_tokens = 1;
    p.dim = 4;
    p.x_token_stride = p.y_token_stride = 4;
    p.eps = 0.75f;  // var + eps = 2
    ASSERT_TRUE(ref->layer_norm(p).is_ok());
    const double inv = 1 / std::sqrt(2.0);
    EXPECT_NEAR(y[0], -1.5 * inv * 1 + 0.5, 1e-6);
    EXPECT_NEAR(y[1], -0.5 * inv * 2, 1e-6);
    EXPECT_NEAR(y[2], 0.5 * inv * 3, 1e-6);
    EXPECT_NEAR(y[3], 1.5 * inv * 4 - 1, 1e-6);
}

TEST(RefQuantFp8, HandComputedCodesAndScales) {
    auto ref = ref_backend();
    // group 0: amax 448 → 448/448 = 1 exactly → s = 2^0 (no round-up); group 1: amax 449 → s = 2;
    // group 2: all zero → amax clamps to 1e-4 → s = 2^ceil(log2(2.23e-7)) = 2^-22
    const float x[12] = {448, 1, -0.5f, 0.00390625f /*2^-8*/, 449, 224.5f, -3, 0.005859375f /*1.5·2^-9·2*/, 0, 0, 0, 0};
    uint8_t q[12], sb[3];
    float sf[3], dq[12];
    QuantFp8Params p;
    p.x = x;
    p.q = q;
    p.scale_ue8m0 = sb;
    p.scale_f32 = sf;
    p.dequant = dq;
    p.n_tokens = 1;
    p.dim = 12;
    p.group_size = 4;
    p.x_token_stride = p.q_token_stride = p.dequant_token_stride = 12;
    p.scale_token_stride = 3;
    ASSERT_TRUE(ref->quant_fp8(p).is_ok());
    EXPECT_EQ(sb[0], 127);
    EXPECT_EQ(sf[0], 1.0f);
    EXPECT_EQ(q[0], 0x7e);  // 448 = 1.75·2^8
    EXPECT_EQ(q[1], 0x38);  // 1.0
    EXPECT_EQ(q[2], 0xb0);  // −0.5
    EXPECT_EQ(q[3], 0x02);  // 2^-8 = 2·2^-9: subnormal code 2
    EXPECT_EQ(sb[1], 128);
    EXPECT_EQ(sf[1], 2.0f);
    EXPECT_EQ(q[4], 0x76);  // 449/2 = 224.5 → 224 (1.75·2^7), ties and below: round to nearest even
    EXPECT_EQ(q[5], 0x6e);  // 112.25 → 112 (1.75·2^6)
    EXPECT_EQ(q[6], 0xbc);  // −1.5
    EXPECT_EQ(q[7], 0x02);  // 1.5·2^-9: a tie between subnormal codes 1 and 2 → even (2)
    EXPECT_EQ(dq[4], 448.0f);
    EXPECT_EQ(dq[5], 224.0f);
    EXPECT_EQ(sb[2], 127 - 22);
    EXPECT_EQ(sf[2], std::ldexp(1.0f, -22));
    EXPECT_EQ(q[8], 0x00);
    // a NaN poisons its group
    const float bad[4] = {1, std::numeric_limits<float>::quiet_NaN(), -2, 3};
    p.x = bad;
    p.dim = 4;
    ASSERT_TRUE(ref->quant_fp8(p).is_ok());
    EXPECT_EQ(sb[0], 0xff);
    EXPECT_TRUE(std::isnan(sf[0]));
    EXPECT_EQ(q[0], 0x7f);
    EXPECT_EQ(q[2], 0xff);
    EXPECT_TRUE(std::isnan(dq[3]));
}

TEST(RefHadamard, HandComputed) {
    auto ref = ref_backend();
    // H_4 (Sylvester): rows [1,1,1,1], [1,−1,1,−1], [1,1,−1,−1], [1,−1,−1,1]
    const float x[4] = {1, 2, 3, 4};
    float y[4];
    HadamardParams p;
    p.x = x;
    p.y = y;
    p.n_tokens = 1;
    p.dim = 4;
    p.x_token_stride = p.y_token_stride = 4;
    p.scale = 0.5f;
    ASSERT_TRUE(ref->hadamard(p).is_ok());
    EXPECT_EQ(y[0], 5.0f);   // (1+2+3+4)/2
    EXPECT_EQ(y[1], -1.0f);  // (1−2+3−4)/2
    EXPECT_EQ(y[2], -2.0f);  // (1+2−3−4)/2
    EXPECT_EQ(y[3], 0.0f);   // (1−2−3+4)/2
    // 128: the transform with scale 1/√128 is orthonormal and its own inverse
    std::vector<float> v(128), w(128), back(128);
    for (int i = 0; i < 128; ++i) v[static_cast<size_t>(i)] = std::sin(0.1f * static_cast<float>(i));
    p.dim = 128;
    p.x = v.data();
    p.y = w.data();
    p.x_token_stride = p.y_token_stride = 128;
    p.scale = 0.08838834764831845f;
    ASSERT_TRUE(ref->hadamard(p).is_ok());
    p.x = w.data();
    p.y = back.data();
    ASSERT_TRUE(ref->hadamard(p).is_ok());
    for (int i = 0; i < 128; ++i) EXPECT_NEAR(back[static_cast<size_t>(i)], v[static_cast<size_t>(i)], 1e-5) << i;
}

TEST(RefTopk, HandComputedSelection) {
    auto ref = ref_backend();
    const float nan = std::numeric_limits<float>::quiet_NaN(), inf = std::numeric_limits<float>::infinity();
    const float s[7] = {1, 3, 3, 2, nan, -inf, 3};
    auto run = [&](const float* scores, int64_t n, int64_t k, const int32_t* valid) {
        std::vector<int32_t> out(static_cast<size_t>(k), 1234);
        int32_t count = -5;
        TopkParams p;
        p.scores = scores;
        p.valid_len = valid;
        p.out = out.data();
        p.out_count = &count;
        p.n_rows = 1;
        p.n_cols = n;
        p.k = k;
        p.scores_row_stride = n;
        p.out_row_stride = k;
        EXPECT_TRUE(ref->topk(p, {}).is_ok());
        EXPECT_EQ(count, std::count_if(out.begin(), out.end(), [](int32_t i) { return i >= 0; }));
        return out;
    };
    EXPECT_EQ(run(s, 7, 3, nullptr), (std::vector<int32_t>{1, 2, 6}));
    EXPECT_EQ(run(s, 7, 2, nullptr), (std::vector<int32_t>{1, 2}));           // tie among the 3s: lower indices
    EXPECT_EQ(run(s, 7, 6, nullptr), (std::vector<int32_t>{0, 1, 2, 3, 5, 6}));  // −inf before NaN
    EXPECT_EQ(run(s, 7, 9, nullptr), (std::vector<int32_t>{0, 1, 2, 3, 4, 5, 6, -1, -1}));
    const int32_t valid = 4;
    EXPECT_EQ(run(s, 7, 3, &valid), (std::vector<int32_t>{1, 2, 3}));
    const float zeros[3] = {0.0f, -0.0f, 0.0f};  // −0 == +0: the lower index wins
    EXPECT_EQ(run(zeros, 3, 1, nullptr), (std::vector<int32_t>{0}));
    const float zeros2[3] = {-0.0f, 0.0f, -1.0f};
    EXPECT_EQ(run(zeros2, 3, 1, nullptr), (std::vector<int32_t>{0}));
    const int32_t none = 0;
    EXPECT_EQ(run(s, 7, 2, &none), (std::vector<int32_t>{-1, -1}));
}

TEST(RefLinear, HandComputedFp8Blocks) {
    auto ref = ref_backend();
    // W [130, 129] e4m3 1.0 (0x38) everywhere; block scales [[0.5, 4], [2, 0.25]]: row 0 = 128·0.5 + 4,
    // row 129 (second row block) = 128·2 + 0.25; x = 1, bias 1.
    const int64_t n = 130, k = 129;
    std::vector<uint8_t> w(static_cast<size_t>(n * k), 0x38);
    const float scales[4] = {0.5f, 4.0f, 2.0f, 0.25f};
    std::vector<float> bias(static_cast<size_t>(n), 1.0f), x(static_cast<size_t>(k), 1.0f), y(static_cast<size_t>(n));
    LinearWeights lw;
    lw.weight = w.data();
    lw.block_scale = scales;
    lw.bias = bias.data();
    lw.out_features = n;
    lw.in_features = k;
    lw.weight_row_stride = k;
    lw.weight_type = DType::f8_e4m3;
    auto prepared = ref->linear_prepare(lw);
    ASSERT_TRUE(prepared.has_value()) << prepared.status().to_string();
    LinearParams p;
    p.x = x.data();
    p.y = y.data();
    p.n_tokens = 1;
    p.x_row_stride = k;
    p.y_row_stride = n;
    auto plan = ref->linear_plan(**prepared, p);
    ASSERT_TRUE(plan.has_value());
    ASSERT_TRUE(ref->linear(**prepared, *plan, p, {}).is_ok());
    EXPECT_EQ(y[0], 69.0f);
    EXPECT_EQ(y[127], 69.0f);
    EXPECT_EQ(y[128], 257.25f);
    EXPECT_EQ(y[129], 257.25f);
}

}  // namespace
}  // namespace sieve::test
