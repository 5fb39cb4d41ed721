// Conformance of RoPE: every backend produces the same bytes as ref (same cos/sin definition, no
// FMA: ops/rope.h), over pairings, slices, inverse, partial widths, positions, dtypes and strides.
#include "sieve/ops/rope.h"
#include "rows.h"

namespace sieve::test {
namespace {

struct RopeCase {
    int64_t n_tokens, n_heads, head_dim, rot_dim;
    RopePairing pairing;
    RopeSlice slice;
    bool inverse, padded, in_place, yarn;
    DType x_type, y_type, pos_type;
    float attention_factor;
};

TEST(RopeConformance, EveryBackendMatchesRefBitForBit) {
    auto ref = ref_backend();
    auto backends = backends_under_test();
    Rng rng(303);
    // (head_dim, rot_dim): full, partial first/last, rot 2, widths not multiple of 16, > 256 (chunking)
    const std::vector<std::pair<int64_t, int64_t>> dims = {{2, 2},     {4, 4},    {8, 2},    {16, 16},  {64, 64},
                                                           {66, 34},   {128, 64}, {192, 64}, {512, 64}, {576, 64},
                                                           {40, 6},    {320, 320}, {130, 128}};
    // The last four: a step's many tokens of 64 heads (the cuda backend then rotates 8 heads a block, fewer
    // heads a block for fewer tokens).
    for (int c = 0; c < 56; ++c) {
        RopeCase rc;
        std::tie(rc.head_dim, rc.rot_dim) = dims[static_cast<size_t>(c) % dims.size()];
        rc.n_tokens = c < 52 ? rng.pick<int64_t>({1, 3, 9}) : 40;
        rc.n_heads = c < 52 ? rng.pick<int64_t>({1, 2, 5, 64}) : 64;
        rc.pairing = c % 2 ? RopePairing::interleaved : RopePairing::half_split;
        rc.slice = (c / 2) % 2 ? RopeSlice::last : RopeSlice::first;
        rc.inverse = (c / 4) % 2;
        rc.padded = rng.coin();
        rc.x_type = rng.coin() ? DType::bf16 : DType::f32;
        rc.y_type = rng.coin() ? DType::bf16 : DType::f32;
        rc.in_place = rc.x_type == rc.y_type && rng.coin(0.3);
        rc.pos_type = rng.coin() ? DType::i64 : DType::i32;
        rc.yarn = rng.coin();
        rc.attention_factor = rng.coin(0.7) ? 1.0f : 1.3688879f;  // dsa_mla.md: m(40, 1)
        SCOPED_TRACE(fmt::format(
            "case {}: [{}, {}, {}] rot {} {} {} inverse {} x {} y {} pos {} padded {} in_place {} yarn {} a {}", c,
            rc.n_tokens, rc.n_heads, rc.head_dim, rc.rot_dim,
            rc.pairing == RopePairing::interleaved ? "interleaved" : "half_split",
            rc.slice == RopeSlice::first ? "first" : "last", rc.inverse, dtype_name(rc.x_type), dtype_name(rc.y_type),
            dtype_name(rc.pos_type), rc.padded, rc.in_place, rc.yarn, rc.attention_factor));

        RopeFrequencyConfig fc;
        fc.rot_dim = rc.rot_dim;
        fc.base = rng.pick<double>({10000.0, 160000.0, 1e7});
        fc.yarn = rc.yarn;
        fc.yarn_params.factor = rng.pick<double>({4.0, 16.0, 40.0});
        fc.yarn_params.original_max_position = rng.pick<double>({4096.0, 65536.0});
        std::vector<float> inv_freq(static_cast<size_t>(rc.rot_dim / 2));
        ASSERT_TRUE(rope_inv_freq(fc, inv_freq.data()).is_ok());

        GuardedBuffer pos(static_cast<size_t>(rc.n_tokens) * 8);
        for (int64_t t = 0; t < rc.n_tokens; ++t) {
            // small, large, and (i64) above 2^24 where float(p) rounds
            const int64_t p = t == 0 ? 0 : rng.pick<int64_t>({1, 7, 127, 4095, 70000, 1048575});
            const int64_t big = rc.pos_type == DType::i64 && rng.coin(0.2) ? 20000001 : p;
            if (rc.pos_type == DType::i64)
                pos.as<int64_t>()[t] = big;
            else
                pos.as<int32_t>()[t] = static_cast<int32_t>(p);
        }
        const RowsLayout xl = make_rows_layout(rng, rc.n_tokens, rc.n_heads, rc.head_dim, rc.padded);
        const RowsLayout yl = rc.in_place ? xl : make_rows_layout(rng, rc.n_tokens, rc.n_heads, rc.head_dim, rc.padded);
        RowsTensor x(xl, rc.x_type);
        x.fill([&] { return rng.normal(2.0f); });

        auto run = [&](Backend& b, RowsTensor& y_out, RowsTensor& x_work) {
            RopeParams p;
            p.x = x_work.data();
            p.y = rc.in_place ? x_work.data() : y_out.data();
            p.positions = pos.data();
            p.inv_freq = inv_freq.data();
            p.n_tokens = rc.n_tokens;
            p.n_heads = rc.n_heads;
            p.head_dim = rc.head_dim;
            p.rot_dim = rc.rot_dim;
            p.x_token_stride = xl.token_stride;
            p.x_head_stride = xl.head_stride;
            p.y_token_stride = yl.token_stride;
            p.y_head_stride = yl.head_stride;
            p.attention_factor = rc.attention_factor;
            p.pairing = rc.pairing;
            p.slice = rc.slice;
            p.inverse = rc.inverse;
            p.x_type = rc.x_type;
            p.y_type = rc.y_type;
            p.positions_type = rc.pos_type;
            return b.rope(p);
        };
        RowsTensor x_ref(xl, rc.x_type), y_ref(yl, rc.y_type);
        x_ref.copy_from(x);
        ASSERT_TRUE(run(*ref, y_ref, x_ref).is_ok());
        const RowsTensor& want = rc.in_place ? x_ref : y_ref;
        for (auto& nb : backends) {
            SCOPED_TRACE(nb.spec);
            RowsTensor x_work(xl, rc.x_type), y(yl, rc.y_type);
            x_work.copy_from(x);
            const Status st = run(*nb.backend, y, x_work);
            ASSERT_TRUE(st.is_ok()) << st.to_string();
            const RowsTensor& got = rc.in_place ? x_work : y;
            EXPECT_TRUE(bytes_equal(want.data(), got.data(), want.buf.bytes(), "rope y"));
            EXPECT_TRUE(got.intact("rope y"));
        }
    }
}

}  // namespace
}  // namespace sieve::test
