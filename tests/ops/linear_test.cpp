// Conformance of linear: every backend (own kernels at every ISA, oneDNN, the automatic policy)
// against ref, for f32 / bf16 / FP8 block-scaled weights, both math modes, bf16 and f32 activations
// and outputs, bias, strides and awkward sizes (cases: linear_cases.cpp).
#include "harness.h"

namespace sieve::test {
namespace {

// y [rows, n] (f32) of `rows` bf16 rows of x (row stride k) through a prepared weight, and the plan's kernel
// name; a failed plan or run fails the test (y then keeps its −1 fill).
std::pair<std::vector<float>, std::string> run_linear_rows(Backend& b, const PreparedLinear& w, const uint16_t* x,
                                                           int64_t rows, int64_t k, int64_t n) {
    std::vector<float> y(static_cast<size_t>(rows * n), -1.0f);
    LinearParams p;
    p.x = x;
    p.y = y.data();
    p.n_tokens = rows;
    p.x_row_stride = k;
    p.y_row_stride = n;
    p.x_type = DType::bf16;
    auto plan = b.linear_plan(w, p);
    EXPECT_TRUE(plan.has_value()) << plan.status().to_string();
    if (!plan.has_value()) return {std::move(y), ""};
    GuardedBuffer ws(std::max<size_t>(plan->workspace_bytes, 1));
    const Status st = b.linear(w, *plan, p, {ws.data(), plan->workspace_bytes});
    EXPECT_TRUE(st.is_ok()) << st.to_string();
    return {std::move(y), plan->kernel};
}

TEST(LinearConformance, EveryBackendMatchesRef) {
    auto ref = ref_backend();
    auto backends = backends_under_test();
    Rng rng(707);
    const std::vector<std::tuple<int64_t, int64_t, int64_t>> sizes = {
        // (m, n, k): 1, odd, not multiples of 16/128, partial FP8 blocks, decode and small prefill
        {1, 1, 1},     {1, 5, 3},      {2, 16, 16},   {3, 17, 129},  {4, 33, 128}, {5, 130, 257}, {1, 257, 300},
        {7, 64, 1024}, {16, 40, 200},  {17, 129, 65}, {1, 300, 513}, {70, 48, 96}, {33, 20, 31},  {1, 1024, 256}};
    const std::vector<DType> w_types = {DType::f32, DType::bf16, DType::f8_e4m3};
    int c = 0;
    for (const auto& [m, n, k] : sizes) {
        for (int rep = 0; rep < 3; ++rep, ++c) {
            LinearCase lc;
            lc.m = m;
            lc.n = n;
            lc.k = k;
            lc.w_type = w_types[static_cast<size_t>(c) % w_types.size()];
            lc.math = (c / 3) % 2 ? LinearMath::bf16 : LinearMath::f32;
            lc.x_type = rng.coin() ? DType::bf16 : DType::f32;
            lc.y_type = rng.coin() ? DType::bf16 : DType::f32;
            lc.bias = rng.coin();
            lc.padded = rng.coin();
            lc.x_broadcast = m > 1 && rng.coin(0.1);
            lc.scales = rng.pick<ScaleKind>({ScaleKind::pow2, ScaleKind::pow2, ScaleKind::arbitrary, ScaleKind::huge,
                                             ScaleKind::nan_byte});
            run_linear_case(rng, lc, *ref, backends);
        }
    }
}


// The pair panels (bf16 math) at the batch sizes the amx_bf16 level runs as tile products: a 16-row tile and
// a rest of 4 rows, several 16-row blocks sharing decoded weights (and a partial last block, and more rows
// than one task takes), fp8 k-blocks with a partial last one, odd pair counts, two panels per tile and a
// single last one, fp8 and bf16 weights.
// Grouped linears (ops/linear.h "Groups", DeepSeek-V4's wo_a): FP8 groups of whole 128-row scale blocks, bf16
// and f32 weights with bias, padded strides, one and several tokens.
TEST(LinearConformance, GroupsReadOnlyTheirOwnInputs) {
    auto ref = ref_backend();
    auto backends = backends_under_test();
    Rng rng(7131);
    const std::vector<LinearCase> cases = {
        {3, 256, 96, DType::f8_e4m3, DType::bf16, DType::bf16, LinearMath::bf16, false, false, false, ScaleKind::pow2, 2},
        {1, 512, 130, DType::f8_e4m3, DType::f32, DType::f32, LinearMath::f32, false, true, false, ScaleKind::arbitrary, 4},
        {5, 64, 64, DType::bf16, DType::bf16, DType::f32, LinearMath::bf16, true, true, false, ScaleKind::pow2, 4},
        {2, 30, 40, DType::f32, DType::f32, DType::bf16, LinearMath::f32, true, false, false, ScaleKind::pow2, 6},
        {17, 48, 24, DType::bf16, DType::f32, DType::bf16, LinearMath::bf16, false, true, false, ScaleKind::pow2, 3},
    };
    for (const LinearCase& c : cases) run_linear_case(rng, c, *ref, backends);
}

TEST(LinearConformance, PairPanelsAtBatchSizes) {
    auto ref = ref_backend();
    auto backends = backends_under_test();
    Rng rng(708);
    for (const DType w : {DType::f8_e4m3, DType::bf16}) {
        for (const auto& [m, n, k] : std::vector<std::tuple<int64_t, int64_t, int64_t>>{{20, 200, 300}, {4, 48, 129}, {16, 144, 1100}, {70, 80, 300}, {130, 48, 257}}) {
            const LinearCase lc{m, n, k, w, DType::bf16, DType::f32, LinearMath::bf16, true, true, false, ScaleKind::pow2};
            run_linear_case(rng, lc, *ref, backends);
        }
    }
}

// The own kernels compute each row of a batch as they compute it alone, bit for bit, whatever rows share
// its tile or task (the amx_bf16 level's 16-row blocks over shared weights included): a model's output for
// one request does not depend on the requests batched with it. oneDNN makes no such promise. Runs of 1–3
// rows (decode) against the batch's rows, which take other schedules (amx_bf16: 64-row tasks of 16-row
// blocks, linear_amx_rows; the arithmetic fp8 decode and avx2's bf16 pairs: weights decoded once per chunk
// for every row group, linear_shared_decode); K = 300: partial 128-k blocks, decode chunks and 16-pair
// steps, K = 301: an odd K too (a half-full last pair group).
TEST(LinearConformance, RowsDoNotDependOnTheBatch) {
    Rng rng(709);
    const int64_t m = 70, n = 80;
    for (const auto& c : {std::pair{int64_t{300}, DType::f8_e4m3}, std::pair{int64_t{300}, DType::bf16},
                          std::pair{int64_t{301}, DType::f8_e4m3}, std::pair{int64_t{301}, DType::bf16}}) {
        const int64_t k = c.first;
        const DType w_type = c.second;
        std::vector<uint8_t> w(static_cast<size_t>(n * k * dtype_size(w_type)));
        for (int64_t i = 0; i < n * k; ++i) {
            if (w_type == DType::f8_e4m3) w[static_cast<size_t>(i)] = static_cast<uint8_t>(rng.integer(0, 0x7e) | (rng.coin() ? 0x80 : 0));
            else reinterpret_cast<uint16_t*>(w.data())[i] = f32_to_bf16(rng.normal(0.05f));
        }
        const float scales[3] = {0.125f, 0.5f, 2.0f};  // [1 × 3] blocks of 128
        std::vector<uint16_t> x(static_cast<size_t>(m * k));
        for (auto& v : x) v = f32_to_bf16(rng.normal(4.0f));
        LinearWeights lw;
        lw.weight = w.data();
        lw.block_scale = w_type == DType::f8_e4m3 ? scales : nullptr;
        lw.out_features = n;
        lw.in_features = k;
        lw.weight_row_stride = k;
        lw.weight_type = w_type;
        lw.math = LinearMath::bf16;
        for (auto& nb : host_backends_under_test()) {
            if (!nb.spec.ends_with(":nodnnl")) continue;
            SCOPED_TRACE(fmt::format("{} weights {}, k {}", nb.spec, dtype_name(w_type), k));
            auto prepared = nb.backend->linear_prepare(lw);
            ASSERT_TRUE(prepared.has_value()) << prepared.status().to_string();
            auto run = [&](int64_t t0, int64_t rows) { return run_linear_rows(*nb.backend, **prepared, x.data() + t0 * k, rows, k, n).first; };
            const std::vector<float> batch = run(0, m);
            for (const int64_t rows : {int64_t{1}, int64_t{2}, int64_t{3}})
                for (const int64_t t0 : {int64_t{0}, int64_t{15}, int64_t{16}, int64_t{47}, int64_t{50}, int64_t{64}, int64_t{67}}) {
                    const std::vector<float> alone = run(t0, rows);
                    for (int64_t i = 0; i < rows * n; ++i) {
                        const int64_t t = t0 + i / n, o = i % n;
                        ASSERT_EQ(std::bit_cast<uint32_t>(alone[static_cast<size_t>(i)]), std::bit_cast<uint32_t>(batch[static_cast<size_t>(t * n + o)]))
                            << "row " << t << " output " << o << ": " << alone[static_cast<size_t>(i)] << " in a run of "
                            << rows << " rows from " << t0 << ", " << batch[static_cast<size_t>(t * n + o)] << " in a batch of " << m;
                    }
                }
        }
    }
}

// Every non-NaN e4m3 code decoded exactly by every path: with one-hot activations each output is a
// single product W[o, i]·1 (no rounding anywhere), so all backends must return W itself, value for value.
// (A dot-product tolerance could hide a wrong low bit in a decode table; this cannot.)
TEST(LinearConformance, Fp8CodesDecodeExactly) {
    auto ref = ref_backend();
    auto backends = backends_under_test();
    const int64_t n = 160, k = 32;  // 2 row blocks (partial second), all 256 codes in the first 8 rows
    std::vector<uint8_t> w(static_cast<size_t>(n * k));
    for (size_t i = 0; i < w.size(); ++i) {
        const uint8_t code = static_cast<uint8_t>(i % 256);
        w[i] = (code & 0x7f) == 0x7f ? 0 : code;
    }
    const float scales[2] = {0.125f, 4.0f};
    std::vector<uint16_t> x(static_cast<size_t>(k * k), 0);  // identity, bf16
    for (int64_t t = 0; t < k; ++t) x[static_cast<size_t>(t * k + t)] = f32_to_bf16(1.0f);
    for (LinearMath math : {LinearMath::bf16, LinearMath::f32}) {
        LinearWeights lw;
        lw.weight = w.data();
        lw.block_scale = scales;
        lw.out_features = n;
        lw.in_features = k;
        lw.weight_row_stride = k;
        lw.weight_type = DType::f8_e4m3;
        lw.math = math;
        for (auto& nb : backends) {
            for (int64_t m : {int64_t{1}, k}) {  // decode (one row at a time) and a batch
                SCOPED_TRACE(fmt::format("{} math {} m {}", nb.spec, linear_math_name(math), m));
                auto prepared = nb.backend->linear_prepare(lw);
                if (!prepared.has_value() && linear_unsupported_is_expected(nb.spec, math, prepared.status())) continue;
                ASSERT_TRUE(prepared.has_value()) << prepared.status().to_string();
                for (int64_t t0 = 0; t0 < k; t0 += m) {
                    const auto [y, kernel] = run_linear_rows(*nb.backend, **prepared, x.data() + t0 * k, m, k, n);
                    for (int64_t t = 0; t < m; ++t)
                        for (int64_t o = 0; o < n; ++o) {
                            const float want = fp8_e4m3_to_f32(w[static_cast<size_t>(o * k + t0 + t)]) * scales[o / 128];
                            ASSERT_EQ(y[static_cast<size_t>(t * n + o)], want)
                                << "row " << o << " col " << t0 + t << " code 0x" << std::hex
                                << int{w[static_cast<size_t>(o * k + t0 + t)]} << " via " << kernel;
                        }
                }
            }
        }
    }
}

}  // namespace
}  // namespace sieve::test
