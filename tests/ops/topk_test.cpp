// Conformance of row top-k: every backend returns ref's indices exactly (ties to the lower index,
// ascending output, −1 padding, NaN last), over row lengths, k (also > n), valid lengths, score
// distributions, strides (cases: topk_cases.cpp).
#include "harness.h"

namespace sieve::test {

using Dist = TopkDist;
namespace {

const std::vector<Dist> kEveryDist = {Dist::uniform,   Dist::few_values, Dist::adjacent_ulps, Dist::constant,
                                      Dist::ascending, Dist::descending, Dist::specials,      Dist::zeros_and_signs};

TEST(TopkConformance, EveryBackendMatchesRefExactly) {
    auto ref = ref_backend();
    auto backends = backends_under_test();
    Rng rng(606);
    const std::vector<std::pair<int64_t, int64_t>> sizes = {  // (n_cols, k)
        {0, 1},      {1, 1},     {5, 3},     {5, 8},       {16, 16},   {17, 4},     {100, 7},     {100, 100},
        {1000, 1},   {1000, 64}, {1000, 999}, {5000, 512}, {5000, 300}, {20000, 2048}, {33, 1},   {257, 256}};
    int c = 0;
    for (const auto& [n_cols, k] : sizes) {
        for (int rep = 0; rep < 3; ++rep, ++c) {
            const Dist d = kEveryDist[static_cast<size_t>(c) % kEveryDist.size()];
            run_topk_case(rng, backends, *ref, rng.pick<int64_t>({1, 2, 5}), n_cols, k, d, rng.coin(), rng.coin());
        }
    }
}

TEST(TopkConformance, LongRowsAcrossThreads) {
    // Rows long enough for many buffer cuts, and more rows than pool threads.
    auto ref = ref_backend();
    auto backends = backends_under_test();
    Rng rng(607);
    run_topk_case(rng, backends, *ref, 7, 40000, 512, Dist::uniform, false, false);
    run_topk_case(rng, backends, *ref, 3, 40000, 512, Dist::ascending, true, true);
    run_topk_case(rng, backends, *ref, 4, 30000, 2048, Dist::few_values, true, false);
    run_topk_case(rng, backends, *ref, 3, 30000, 700, Dist::adjacent_ulps, false, false);
}

TEST(TopkConformance, ManyRowsEveryDistribution) {
    // More rows than a GPU backend spreads over clusters of blocks: it then gives each row its own block.
    auto ref = ref_backend();
    auto backends = backends_under_test();
    Rng rng(608);
    for (const Dist d : kEveryDist)
        run_topk_case(rng, backends, *ref, rng.pick<int64_t>({17, 33}), rng.pick<int64_t>({300, 5000, 20000}),
                      rng.pick<int64_t>({16, 512, 2048}), d, rng.coin(), rng.coin());
}

}  // namespace
}  // namespace sieve::test
