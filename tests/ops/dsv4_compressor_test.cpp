// ops/compressor.h: state rows bit-exact on every backend; pooling of every entry against the
// formula of deepseek_v4.md §3.4 ("exact profile, complete") evaluated here in double from the
// per-token projections (not from the state rows), for overlapping (CSA) and plain (HCA)
// compressors, on ref and every cpu backend; validate() rejections.
#include <cmath>

#include "paged_cache.h"
#include "sieve/ops/compressor.h"
#include "sieve/ops/op_common.h"

namespace sieve::test {
namespace {

struct CompressorCase {
    int64_t n_tokens, head_dim, ratio;
    bool overlap;
    int64_t block_size;
};

TEST(CompressorConformance, StateRowsAndPoolingFollowTheSpec) {
    auto ref = ref_backend();
    auto backends = backends_under_test();
    std::vector<Backend*> all = {ref.get()};
    for (auto& nb : backends) all.push_back(nb.backend.get());
    Rng rng(4303);
    const std::vector<CompressorCase> cases = {
        {23, 16, 4, true, 3},    // the test model's indexer compressor (c 16)
        {37, 32, 4, true, 8},    // the test model's CSA compressor
        {50, 32, 16, false, 5},  // the test model's HCA compressor (ratio 16)
        {9, 512, 4, true, 8},    // release widths: C4 main, 2·512 channels
        {260, 64, 128, false, 64},
        {13, 70, 3, false, 2},   // odd width (chunk tails), ratio 3
        {11, 5, 1, false, 1},    // ratio 1: every token is its own entry
        {12, 9, 2, true, 4},
    };
    for (size_t ci = 0; ci < cases.size(); ++ci) {
        const CompressorCase& c = cases[ci];
        const int64_t coff = c.overlap ? 2 : 1, width = coff * c.head_dim, m = c.ratio;
        SCOPED_TRACE(fmt::format("case {}: T {} c {} m {} overlap {}", ci, c.n_tokens, c.head_dim, m, c.overlap));
        // Per-token projections a_s, b_s and ape, padded rows.
        const int64_t kv_stride = width + 3, gate_stride = width + 5;
        std::vector<float> kv(static_cast<size_t>(c.n_tokens * kv_stride)), gate(static_cast<size_t>(c.n_tokens * gate_stride));
        std::vector<float> ape(static_cast<size_t>(m * width));
        for (float& v : kv) v = rng.normal(1.0f);
        for (float& v : gate) v = rng.normal(2.0f);
        for (float& v : ape) v = rng.normal(0.5f);
        std::vector<int64_t> positions(static_cast<size_t>(c.n_tokens));
        for (int64_t t = 0; t < c.n_tokens; ++t) positions[static_cast<size_t>(t)] = t;
        const int64_t n_blocks = (c.n_tokens + c.block_size - 1) / c.block_size + 2;
        PagedTestCache proto(n_blocks, c.block_size, 8 * width, 64);
        std::vector<int32_t> slots = random_slots(rng, c.n_tokens, proto.n_slots());

        // Expected state image: row(s) = [a_s | b_s + ape[p mod m]] in fp32.
        std::vector<uint8_t> img(proto.buf.bytes(), kPoison);
        for (int64_t t = 0; t < c.n_tokens; ++t) {
            const int32_t s = slots[static_cast<size_t>(t)];
            float* row = reinterpret_cast<float*>(img.data() + (s / c.block_size) * proto.block_bytes +
                                                  (s % c.block_size) * 8 * width);
            for (int64_t i = 0; i < width; ++i) {
                row[i] = kv[static_cast<size_t>(t * kv_stride + i)];
                row[width + i] = gate[static_cast<size_t>(t * gate_stride + i)] + ape[static_cast<size_t>((t % m) * width + i)];
            }
        }
        // Entries and their gather lists: positions p − coff·m + 1 … p of the token p completing entry k.
        const int64_t n_entries = c.n_tokens / m, g_stride = coff * m + 1;
        std::vector<int32_t> gather(static_cast<size_t>(std::max<int64_t>(n_entries, 1) * g_stride), -9);
        for (int64_t k = 0; k < n_entries; ++k) {
            const int64_t p = (k + 1) * m - 1;
            for (int64_t j = 0; j < coff * m; ++j) {
                const int64_t pos = p - coff * m + 1 + j;
                gather[static_cast<size_t>(k * g_stride + j)] = pos < 0 ? -1 : slots[static_cast<size_t>(pos)];
            }
        }
        // §3.4 exact formula, in double, from a_s / b_s: Ca half of block k−1 (channels [0, c)), Cb half
        // of block k (channels [c, 2c)); HCA: block k, channels [0, c).
        std::vector<double> want;
        std::vector<double> tol;
        for (int64_t k = 0; k < n_entries; ++k) {
            for (int64_t e = 0; e < c.head_dim; ++e) {
                std::vector<std::pair<double, double>> rows;  // (a, b + ape)
                auto add = [&](int64_t s, int64_t col) {
                    const float b = gate[static_cast<size_t>(s * gate_stride + col)] + ape[static_cast<size_t>((s % m) * width + col)];
                    rows.emplace_back(kv[static_cast<size_t>(s * kv_stride + col)], b);
                };
                if (c.overlap)
                    for (int64_t s = (k - 1) * m; s < k * m; ++s)
                        if (s >= 0) add(s, e);
                for (int64_t s = k * m; s < (k + 1) * m; ++s) add(s, c.overlap ? c.head_dim + e : e);
                double mx = -INFINITY, amax = 0.0, spread = 0.0;
                for (auto& [a, b] : rows) mx = std::max(mx, b), amax = std::max(amax, std::fabs(a));
                double num = 0.0, den = 0.0;
                for (auto& [a, b] : rows) {
                    num += std::exp(b - mx) * a;
                    den += std::exp(b - mx);
                    spread = std::max(spread, mx - b);
                }
                want.push_back(num / den);
                // exp of an fp32 difference: relative weight error ≤ u·(|b − max| + 8); the weighted mean of
                // the a's moves by ≤ 2·that·max|a|, plus its own fp32 sums γ_{n+2}·max|a| (doubled: division).
                const double n = static_cast<double>(rows.size());
                tol.push_back(amax * (2.0 * kU * (spread + 8.0) + 2.0 * gamma_n(n + 2)) + 1e-30);
            }
        }

        for (Backend* b : all) {
            SCOPED_TRACE(b->name());
            PagedTestCache state(n_blocks, c.block_size, 8 * width, 64);
            CompressorStateStoreParams sp;
            sp.kv = kv.data();
            sp.gate = gate.data();
            sp.ape = ape.data();
            sp.positions = positions.data();
            sp.slots = slots.data();
            sp.state = state.view();
            sp.n_tokens = c.n_tokens;
            sp.width = width;
            sp.ratio = m;
            sp.kv_row_stride = kv_stride;
            sp.gate_row_stride = gate_stride;
            ASSERT_TRUE(b->compressor_state_store(sp).is_ok());
            EXPECT_TRUE(bytes_equal(img.data(), state.buf.data(), img.size(), "state rows"));
            EXPECT_TRUE(state.buf.guards_intact("state"));

            const int64_t out_stride = c.head_dim + 2;
            GuardedBuffer out(static_cast<size_t>(std::max<int64_t>(n_entries * out_stride, 1)) * 4);
            CompressorPoolParams pp;
            pp.state = state.view();
            pp.gather_slots = gather.data();
            pp.out = out.as<float>();
            pp.n_entries = n_entries;
            pp.head_dim = c.head_dim;
            pp.ratio = m;
            pp.overlap = c.overlap;
            pp.gather_stride = g_stride;
            pp.out_row_stride = out_stride;
            ASSERT_TRUE(b->compressor_pool(pp).is_ok());
            std::vector<double> got;
            for (int64_t k = 0; k < n_entries; ++k)
                for (int64_t e = 0; e < c.head_dim; ++e) got.push_back(out.as<float>()[k * out_stride + e]);
            EXPECT_TRUE(all_close(want, got, tol, "pooled entries"));
            EXPECT_TRUE(untouched_outside_rows(out, n_entries, 1, c.head_dim, out_stride, 0, 4, "pooled entries"));
            EXPECT_TRUE(out.guards_intact("pooled entries"));
        }
    }
}

TEST(CompressorKnownValues, EqualScoresAverageAndAbsentRowsDoNotCount) {
    // Two valid rows with equal scores: the mean of their a's. Overlap: row 0 contributes its column e
    // (Ca), row 2 its column c + e (Cb); rows 1 and 3 absent.
    auto ref = ref_backend();
    auto backends = host_backends_under_test();
    std::vector<Backend*> all = {ref.get()};
    for (auto& nb : backends) all.push_back(nb.backend.get());
    for (Backend* b : all) {
        SCOPED_TRACE(b->name());
        const int64_t c = 2, width = 4;
        PagedTestCache state(1, 4, 8 * width, 64);
        float* r0 = reinterpret_cast<float*>(state.view().row(0));
        float* r2 = reinterpret_cast<float*>(state.view().row(2));
        const float row0[8] = {1, 10, 100, 1000, 0.5f, 0.5f, -50, -50};  // a | b: Ca = (1, 10) at score 0.5
        const float row2[8] = {7, 7, 3, 30, -60, -60, 0.5f, 0.5f};       // Cb = (3, 30) at score 0.5
        std::memcpy(r0, row0, 32);
        std::memcpy(r2, row2, 32);
        const int32_t gather[4] = {0, -1, 2, -1};  // m = 2: rows 0, 1 previous block, rows 2, 3 own block
        float out[2] = {-1, -1};
        CompressorPoolParams pp;
        pp.state = state.view();
        pp.gather_slots = gather;
        pp.out = out;
        pp.n_entries = 1;
        pp.head_dim = c;
        pp.ratio = 2;
        pp.overlap = true;
        ASSERT_TRUE(b->compressor_pool(pp).is_ok());
        EXPECT_FLOAT_EQ(out[0], 2.0f);   // (1 + 3) / 2
        EXPECT_FLOAT_EQ(out[1], 20.0f);  // (10 + 30) / 2
        const int32_t none[4] = {-1, -1, -1, -1};
        pp.gather_slots = none;
        ASSERT_TRUE(b->compressor_pool(pp).is_ok());
        EXPECT_EQ(out[0], 0.0f);
        EXPECT_EQ(out[1], 0.0f);
    }
}

TEST(CompressorValidate, RejectsBadInputs) {
    PagedTestCache state(1, 4, 8 * 8, 64);
    std::vector<int32_t> gather = {0, 1, 2, 3, -1, -1, -1, -1};
    float out[4];
    CompressorPoolParams p;
    p.state = state.view();
    p.gather_slots = gather.data();
    p.out = out;
    p.n_entries = 1;
    p.head_dim = 4;
    p.ratio = 4;
    p.overlap = true;
    EXPECT_TRUE(validate(p).is_ok()) << validate(p).message();
    CompressorPoolParams q = p;
    q.head_dim = 8;  // width 16 → rows of 128 bytes, the cache has 64
    EXPECT_NE(validate(q).message().find("entry_bytes = 64"), std::string::npos) << validate(q).message();
    q = p;
    gather[5] = -4;
    EXPECT_TRUE(validate(q).is_ok());
    EXPECT_NE(check_indices(q).message().find("gather_slots[0, 5] = -4"), std::string::npos) << check_indices(q).message();
    gather[5] = -1;
    CompressorStateStoreParams s;
    float kv[8] = {}, gate[8] = {}, ape[32] = {};
    int64_t pos = -1;
    int32_t slot = 0;
    s.kv = kv;
    s.gate = gate;
    s.ape = ape;
    s.positions = &pos;
    s.slots = &slot;
    s.state = state.view();
    s.n_tokens = 1;
    s.width = 8;
    s.ratio = 4;
    EXPECT_TRUE(validate(s).is_ok());
    EXPECT_NE(check_indices(s).message().find("positions[0] = -1"), std::string::npos) << check_indices(s).message();
    pos = 3;
    slot = -2;
    EXPECT_NE(check_indices(s).message().find("slots[0] = -2"), std::string::npos) << check_indices(s).message();
    slot = 0;
    EXPECT_TRUE(validate_and_check_indices(s).is_ok());
}

}  // namespace
}  // namespace sieve::test
