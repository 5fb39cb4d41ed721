// Conformance of the QSA expansion (ops/qsa_expand.h): the test vectors of qsa.md §10 on every
// backend, ref against an independent restatement of §4.6, and every backend against ref.
#include <algorithm>
#include <numeric>
#include <set>

#include "harness.h"
#include "sieve/ops/qsa_expand.h"

namespace sieve::test {
namespace {

struct ExpandCase {
    int64_t ratio, block_topk, out_width;
    std::vector<int64_t> positions, seq_lens;
    std::vector<std::vector<int32_t>> sel;  // per token, block_topk entries
};

Status run_expand(Backend& b, const ExpandCase& c, std::vector<int32_t>& out, std::vector<int32_t>& count,
                  int64_t out_stride) {
    const int64_t T = static_cast<int64_t>(c.positions.size());
    std::vector<int32_t> sel;
    for (const auto& row : c.sel) sel.insert(sel.end(), row.begin(), row.end());
    out.assign(static_cast<size_t>(std::max<int64_t>(T * out_stride, 1)), 0x7f7f7f7f);
    count.assign(static_cast<size_t>(std::max<int64_t>(T, 1)), -7);
    QsaExpandParams p;
    p.sel = sel.data();
    p.positions = c.positions.data();
    p.seq_lens = c.seq_lens.data();
    p.out = out.data();
    p.out_count = count.data();
    p.n_tokens = T;
    p.ratio = c.ratio;
    p.block_topk = c.block_topk;
    p.out_width = c.out_width;
    p.sel_row_stride = c.block_topk;
    p.out_row_stride = out_stride;
    return b.qsa_expand(p);
}

std::set<int32_t> valid_set(const std::vector<int32_t>& out, int64_t t, int64_t width, int64_t stride) {
    std::set<int32_t> s;
    for (int64_t c = 0; c < width; ++c)
        if (out[static_cast<size_t>(t * stride + c)] >= 0) s.insert(out[static_cast<size_t>(t * stride + c)]);
    return s;
}

TEST(QsaExpandKnownValues, SpecTestVectors) {
    auto ref = ref_backend();
    auto backends = backends_under_test();
    for (auto& [name, b] : ref_and(*ref, backends)) {
        SCOPED_TRACE(name);
        std::vector<int32_t> out, count;
        // §10 expansion, r = 4, token_topk = 8 (block_topk 2), W = 11.
        ExpandCase a{4, 2, 11, {5, 10}, {6, 11}, {{0, -1}, {1, 0}}};
        ASSERT_TRUE(run_expand(*b, a, out, count, 11).is_ok());
        EXPECT_EQ(std::vector<int32_t>(out.begin(), out.begin() + 11),
                  (std::vector<int32_t>{0, 1, 2, 3, 4, 5, -1, -1, -1, -1, -1}));
        // [4,5,6,7,0,1,2,3,8,9,10] in the reference's score order; sets are what count (§4.6).
        EXPECT_EQ(valid_set(out, 1, 11, 11), (std::set<int32_t>{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10}));
        EXPECT_EQ(count[0], 6);
        EXPECT_EQ(count[1], 11);
        // §10 no complete groups: r = 4, budget 2048, L = 3.
        ExpandCase b3{4, 512, 2051, {1, 2}, {3, 3}, {std::vector<int32_t>(512, -1), std::vector<int32_t>(512, -1)}};
        ASSERT_TRUE(run_expand(*b, b3, out, count, 2051).is_ok());
        std::vector<int32_t> row0(2051, -1), row1(2051, -1);
        row0[0] = 0, row0[1] = 1;
        row1[0] = 0, row1[1] = 1, row1[2] = 2;
        EXPECT_EQ(std::vector<int32_t>(out.begin(), out.begin() + 2051), row0);
        EXPECT_EQ(std::vector<int32_t>(out.begin() + 2051, out.begin() + 4102), row1);
        // A real selection (visible 5 > block_topk 2), sel in top-k order, tails of 0 and 3 tokens;
        // a token whose own just-completed group is not selected does not attend to itself (§4.5).
        ExpandCase c{4, 2, 11, {19, 22, 23}, {24, 24, 24}, {{3, 1}, {0, 4}, {4, 5}}};
        ASSERT_TRUE(run_expand(*b, c, out, count, 12).is_ok());
        EXPECT_EQ(std::vector<int32_t>(out.begin(), out.begin() + 11),
                  (std::vector<int32_t>{12, 13, 14, 15, 4, 5, 6, 7, -1, -1, -1}));
        EXPECT_EQ(std::vector<int32_t>(out.begin() + 12, out.begin() + 23),
                  (std::vector<int32_t>{0, 1, 2, 3, 16, 17, 18, 19, 20, 21, 22}));
        EXPECT_EQ(std::vector<int32_t>(out.begin() + 24, out.begin() + 35),
                  (std::vector<int32_t>{16, 17, 18, 19, 20, 21, 22, 23, -1, -1, -1}));
        EXPECT_EQ(out[11], 0x7f7f7f7f);  // the stride gap is not written
        EXPECT_EQ(count[2], 8);
    }
}

// Every row of every backend: ref's bytes; ref's rows: the §4.6 rule restated as sets.
TEST(QsaExpandConformance, EveryBackendMatchesRef) {
    auto ref = ref_backend();
    auto backends = backends_under_test();
    Rng rng(31337);
    for (int rep = 0; rep < 40; ++rep) {
        ExpandCase c;
        c.ratio = rng.pick<int64_t>({1, 2, 3, 4, 5, 8});
        c.block_topk = rng.pick<int64_t>({1, 2, 3, 4, 16});
        c.out_width = c.block_topk * c.ratio + c.ratio - 1 + rng.pick<int64_t>({0, 0, 3});
        const int64_t T = rng.integer(0, 20);
        for (int64_t t = 0; t < T; ++t) {
            const int64_t L = rng.integer(1, 200);
            const int64_t p = rng.coin() ? L - 1 : rng.integer(0, L - 1);
            c.positions.push_back(p);
            c.seq_lens.push_back(L);
            const int64_t visible = std::min((p + 1) / c.ratio, L / c.ratio);
            std::vector<int32_t> groups(static_cast<size_t>(visible));
            std::iota(groups.begin(), groups.end(), 0);
            std::shuffle(groups.begin(), groups.end(), rng.engine());
            const int64_t nb = std::min<int64_t>(visible, rng.integer(c.block_topk - 1, c.block_topk));
            std::vector<int32_t> row(static_cast<size_t>(c.block_topk), -1);
            for (int64_t j = 0; j < nb; ++j) row[static_cast<size_t>(j)] = groups[static_cast<size_t>(j)];
            c.sel.push_back(row);
        }
        SCOPED_TRACE(fmt::format("rep {} r {} k {} W {} T {}", rep, c.ratio, c.block_topk, c.out_width, T));
        const int64_t stride = c.out_width + rng.integer(0, 2);
        std::vector<int32_t> want, want_count;
        ASSERT_TRUE(run_expand(*ref, c, want, want_count, stride).is_ok());
        for (int64_t t = 0; t < T; ++t) {
            const int64_t p = c.positions[static_cast<size_t>(t)], L = c.seq_lens[static_cast<size_t>(t)];
            const int64_t visible = std::min((p + 1) / c.ratio, L / c.ratio);
            std::set<int32_t> expect;
            if (visible <= c.block_topk) {
                for (int64_t v = 0; v <= p; ++v) expect.insert(static_cast<int32_t>(v));  // dense: every token ≤ p
            } else {
                for (int32_t g : c.sel[static_cast<size_t>(t)])
                    if (g >= 0)
                        for (int64_t m = 0; m < c.ratio; ++m) expect.insert(static_cast<int32_t>(g * c.ratio + m));
                for (int64_t v = visible * c.ratio; v <= p; ++v) expect.insert(static_cast<int32_t>(v));
            }
            EXPECT_EQ(valid_set(want, t, c.out_width, stride), expect) << "token " << t;
            EXPECT_EQ(want_count[static_cast<size_t>(t)], static_cast<int32_t>(expect.size()));
            for (int64_t j = 0; j < c.out_width; ++j) {  // left-compacted, then −1
                const int32_t v = want[static_cast<size_t>(t * stride + j)];
                if (j < static_cast<int64_t>(expect.size())) {
                    EXPECT_GE(v, 0);
                } else {
                    EXPECT_EQ(v, -1);
                }
            }
        }
        for (auto& nb : backends) {
            SCOPED_TRACE(nb.spec);
            std::vector<int32_t> got, got_count;
            ASSERT_TRUE(run_expand(*nb.backend, c, got, got_count, stride).is_ok());
            EXPECT_EQ(want, got);
            EXPECT_EQ(want_count, got_count);
        }
    }
}

}  // namespace
}  // namespace sieve::test
