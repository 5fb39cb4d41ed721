// Conformance of the Walsh–Hadamard transform: every backend produces ref's bytes (fixed butterfly
// order, ops/hadamard.h).
#include "sieve/ops/hadamard.h"
#include "rows.h"

namespace sieve::test {
namespace {

TEST(HadamardConformance, EveryBackendMatchesRefBitForBit) {
    auto ref = ref_backend();
    auto backends = backends_under_test();
    Rng rng(404);
    const std::vector<int64_t> dims = {1, 2, 4, 8, 16, 32, 64, 128, 256, 2048};
    for (int c = 0; c < 30; ++c) {
        const int64_t dim = dims[static_cast<size_t>(c) % dims.size()];
        const int64_t n_tokens = rng.pick<int64_t>({1, 2, 7}), n_heads = rng.pick<int64_t>({1, 4});
        const DType xt = rng.coin() ? DType::bf16 : DType::f32, yt = rng.coin() ? DType::bf16 : DType::f32;
        const bool padded = rng.coin(), in_place = xt == yt && rng.coin(0.3);
        const float scale = rng.coin() ? 1.0f / std::sqrt(static_cast<float>(dim)) : 0.08838834764831845f;
        SCOPED_TRACE(fmt::format("[{}, {}, {}] x {} y {} padded {} in_place {} scale {}", n_tokens, n_heads, dim,
                                 dtype_name(xt), dtype_name(yt), padded, in_place, scale));
        const RowsLayout xl = make_rows_layout(rng, n_tokens, n_heads, dim, padded);
        const RowsLayout yl = in_place ? xl : make_rows_layout(rng, n_tokens, n_heads, dim, padded);
        RowsTensor x(xl, xt);
        x.fill([&] { return rng.normal(1.0f); });
        auto run = [&](Backend& b, RowsTensor& y_out, RowsTensor& x_work) {
            HadamardParams p;
            p.x = x_work.data();
            p.y = in_place ? x_work.data() : y_out.data();
            p.n_tokens = n_tokens;
            p.n_heads = n_heads;
            p.dim = dim;
            p.x_token_stride = xl.token_stride;
            p.x_head_stride = xl.head_stride;
            p.y_token_stride = yl.token_stride;
            p.y_head_stride = yl.head_stride;
            p.scale = scale;
            p.x_type = xt;
            p.y_type = yt;
            return b.hadamard(p);
        };
        RowsTensor x_ref(xl, xt), y_ref(yl, yt);
        x_ref.copy_from(x);
        ASSERT_TRUE(run(*ref, y_ref, x_ref).is_ok());
        const RowsTensor& want = in_place ? x_ref : y_ref;
        for (auto& nb : backends) {
            SCOPED_TRACE(nb.spec);
            RowsTensor x_work(xl, xt), y(yl, yt);
            x_work.copy_from(x);
            const Status st = run(*nb.backend, y, x_work);
            ASSERT_TRUE(st.is_ok()) << st.to_string();
            const RowsTensor& got = in_place ? x_work : y;
            EXPECT_TRUE(bytes_equal(want.data(), got.data(), want.buf.bytes(), "hadamard y"));
            EXPECT_TRUE(got.intact("hadamard y"));
        }
    }
}

}  // namespace
}  // namespace sieve::test
