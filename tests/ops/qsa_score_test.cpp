// Conformance of the QSA indexer scores (ops/qsa_score.h) against ref with tolerances from the dot
// length; of the fused selection (exactly the top-k of the backend's own scores); and of the group
// top-k the layer runs when it keeps the score rows (the topk op on them, ragged by the visible-group
// count, ties at exactly 0 from the ReLU): every backend picks ref's groups.
#include "qsa_paged.h"
#include "ops/qsa_score.h"
#include "ops/topk.h"

namespace sieve::test {
namespace {

struct ScoreCase {
    int64_t n_tokens, n_heads, head_dim, n_requests, block_size;
    DType q_type, key_type;
    bool padded;
    float q_bias;  // shifts q negative: many heads ≤ 0, many exact-zero scores
};

struct ScoreSetup {
    ScoreCase c;
    RowsTensor q;
    std::unique_ptr<QsaPagedCache> keys;
    std::vector<int32_t> token_request, n_groups;
    int64_t n_cols = 0, row_stride = 0;
    ScoreSetup(Rng& rng, const ScoreCase& sc)
        : c(sc), q(make_rows_layout(rng, sc.n_tokens, sc.n_heads, sc.head_dim, sc.padded), sc.q_type) {
        q.fill([&] { return rng.normal(1.0f) + sc.q_bias; });
        std::vector<int64_t> groups(static_cast<size_t>(sc.n_requests));
        for (auto& g : groups) g = rng.integer(0, 300);
        for (int64_t t = 0; t < sc.n_tokens; ++t) {
            const int32_t qr = static_cast<int32_t>(rng.integer(0, sc.n_requests - 1));
            token_request.push_back(qr);
            const int64_t choice = rng.integer(0, 3);
            const int64_t avail = groups[static_cast<size_t>(qr)];
            n_groups.push_back(static_cast<int32_t>(choice == 0 ? 0 : choice == 1 ? avail : rng.integer(0, avail)));
            n_cols = std::max<int64_t>(n_cols, n_groups.back());
        }
        n_cols += rng.integer(0, 2);
        row_stride = n_cols + (sc.padded ? rng.integer(1, 5) : 0);
        keys = std::make_unique<QsaPagedCache>(rng, groups, sc.block_size,
                                               sc.head_dim * static_cast<int64_t>(dtype_size(sc.key_type)),
                                               sc.padded ? 32 : 0);
        keys->fill(sc.key_type, sc.head_dim, [&] { return rng.normal(1.0f); });
    }
    QsaScoreParams params(float* scores) const {
        QsaScoreParams p;
        p.q = q.data();
        p.keys = keys->view();
        p.tables = keys->tables(token_request);
        p.n_groups = n_groups.data();
        p.scores = scores;
        p.n_tokens = c.n_tokens;
        p.n_heads = c.n_heads;
        p.head_dim = c.head_dim;
        p.q_token_stride = q.l.token_stride;
        p.q_head_stride = q.l.head_stride;
        p.n_cols = n_cols;
        p.scores_row_stride = row_stride;
        p.scale = 1.0f / std::sqrt(static_cast<float>(c.head_dim));
        p.q_type = c.q_type;
        p.key_type = c.key_type;
        return p;
    }
    // The same op selecting k groups per token into `selected` (scores written too when set).
    QsaScoreParams fused_params(float* scores, int32_t* selected, int64_t k) const {
        QsaScoreParams p = params(scores);
        p.selected = selected;
        p.k = k;
        p.selected_row_stride = k;
        return p;
    }
    // The topk op over score rows of this setup, k per row into `out` (row stride k).
    TopkParams topk_params(const float* scores, int64_t k, int32_t* out) const {
        TopkParams p;
        p.scores = scores;
        p.valid_len = n_groups.data();
        p.out = out;
        p.n_rows = c.n_tokens;
        p.n_cols = n_cols;
        p.k = k;
        p.scores_row_stride = row_stride;
        p.out_row_stride = k;
        return p;
    }
    size_t score_bytes() const { return static_cast<size_t>(std::max<int64_t>(1, c.n_tokens * row_stride)) * 4; }
    // The exact score and its tolerance for backend vs ref: each head's dot within γ_{Di+1}·Σ|q_i·k_i|
    // (harness.h), unchanged by the ReLU (1-Lipschitz), the fp32 sum over heads γ_Hi·Σ ReLU, then
    // the scale (one rounding each side).
    std::pair<double, double> exact(int64_t t, int64_t g) const {
        const uint8_t* k = const_cast<QsaPagedCache&>(*keys).entry(token_request[static_cast<size_t>(t)], g);
        const double scale = 1.0f / std::sqrt(static_cast<float>(c.head_dim));  // the params' fp32 scale
        double total = 0, tol = 0, abs_total = 0;
        for (int64_t h = 0; h < c.n_heads; ++h) {
            double d = 0, sabs = 0;
            for (int64_t i = 0; i < c.head_dim; ++i) {
                const double pr = static_cast<double>(q.get(t, h, i)) * load_as_f32(k, c.key_type, i);
                d += pr;
                sabs += std::fabs(pr);
            }
            total += std::max(d, 0.0);
            abs_total += std::max(d, 0.0);
            tol += gamma_n(static_cast<double>(c.head_dim) + 1.0) * sabs;
        }
        tol += gamma_n(static_cast<double>(c.n_heads)) * abs_total;
        tol = scale * tol + 4.0 * kU * scale * abs_total + 1e-30;
        return {scale * total, tol};
    }
};

// Runs the op with a guarded workspace of the backend's size.
Status run_score(Backend& b, const QsaScoreParams& p) {
    const size_t bytes = b.qsa_score_workspace_size(p);
    GuardedBuffer ws(std::max<size_t>(bytes, 1));
    const Status st = b.qsa_score(p, {ws.data(), bytes});
    EXPECT_TRUE(ws.guards_intact("qsa_score workspace"));
    return st;
}

std::vector<ScoreCase> score_cases() {
    return {
        {1, 4, 128, 1, 16, DType::f32, DType::f32, false, 0.0f},     // decode, real indexer shape
        {1, 4, 128, 1, 16, DType::bf16, DType::bf16, true, 0.0f},
        {7, 4, 16, 3, 4, DType::f32, DType::f32, true, -0.5f},       // fixture shape, many zero scores
        {5, 1, 1, 2, 1, DType::f32, DType::bf16, false, 0.0f},
        {9, 3, 37, 2, 5, DType::bf16, DType::f32, true, -1.0f},
        {33, 4, 64, 4, 16, DType::bf16, DType::bf16, false, 0.0f},
        {2, 8, 130, 1, 3, DType::f32, DType::f32, true, 0.25f},
        {4, 2, 8, 1, 16, DType::f32, DType::f32, false, -3.0f},      // nearly all heads ≤ 0: rows of exact 0s
        {3, 4, 128, 2, 64, DType::bf16, DType::bf16, false, 0.0f},   // several key tiles per request
    };
}

TEST(QsaScoreConformance, EveryBackendMatchesRefWithinDotTolerance) {
    auto ref = ref_backend();
    auto backends = backends_under_test();
    Rng rng(5150);
    for (const ScoreCase& sc : score_cases()) {
        SCOPED_TRACE(fmt::format("tokens {} heads {} dim {} requests {} block {} q {} k {}", sc.n_tokens, sc.n_heads,
                                 sc.head_dim, sc.n_requests, sc.block_size, dtype_name(sc.q_type), dtype_name(sc.key_type)));
        ScoreSetup s(rng, sc);
        GuardedBuffer want(s.score_bytes());
        ASSERT_TRUE(run_score(*ref, s.params(want.as<float>())).is_ok());
        // ref itself against the exact value (double sums, one rounding).
        for (int64_t t = 0; t < sc.n_tokens; ++t)
            for (int64_t g = 0; g < s.n_groups[static_cast<size_t>(t)]; ++g) {
                const auto [v, tol] = s.exact(t, g);
                ASSERT_NEAR(want.as<float>()[t * s.row_stride + g], v, 2.0 * kU * std::fabs(v) + 1e-30) << t << " " << g;
                (void)tol;
            }
        for (auto& nb : backends) {
            SCOPED_TRACE(nb.spec);
            GuardedBuffer got(s.score_bytes());
            const Status st = run_score(*nb.backend, s.params(got.as<float>()));
            ASSERT_TRUE(st.is_ok()) << st.to_string();
            std::vector<double> w, gv, tl;
            for (int64_t t = 0; t < sc.n_tokens; ++t) {
                for (int64_t g = 0; g < s.row_stride; ++g) {
                    const size_t o = static_cast<size_t>(t * s.row_stride + g);
                    if (g < s.n_groups[static_cast<size_t>(t)]) {
                        w.push_back(want.as<float>()[o]);
                        gv.push_back(got.as<float>()[o]);
                        tl.push_back(s.exact(t, g).second);
                        EXPECT_GE(got.as<float>()[o], 0.0f);
                    } else {  // columns past n_groups[t] are not written
                        uint32_t bits;
                        std::memcpy(&bits, got.as<float>() + o, 4);
                        EXPECT_EQ(bits, 0x7f7f7f7fu) << "score [" << t << ", " << g << "] written";
                    }
                }
            }
            EXPECT_TRUE(all_close(w, gv, tl, "scores"));
            EXPECT_TRUE(got.guards_intact("scores"));

            // The fused selection is exactly the top-k of this backend's own scores, with or without
            // the score rows written (k below, around and above the group counts).
            for (int64_t k : {int64_t{1}, std::max<int64_t>(1, s.n_cols / 3), s.n_cols + 2}) {
                SCOPED_TRACE("fused k " + std::to_string(k));
                std::vector<int32_t> want_sel(static_cast<size_t>(sc.n_tokens * k), -7);
                ASSERT_TRUE(ref->topk(s.topk_params(got.as<float>(), k, want_sel.data()), {}).is_ok());
                for (bool with_scores : {false, true}) {
                    GuardedBuffer sel(static_cast<size_t>(sc.n_tokens * k) * 4), rows(s.score_bytes());
                    const Status fs = run_score(
                        *nb.backend, s.fused_params(with_scores ? rows.as<float>() : nullptr, sel.as<int32_t>(), k));
                    ASSERT_TRUE(fs.is_ok()) << fs.to_string();
                    EXPECT_TRUE(std::equal(want_sel.begin(), want_sel.end(), sel.as<int32_t>()))
                        << "selection differs, with scores " << with_scores;
                    EXPECT_TRUE(sel.guards_intact("selected"));
                    if (with_scores) {
                        EXPECT_EQ(0, std::memcmp(rows.data(), got.data(), s.score_bytes())) << "score rows differ";
                    }
                }
            }
        }
    }
}

// ref's own fused selection is its top-k of its scores (the oracle the backends are held to above).
TEST(QsaScoreFusedSelection, RefSelectsTheTopkOfItsScores) {
    auto ref = ref_backend();
    Rng rng(5252);
    for (const ScoreCase& sc : score_cases()) {
        ScoreSetup s(rng, sc);
        GuardedBuffer scores(s.score_bytes());
        ASSERT_TRUE(run_score(*ref, s.params(scores.as<float>())).is_ok());
        const int64_t k = std::max<int64_t>(1, s.n_cols / 2);
        std::vector<int32_t> want(static_cast<size_t>(sc.n_tokens * k)), got(want.size(), 99);
        ASSERT_TRUE(ref->topk(s.topk_params(scores.as<float>(), k, want.data()), {}).is_ok());
        ASSERT_TRUE(run_score(*ref, s.fused_params(nullptr, got.data(), k)).is_ok());
        EXPECT_EQ(want, got);
        for (int64_t t = 0; t < sc.n_tokens; ++t) {  // a row without groups selects nothing
            if (s.n_groups[static_cast<size_t>(t)] != 0) continue;
            for (int64_t j = 0; j < k; ++j) EXPECT_EQ(got[static_cast<size_t>(t * k + j)], -1);
        }
    }
}

// The group top-k as the QSA layer runs it: k = block_topk over each row's first n_groups[t]
// scores (rows with fewer groups than k take them all; rows with 0 take none), ties broken toward
// the lower group (exact zeros from the ReLU are common, qsa.md §9 item 3).
TEST(QsaGroupTopkConformance, EveryBackendPicksRefGroups) {
    auto ref = ref_backend();
    auto backends = backends_under_test();
    Rng rng(6161);
    for (const ScoreCase& sc : score_cases()) {
        ScoreSetup s(rng, sc);
        GuardedBuffer scores(s.score_bytes());
        ASSERT_TRUE(run_score(*ref, s.params(scores.as<float>())).is_ok());
        for (int64_t k : {int64_t{1}, int64_t{4}, int64_t{16}, int64_t{512}}) {
            SCOPED_TRACE(fmt::format("tokens {} heads {} dim {} k {}", sc.n_tokens, sc.n_heads, sc.head_dim, k));
            TopkParams p = s.topk_params(scores.as<float>(), k, nullptr);  // out: set per run
            auto run = [&](Backend& b, std::vector<int32_t>& out) {
                out.assign(static_cast<size_t>(sc.n_tokens * k), 99);
                p.out = out.data();
                GuardedBuffer ws(std::max<size_t>(b.topk_workspace_size(p), 1));
                const Status st = b.topk(p, {ws.data(), b.topk_workspace_size(p)});
                EXPECT_TRUE(ws.guards_intact("topk workspace"));
                return st;
            };
            std::vector<int32_t> want;
            ASSERT_TRUE(run(*ref, want).is_ok());
            // Ties to the lower group: a picked group never has a worse-or-equal-scoring lower group left out.
            for (int64_t t = 0; t < sc.n_tokens; ++t) {
                const float* row = scores.as<float>() + t * s.row_stride;
                std::vector<bool> picked(static_cast<size_t>(s.n_groups[static_cast<size_t>(t)]), false);
                for (int64_t j = 0; j < k; ++j)
                    if (want[static_cast<size_t>(t * k + j)] >= 0) picked[static_cast<size_t>(want[static_cast<size_t>(t * k + j)])] = true;
                for (size_t a = 0; a < picked.size(); ++a)
                    for (size_t b = 0; b < a; ++b)
                        if (picked[a] && !picked[b]) {
                            EXPECT_LT(row[b], row[a]) << "row " << t << ": group " << a << " over " << b;
                        }
            }
            for (auto& nb : backends) {
                SCOPED_TRACE(nb.spec);
                std::vector<int32_t> got;
                ASSERT_TRUE(run(*nb.backend, got).is_ok());
                EXPECT_EQ(want, got);
            }
        }
    }
}

}  // namespace
}  // namespace sieve::test
