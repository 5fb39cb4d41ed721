// run_topk_case (harness.h): one top-k case on ref and every backend under test, compared exactly,
// with score distributions that stress the streaming selection (ties, sorted, constant, specials).
#include <algorithm>
#include <limits>

#include "harness.h"
#include "sieve/ops/topk.h"

namespace sieve::test {
namespace {

using Dist = TopkDist;

const char* dist_name(Dist d) {
    switch (d) {
        case Dist::uniform: return "uniform";
        case Dist::few_values: return "few_values";
        case Dist::adjacent_ulps: return "adjacent_ulps";
        case Dist::constant: return "constant";
        case Dist::ascending: return "ascending";
        case Dist::descending: return "descending";
        case Dist::specials: return "specials";
        case Dist::zeros_and_signs: return "zeros_and_signs";
    }
    return "?";
}

float draw(Rng& rng, Dist d, int64_t i) {
    const float inf = std::numeric_limits<float>::infinity();
    switch (d) {
        case Dist::uniform: return rng.normal(3.0f);
        case Dist::few_values: return static_cast<float>(rng.integer(0, 3));  // heavy exact ties
        case Dist::adjacent_ulps: {  // neighbouring floats (keys 1 apart), both signs: threshold off-by-one bugs
            const float base = rng.coin() ? 1.0f : -1.0f;
            return std::nextafter(std::nextafter(base, 2.0f * base), rng.coin() ? 0.0f : 2.0f * base) +
                   static_cast<float>(rng.integer(0, 1)) * std::numeric_limits<float>::epsilon() * base;
        }
        case Dist::constant: return 0.5f;
        case Dist::ascending: return static_cast<float>(i) * 0.25f;           // every new score beats the buffer
        case Dist::descending: return -static_cast<float>(i);
        case Dist::specials: {
            const int64_t r = rng.integer(0, 9);
            if (r == 0) return std::numeric_limits<float>::quiet_NaN();
            if (r == 1) return -std::numeric_limits<float>::quiet_NaN();
            if (r == 2) return inf;
            if (r == 3) return -inf;
            if (r == 4) return std::numeric_limits<float>::denorm_min() * static_cast<float>(rng.integer(-3, 3));
            return rng.normal(1.0f);
        }
        case Dist::zeros_and_signs: {  // ReLU-like: many exact zeros of both signs (equal ranks)
            const int64_t r = rng.integer(0, 3);
            return r == 0 ? 0.0f : r == 1 ? -0.0f : r == 2 ? rng.uniform(0.0f, 1.0f) : -rng.uniform(0.0f, 1.0f);
        }
    }
    return 0.0f;
}

}  // namespace

void run_topk_case(Rng& rng, const std::vector<NamedBackend>& backends, Backend& ref, int64_t n_rows, int64_t n_cols,
                   int64_t k, Dist dist, bool with_valid_len, bool padded) {
    SCOPED_TRACE(fmt::format("rows {} cols {} k {} dist {} valid_len {} padded {}", n_rows, n_cols, k, dist_name(dist),
                             with_valid_len, padded));
    const int64_t s_stride = n_cols + (padded ? rng.integer(1, 9) : 0);
    const int64_t o_stride = k + (padded ? rng.integer(1, 5) : 0);
    GuardedBuffer scores(static_cast<size_t>(std::max<int64_t>(1, n_rows * s_stride)) * 4);
    for (int64_t r = 0; r < n_rows; ++r)
        for (int64_t i = 0; i < n_cols; ++i) scores.as<float>()[r * s_stride + i] = draw(rng, dist, i);
    GuardedBuffer valid(static_cast<size_t>(std::max<int64_t>(1, n_rows)) * 4);
    for (int64_t r = 0; r < n_rows; ++r) {
        const int64_t choice = rng.integer(0, 4);  // 0, fewer than k, exactly k, anything, all
        int64_t v = choice == 0 ? 0 : choice == 1 ? rng.integer(0, std::min(k, n_cols))
                  : choice == 2 ? std::min(k, n_cols) : choice == 3 ? rng.integer(0, n_cols) : n_cols;
        valid.as<int32_t>()[r] = static_cast<int32_t>(v);
    }
    auto run = [&](Backend& b, GuardedBuffer& out, GuardedBuffer& count) {
        TopkParams p;
        p.scores = scores.as<float>();
        p.valid_len = with_valid_len ? valid.as<int32_t>() : nullptr;
        p.out = out.as<int32_t>();
        p.out_count = count.as<int32_t>();
        p.n_rows = n_rows;
        p.n_cols = n_cols;
        p.k = k;
        p.scores_row_stride = s_stride;
        p.out_row_stride = o_stride;
        GuardedBuffer ws(std::max<size_t>(b.topk_workspace_size(p), 1));
        const Status st = b.topk(p, {ws.data(), b.topk_workspace_size(p)});
        EXPECT_TRUE(ws.guards_intact("topk workspace"));
        return st;
    };
    const size_t out_bytes = static_cast<size_t>(std::max<int64_t>(1, n_rows * o_stride)) * 4;
    const size_t count_bytes = static_cast<size_t>(std::max<int64_t>(1, n_rows)) * 4;
    GuardedBuffer want(out_bytes), want_count(count_bytes);
    ASSERT_TRUE(run(ref, want, want_count).is_ok());
    for (auto& nb : backends) {
        SCOPED_TRACE(nb.spec);
        GuardedBuffer got(out_bytes), got_count(count_bytes);
        const Status st = run(*nb.backend, got, got_count);
        ASSERT_TRUE(st.is_ok()) << st.to_string();
        EXPECT_TRUE(bytes_equal(want.data(), got.data(), out_bytes, "topk indices"));
        EXPECT_TRUE(bytes_equal(want_count.data(), got_count.data(), count_bytes, "topk counts"));
        EXPECT_TRUE(got.guards_intact("topk out"));
        EXPECT_TRUE(untouched_outside_rows(got, n_rows, 1, k, o_stride, 0, 4, "topk out"));
        EXPECT_TRUE(got_count.guards_intact("topk out_count"));
    }
}

}  // namespace sieve::test
