// Conformance of Hy4's sigmoid output gate (ops/dsa_output_gate.h): every backend agrees with ref within
// a few ulps (one exp and a division on both sides), elementwise and headwise, strided and in place,
// f32 and bf16; hand-computed values; validate() rejections.
#include <cmath>

#include "rows.h"
#include "sieve/ops/dsa_output_gate.h"

namespace sieve::test {
namespace {

TEST(DsaOutputGate, EveryBackendAgreesWithRef) {
    auto ref = ref_backend();
    auto backends = backends_under_test();
    Rng rng(7301);
    for (int c = 0; c < 24; ++c) {
        const int64_t n_tokens = rng.pick<int64_t>({1, 4, 9}), n_heads = rng.pick<int64_t>({1, 3, 4});
        const int64_t head_dim = rng.pick<int64_t>({16, 7, 33, 128});
        const DsaGateMode mode = c % 2 ? DsaGateMode::headwise : DsaGateMode::elementwise;
        const DType xt = rng.coin() ? DType::bf16 : DType::f32, gt = rng.coin() ? DType::bf16 : DType::f32;
        const DType yt = rng.coin() ? DType::bf16 : DType::f32;
        const bool in_place = xt == yt && rng.coin(0.4), padded = rng.coin();
        SCOPED_TRACE(fmt::format("case {}: [{}, {}, {}] {} x {} gate {} y {} in_place {}", c, n_tokens, n_heads, head_dim,
                                 mode == DsaGateMode::headwise ? "headwise" : "elementwise", dtype_name(xt),
                                 dtype_name(gt), dtype_name(yt), in_place));
        const int64_t gw = mode == DsaGateMode::elementwise ? n_heads * head_dim : n_heads;
        const RowsLayout xl = make_rows_layout(rng, n_tokens, n_heads, head_dim, padded);
        const RowsLayout gl = make_rows_layout(rng, n_tokens, 1, gw, padded);
        const RowsLayout yl = in_place ? xl : make_rows_layout(rng, n_tokens, n_heads, head_dim, padded);
        RowsTensor x(xl, xt), g(gl, gt);
        x.fill([&] { return rng.normal(2.0f); });
        g.fill([&] { return rng.coin(0.1) ? rng.normal(40.0f) : rng.normal(3.0f); });  // saturating gates too
        auto run = [&](Backend& b, RowsTensor& xw, RowsTensor& y) {
            DsaOutputGateParams p;
            p.x = xw.data();
            p.gate = g.data();
            p.y = in_place ? xw.data() : y.data();
            p.n_tokens = n_tokens;
            p.n_heads = n_heads;
            p.head_dim = head_dim;
            p.x_token_stride = xl.token_stride;
            p.x_head_stride = xl.head_stride;
            p.gate_row_stride = gl.token_stride;
            p.y_token_stride = yl.token_stride;
            p.y_head_stride = yl.head_stride;
            p.mode = mode;
            p.x_type = xt;
            p.gate_type = gt;
            p.y_type = yt;
            return b.dsa_output_gate(p);
        };
        RowsTensor want_x(xl, xt), want(yl, yt);
        want_x.copy_from(x);
        ASSERT_TRUE(run(*ref, want_x, want).is_ok());
        const std::vector<double> want_v = in_place ? want_x.values() : want.values();
        std::vector<double> tol;
        for (double v : want_v) tol.push_back(8 * kU * std::fabs(v) + (yt == DType::bf16 ? bf16_ulp(std::fabs(v) * (1 + 8 * kU)) : 0.0) + 1e-38);
        for (auto& nb : backends) {
            RowsTensor xw(xl, xt), got(yl, yt);
            xw.copy_from(x);
            const Status st = run(*nb.backend, xw, got);
            ASSERT_TRUE(st.is_ok()) << nb.spec << ": " << st.to_string();
            EXPECT_TRUE(all_close(want_v, in_place ? xw.values() : got.values(), tol, nb.spec));
            EXPECT_TRUE((in_place ? xw : got).intact(nb.spec));
            EXPECT_TRUE(g.intact(nb.spec + " gate untouched"));
        }
    }
}

TEST(DsaOutputGate, KnownValues) {
    auto backends = host_backends_under_test();
    backends.push_back({"ref", ref_backend()});
    // 2 heads × 2 dims; elementwise gates (0, ln 3, −ln 3, 100) → sigmoid (1/2, 3/4, 1/4, 1).
    const float x[4] = {2, 4, 8, -3};
    const float ge[4] = {0, static_cast<float>(std::log(3.0)), static_cast<float>(-std::log(3.0)), 100};
    const float gh[2] = {0, static_cast<float>(std::log(3.0))};  // headwise: head 0 × 1/2, head 1 × 3/4
    for (auto& nb : backends) {
        SCOPED_TRACE(nb.spec);
        for (const DsaGateMode mode : {DsaGateMode::elementwise, DsaGateMode::headwise}) {
            float y[4];
            DsaOutputGateParams p;
            p.x = x;
            p.gate = mode == DsaGateMode::elementwise ? ge : gh;
            p.y = y;
            p.n_tokens = 1;
            p.n_heads = 2;
            p.head_dim = 2;
            p.x_token_stride = p.y_token_stride = 4;
            p.x_head_stride = p.y_head_stride = 2;
            p.gate_row_stride = mode == DsaGateMode::elementwise ? 4 : 2;
            p.mode = mode;
            ASSERT_TRUE(nb.backend->dsa_output_gate(p).is_ok());
            const float want_e[4] = {1, 3, 2, -3}, want_h[4] = {1, 2, 6, -2.25f};
            for (int i = 0; i < 4; ++i) EXPECT_NEAR(y[i], (mode == DsaGateMode::elementwise ? want_e : want_h)[i], 2e-6) << i;
        }
    }
}

TEST(DsaOutputGate, ValidateRejects) {
    float buf[32] = {};
    DsaOutputGateParams p;
    p.x = buf;
    p.gate = buf + 16;
    p.y = buf + 8;
    p.n_tokens = 2;
    p.n_heads = 2;
    p.head_dim = 2;
    p.x_token_stride = p.y_token_stride = 4;
    p.x_head_stride = p.y_head_stride = 2;
    p.gate_row_stride = 4;
    EXPECT_TRUE(validate(p).is_ok()) << validate(p).to_string();
    p.y = buf + 2;  // partially overlaps x
    Status s = validate(p);
    EXPECT_NE(s.message().find("overlap"), std::string::npos) << s.to_string();
    p.y = buf + 8;
    p.gate_row_stride = 4;
    p.gate = buf + 6;  // overlaps y
    s = validate(p);
    EXPECT_NE(s.message().find("gate"), std::string::npos) << s.to_string();
    p.gate = buf + 16;
    p.gate_type = DType::i32;
    s = validate(p);
    EXPECT_NE(s.message().find("gate_type"), std::string::npos) << s.to_string();
}

}  // namespace
}  // namespace sieve::test
