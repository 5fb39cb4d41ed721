// Conformance of the per-head projection (ops/mla_head_proj.h): every backend agrees with ref within the
// dot-product bound of harness.h over head counts, odd feature sizes (vector tails), strided activations,
// f32/bf16 inputs, weights and outputs, f32 and bf16 math; hand-computed values; validate() rejections.
#include "rows.h"
#include "sieve/ops/mla_head_proj.h"

namespace sieve::test {
namespace {

struct HeadProjCase {
    int64_t tokens, heads, in, out;
};

TEST(MlaHeadProj, EveryBackendAgreesWithRef) {
    auto ref = ref_backend();
    auto backends = backends_under_test();
    Rng rng(7401);
    const std::vector<HeadProjCase> cases = {{5, 4, 16, 32}, {7, 4, 32, 16}, {1, 128, 128, 512}, {70, 3, 512, 128},
                                             {3, 2, 7, 33},  {9, 1, 1, 1},   {4, 5, 40, 17},    {131, 2, 24, 48}};
    for (size_t ci = 0; ci < cases.size() * 2; ++ci) {
        const HeadProjCase& k = cases[ci % cases.size()];
        const LinearMath math = ci % 2 ? LinearMath::bf16 : LinearMath::f32;
        const DType xt = rng.coin() ? DType::bf16 : DType::f32, yt = rng.coin() ? DType::bf16 : DType::f32;
        const DType wt = math == LinearMath::bf16 || rng.coin() ? DType::bf16 : DType::f32;
        SCOPED_TRACE(fmt::format("case {}: T {} H {} in {} out {} math {} x {} w {} y {}", ci, k.tokens, k.heads, k.in,
                                 k.out, linear_math_name(math), dtype_name(xt), dtype_name(wt), dtype_name(yt)));
        const RowsLayout xl = make_rows_layout(rng, k.tokens, k.heads, k.in, rng.coin());
        const RowsLayout yl = make_rows_layout(rng, k.tokens, k.heads, k.out, rng.coin());
        RowsTensor x(xl, xt);
        x.fill([&] { return rng.normal(1.0f); });
        const RowsLayout wl{k.heads, k.in, k.out, k.in * k.out, k.out};
        RowsTensor w(wl, wt);
        w.fill([&] { return rng.normal(0.1f); });
        auto params = [&](void* y) {
            MlaHeadProjParams p;
            p.x = x.data();
            p.w = w.data();
            p.y = y;
            p.n_tokens = k.tokens;
            p.n_heads = k.heads;
            p.in_features = k.in;
            p.out_features = k.out;
            p.x_token_stride = xl.token_stride;
            p.x_head_stride = xl.head_stride;
            p.y_token_stride = yl.token_stride;
            p.y_head_stride = yl.head_stride;
            p.math = math;
            p.x_type = xt;
            p.w_type = wt;
            p.y_type = yt;
            return p;
        };
        RowsTensor want(yl, yt);
        ASSERT_TRUE(ref->mla_head_proj(params(want.data()), {}).is_ok());
        std::vector<double> tol;
        for (int64_t t = 0; t < k.tokens; ++t)
            for (int64_t h = 0; h < k.heads; ++h)
                for (int64_t o = 0; o < k.out; ++o) {
                    double sabs = 0;
                    for (int64_t i = 0; i < k.in; ++i) {
                        double xv = x.get(t, h, i);
                        if (math == LinearMath::bf16) xv = round_to_bf16(static_cast<float>(xv));
                        sabs += std::fabs(xv * w.get(h, i, o));
                    }
                    tol.push_back(dot_tolerance(k.in, sabs, std::fabs(want.get(t, h, o)), 0.0, yt == DType::bf16));
                }
        for (auto& nb : backends) {
            RowsTensor got(yl, yt);
            auto p = params(got.data());
            const size_t ws_bytes = nb.backend->mla_head_proj_workspace_size(p);
            GuardedBuffer ws(std::max<size_t>(ws_bytes, 1));
            const Status st = nb.backend->mla_head_proj(p, {ws.data(), ws_bytes});
            ASSERT_TRUE(st.is_ok()) << nb.spec << ": " << st.to_string();
            EXPECT_TRUE(all_close(want.values(), got.values(), tol, nb.spec));
            EXPECT_TRUE(got.intact(nb.spec));
            EXPECT_TRUE(ws.guards_intact(nb.spec + " workspace"));
        }
    }
}

// Two heads, in 2, out 3: head 0 maps (1, 2) with W₀ᵀ = [[1, 0, −1], [0, 1, 1]] to (1, 2, 1); head 1 maps
// (3, −1) with W₁ᵀ = [[2, 2, 2], [1, −1, 0]] to (5, 7, 6). bf16 math rounds x = 1 + 2^-9 to 1.
TEST(MlaHeadProj, KnownValues) {
    auto backends = host_backends_under_test();
    backends.push_back({"ref", ref_backend()});
    const float w[12] = {1, 0, -1, 0, 1, 1, 2, 2, 2, 1, -1, 0};
    uint16_t w16[12];
    for (int i = 0; i < 12; ++i) w16[i] = f32_to_bf16(w[i]);
    const float x[4] = {1.0f + std::ldexp(1.0f, -9), 2, 3, -1};
    for (auto& nb : backends) {
        for (const LinearMath math : {LinearMath::f32, LinearMath::bf16}) {
            SCOPED_TRACE(fmt::format("{} {}", nb.spec, linear_math_name(math)));
            float y[6] = {};
            MlaHeadProjParams p;
            p.x = x;
            p.w = math == LinearMath::bf16 ? static_cast<const void*>(w16) : w;
            p.y = y;
            p.n_tokens = 1;
            p.n_heads = 2;
            p.in_features = 2;
            p.out_features = 3;
            p.x_token_stride = 4;
            p.x_head_stride = 2;
            p.y_token_stride = 6;
            p.y_head_stride = 3;
            p.math = math;
            p.w_type = math == LinearMath::bf16 ? DType::bf16 : DType::f32;
            std::vector<uint8_t> ws(nb.backend->mla_head_proj_workspace_size(p) + 64);
            void* aligned = ws.data() + (64 - reinterpret_cast<uintptr_t>(ws.data()) % 64) % 64;
            ASSERT_TRUE(nb.backend->mla_head_proj(p, {aligned, nb.backend->mla_head_proj_workspace_size(p)}).is_ok());
            const float e = math == LinearMath::bf16 ? 0.0f : std::ldexp(1.0f, -9);
            const float want[6] = {1 + e, 2, 1 - e, 5, 7, 6};
            for (int i = 0; i < 6; ++i) EXPECT_FLOAT_EQ(y[i], want[i]) << i;
        }
    }
}

TEST(MlaHeadProj, ValidateRejects) {
    std::vector<float> x(2 * 2 * 4), w(2 * 4 * 3), y(2 * 2 * 3);
    MlaHeadProjParams p;
    p.x = x.data();
    p.w = w.data();
    p.y = y.data();
    p.n_tokens = 2;
    p.n_heads = 2;
    p.in_features = 4;
    p.out_features = 3;
    p.x_token_stride = 8;
    p.x_head_stride = 4;
    p.y_token_stride = 6;
    p.y_head_stride = 3;
    ASSERT_TRUE(validate(p).is_ok()) << validate(p).to_string();
    auto bad = p;
    bad.math = LinearMath::bf16;  // needs bf16 weights
    EXPECT_NE(validate(bad).message().find("w_type"), std::string::npos) << validate(bad).to_string();
    bad = p;
    bad.y_head_stride = 2;  // output rows overlap
    EXPECT_NE(validate(bad).message().find("y_head_stride"), std::string::npos) << validate(bad).to_string();
    bad = p;
    bad.y = x.data();
    EXPECT_NE(validate(bad).message().find("overlap"), std::string::npos) << validate(bad).to_string();
    bad = p;
    bad.in_features = 0;
    EXPECT_NE(validate(bad).message().find("in_features"), std::string::npos) << validate(bad).to_string();
}

}  // namespace
}  // namespace sieve::test
