// Conformance of per-group FP8 quantization: every backend writes ref's bytes for q, both scale
// forms and the fake-quant values, including e4m3 subnormals, saturation, exact power-of-two
// boundaries, all-zero groups and poisoned (NaN / inf) groups.
#include <limits>

#include "sieve/ops/quant_fp8.h"
#include "rows.h"

namespace sieve::test {
namespace {

TEST(QuantFp8Conformance, EveryBackendMatchesRefBitForBit) {
    auto ref = ref_backend();
    auto backends = backends_under_test();
    Rng rng(505);
    const std::vector<std::pair<int64_t, int64_t>> shapes = {  // (dim, group_size)
        {128, 128}, {448, 64}, {512, 128}, {64, 64}, {96, 16}, {21, 3}, {7, 1}, {256, 32}, {1024, 128}};
    for (int c = 0; c < 36; ++c) {
        const int64_t dim = shapes[static_cast<size_t>(c) % shapes.size()].first;  // (no structured binding: clang 14
        const int64_t group = shapes[static_cast<size_t>(c) % shapes.size()].second;  // cannot capture one)
        const int64_t n_tokens = rng.pick<int64_t>({1, 3, 6}), n_heads = rng.pick<int64_t>({1, 2});
        const int64_t n_groups = dim / group;
        const DType xt = rng.coin() ? DType::bf16 : DType::f32, dt = rng.coin() ? DType::bf16 : DType::f32;
        const bool padded = rng.coin();
        bool want_q = rng.coin(0.8), want_sb = rng.coin(0.7), want_sf = rng.coin(0.6), want_dq = rng.coin(0.6);
        if (!want_q && !want_sb && !want_sf && !want_dq) want_q = true;
        const bool in_place = want_dq && xt == dt && rng.coin(0.4);
        SCOPED_TRACE(fmt::format("case {}: [{}, {}, {}] group {} x {} dequant {} padded {} q {} sb {} sf {} dq {} in_place {}",
                                 c, n_tokens, n_heads, dim, group, dtype_name(xt), dtype_name(dt), padded, want_q,
                                 want_sb, want_sf, want_dq, in_place));
        const RowsLayout xl = make_rows_layout(rng, n_tokens, n_heads, dim, padded);
        const RowsLayout ql = make_rows_layout(rng, n_tokens, n_heads, dim, padded);
        const RowsLayout sl = make_rows_layout(rng, n_tokens, n_heads, n_groups, padded);
        const RowsLayout dl = in_place ? xl : make_rows_layout(rng, n_tokens, n_heads, dim, padded);
        RowsTensor x(xl, xt);
        // Per group: a magnitude from 2^-30 to 2^30, some groups exactly at 448·2^e (amax/448 a power of two),
        // some all zero, some with tiny members (e4m3 subnormal codes), a few with NaN or ±inf.
        int64_t member = 0;
        float mag = 1.0f;
        int kind = 0;
        x.fill([&] {
            if (member++ % group == 0) {
                mag = std::ldexp(1.0f, static_cast<int>(rng.integer(-30, 30)));
                kind = static_cast<int>(rng.integer(0, 9));
            }
            const bool first = (member - 1) % group == 0;
            switch (kind) {
                case 0: return 0.0f;
                case 1: return first ? 448.0f * mag : rng.uniform(-448.0f, 448.0f) * mag;
                case 2: return first ? std::numeric_limits<float>::quiet_NaN() : rng.normal(mag);
                case 3: return first ? -std::numeric_limits<float>::infinity() : rng.normal(mag);
                case 4: return rng.coin() ? rng.normal(mag) : rng.normal(mag) * 1e-4f;
                default: return rng.normal(mag);
            }
        });
        auto run = [&](Backend& b, RowsTensor& x_work, RowsTensor& q, RowsTensor& sb, RowsTensor& sf, RowsTensor& dq) {
            QuantFp8Params p;
            p.x = x_work.data();
            p.q = want_q ? static_cast<uint8_t*>(q.data()) : nullptr;
            p.scale_ue8m0 = want_sb ? static_cast<uint8_t*>(sb.data()) : nullptr;
            p.scale_f32 = want_sf ? static_cast<float*>(sf.data()) : nullptr;
            p.dequant = want_dq ? (in_place ? x_work.data() : dq.data()) : nullptr;
            p.n_tokens = n_tokens;
            p.n_heads = n_heads;
            p.dim = dim;
            p.group_size = group;
            p.x_token_stride = xl.token_stride;
            p.x_head_stride = xl.head_stride;
            p.q_token_stride = ql.token_stride;
            p.q_head_stride = ql.head_stride;
            p.scale_token_stride = sl.token_stride;
            p.scale_head_stride = sl.head_stride;
            p.dequant_token_stride = dl.token_stride;
            p.dequant_head_stride = dl.head_stride;
            p.x_type = xt;
            p.dequant_type = dt;
            return b.quant_fp8(p);
        };
        RowsTensor rx(xl, xt), rq(ql, DType::u8), rsb(sl, DType::u8), rsf(sl, DType::f32), rdq(dl, dt);
        rx.copy_from(x);
        ASSERT_TRUE(run(*ref, rx, rq, rsb, rsf, rdq).is_ok());
        for (auto& nb : backends) {
            SCOPED_TRACE(nb.spec);
            RowsTensor gx(xl, xt), gq(ql, DType::u8), gsb(sl, DType::u8), gsf(sl, DType::f32), gdq(dl, dt);
            gx.copy_from(x);
            const Status st = run(*nb.backend, gx, gq, gsb, gsf, gdq);
            ASSERT_TRUE(st.is_ok()) << st.to_string();
            EXPECT_TRUE(bytes_equal(rx.data(), gx.data(), rx.buf.bytes(), "x / in-place dequant"));
            EXPECT_TRUE(bytes_equal(rq.data(), gq.data(), rq.buf.bytes(), "q"));
            EXPECT_TRUE(bytes_equal(rsb.data(), gsb.data(), rsb.buf.bytes(), "scale_ue8m0"));
            EXPECT_TRUE(bytes_equal(rsf.data(), gsf.data(), rsf.buf.bytes(), "scale_f32"));
            EXPECT_TRUE(bytes_equal(rdq.data(), gdq.data(), rdq.buf.bytes(), "dequant"));
            for (auto* t : {&gq, &gsb, &gsf, &gdq}) EXPECT_TRUE(t->intact("quant output"));
        }
    }
}

}  // namespace
}  // namespace sieve::test
