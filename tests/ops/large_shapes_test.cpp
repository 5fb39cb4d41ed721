// Conformance at the families' real shapes (release build only: too slow for the sanitizer job):
// DeepSeek-V4 decode projections with FP8 weights, a prefill batch that the automatic policy hands
// to oneDNN, and top-k over 131072 candidates (V3.2's k = 2048).
#include "harness.h"

namespace sieve::test {
namespace {

TEST(LargeShapes, LinearDecodeAndPrefill) {
    auto ref = ref_backend();
    auto backends = backends_under_test();
    Rng rng(1001);
    // dsv4 wq_a (K 4096 → 1024) at decode, FP8 weights, bf16 math and f32 (exact) math
    run_linear_case(rng, {1, 1024, 4096, DType::f8_e4m3, DType::bf16, DType::bf16, LinearMath::bf16, false, false, false, ScaleKind::pow2},
                    *ref, backends);
    run_linear_case(rng, {1, 1024, 4096, DType::f8_e4m3, DType::f32, DType::f32, LinearMath::f32, false, false, false, ScaleKind::pow2},
                    *ref, backends);
    // a 24-token prefill chunk: oneDNN under the automatic policy; partial 128-blocks on both axes
    run_linear_case(rng, {24, 600, 1100, DType::f8_e4m3, DType::bf16, DType::f32, LinearMath::bf16, true, true, false, ScaleKind::pow2},
                    *ref, backends);
    run_linear_case(rng, {24, 512, 2048, DType::bf16, DType::f32, DType::bf16, LinearMath::f32, true, false, false, ScaleKind::pow2},
                    *ref, backends);
}

TEST(LargeShapes, TopkLongRows) {
    auto ref = ref_backend();
    auto backends = backends_under_test();
    Rng rng(1002);
    run_topk_case(rng, backends, *ref, 2, 131072, 2048, TopkDist::uniform, false, false);
    run_topk_case(rng, backends, *ref, 2, 131072, 2048, TopkDist::zeros_and_signs, true, false);
    run_topk_case(rng, backends, *ref, 3, 65536, 512, TopkDist::ascending, false, true);
    run_topk_case(rng, backends, *ref, 2, 131072, 2048, TopkDist::constant, false, false);  // one bin: no candidate list
    // A decode batch's rows (a GPU backend gives each row its own block when there are many) and a row
    // longer than a GPU cluster's shared memory holds.
    run_topk_case(rng, backends, *ref, 24, 131072, 2048, TopkDist::uniform, true, true);
    run_topk_case(rng, backends, *ref, 20, 131072, 2048, TopkDist::few_values, false, false);
    run_topk_case(rng, backends, *ref, 2, 300000, 2048, TopkDist::zeros_and_signs, true, true);
}

}  // namespace
}  // namespace sieve::test
