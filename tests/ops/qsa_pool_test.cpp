// Conformance of QSA group pooling (ops/qsa_pool.h): every backend returns ref's bytes exactly (the
// contract fixes the summation order), over ratios, head dims, dtypes, strides and slot orders; and
// ref against hand-computed means.
#include "paged_cache.h"
#include "sieve/ops/qsa_pool.h"

namespace sieve::test {
namespace {

struct PoolRun {
    Status status;
    std::unique_ptr<GuardedBuffer> out;
};

PoolRun run_pool(Backend& b, const QsaPoolParams& base, size_t out_bytes) {
    PoolRun r;
    r.out = std::make_unique<GuardedBuffer>(std::max<size_t>(out_bytes, 1));
    QsaPoolParams p = base;
    p.out = r.out->data();
    r.status = b.qsa_pool(p);
    return r;
}

TEST(QsaPoolConformance, EveryBackendMatchesRefBitExactly) {
    auto ref = ref_backend();
    auto backends = backends_under_test();
    Rng rng(4242);
    const std::vector<int64_t> ratios = {1, 2, 3, 4, 7, 8};
    const std::vector<int64_t> dims = {1, 5, 16, 33, 64, 128, 130};
    int c = 0;
    for (int64_t ratio : ratios) {
        for (int64_t dim : dims) {
            const DType kt = (c % 3 == 0) ? DType::bf16 : DType::f32;
            const DType ot = (c % 2 == 0) ? DType::bf16 : DType::f32;
            ++c;
            const int64_t n_groups = rng.pick<int64_t>({0, 1, 3, 17});
            const int64_t tokens = std::max<int64_t>(n_groups * ratio, 1) + rng.integer(0, 5);
            SCOPED_TRACE(fmt::format("ratio {} dim {} groups {} key {} out {}", ratio, dim, n_groups, dtype_name(kt),
                                     dtype_name(ot)));
            PagedTestCache cache(rng, {tokens}, rng.pick<int64_t>({1, 4, 16}),
                                dim * static_cast<int64_t>(dtype_size(kt)), rng.integer(0, 3) * 16);
            cache.fill(kt, dim, [&] { return rng.normal(rng.coin(0.1) ? 100.0f : 1.0f); });
            std::vector<int64_t> slots;
            for (int64_t g = 0; g < n_groups; ++g)
                for (int64_t j = 0; j < ratio; ++j) slots.push_back(cache.slot(0, rng.integer(0, tokens - 1)));
            QsaPoolParams p;
            p.keys = cache.view();
            p.member_slots = slots.data();
            p.n_groups = n_groups;
            p.ratio = ratio;
            p.head_dim = dim;
            p.out_row_stride = dim + rng.integer(0, 3);
            p.key_type = kt;
            p.out_type = ot;
            const size_t out_bytes = static_cast<size_t>(rows_extent(n_groups, 1, dim, p.out_row_stride, 0)) * dtype_size(ot);
            PoolRun want = run_pool(*ref, p, out_bytes);
            ASSERT_TRUE(want.status.is_ok()) << want.status.to_string();
            for (auto& nb : backends) {
                SCOPED_TRACE(nb.spec);
                PoolRun got = run_pool(*nb.backend, p, out_bytes);
                ASSERT_TRUE(got.status.is_ok()) << got.status.to_string();
                EXPECT_TRUE(bytes_equal(want.out->data(), got.out->data(), out_bytes, "pooled"));
                EXPECT_TRUE(got.out->guards_intact("pooled"));
                EXPECT_TRUE(untouched_outside_rows(*got.out, n_groups, 1, dim, p.out_row_stride, 0, dtype_size(ot), "pooled"));
            }
            EXPECT_TRUE(cache.buf.guards_intact("keys"));
        }
    }
}

// ref against the mean written out by hand (qsa.md §4.3, §10 "Compression": groups {0..3}, {4..7}).
TEST(QsaPoolKnownValues, MeanOfMembersInFp32ThenOneRounding) {
    auto ref = ref_backend();
    auto backends = host_backends_under_test();
    Rng rng(7);
    PagedTestCache cache(rng, {8}, 4, 2 * 4);
    const float keys[8][2] = {{1, -2}, {2, 4}, {3, 8}, {4, 16}, {0.5f, 1e-3f}, {0.25f, 3}, {0.125f, 5}, {1, 7}};
    for (int64_t e = 0; e < 8; ++e) std::memcpy(cache.entry(0, e), keys[e], 8);
    const std::vector<int64_t> slots = {cache.slot(0, 0), cache.slot(0, 1), cache.slot(0, 2), cache.slot(0, 3),
                                        cache.slot(0, 4), cache.slot(0, 5), cache.slot(0, 6), cache.slot(0, 7)};
    QsaPoolParams p;
    p.keys = cache.view();
    p.member_slots = slots.data();
    p.n_groups = 2;
    p.ratio = 4;
    p.head_dim = 2;
    p.out_row_stride = 2;
    for (auto& [name, b] : ref_and(*ref, backends)) {
        SCOPED_TRACE(name);
        float out[4] = {};
        p.out = out;
        p.out_type = DType::f32;
        ASSERT_TRUE(b->qsa_pool(p).is_ok());
        EXPECT_EQ(out[0], 2.5f);
        EXPECT_EQ(out[1], 6.5f);
        EXPECT_EQ(out[2], ((0.5f + 0.25f) + 0.125f + 1.0f) / 4.0f);
        EXPECT_EQ(out[3], (((1e-3f + 3.0f) + 5.0f) + 7.0f) / 4.0f);
        uint16_t outb[4] = {};
        p.out = outb;
        p.out_type = DType::bf16;
        ASSERT_TRUE(b->qsa_pool(p).is_ok());
        EXPECT_EQ(bf16_to_f32(outb[1]), 6.5f);
        EXPECT_EQ(outb[3], f32_to_bf16((((1e-3f + 3.0f) + 5.0f) + 7.0f) / 4.0f));  // the fp32 mean, rounded once
    }
}

}  // namespace
}  // namespace sieve::test
