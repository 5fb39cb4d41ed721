// The QSA layer through the engine (the check's runner) against the independent double-precision
// reference of qsa_test_util (specs/qsa.md §4), on random small configs that the golden fixture does not cover
// (r = 1, 2, 3, 5; one KV head; head dims that are not multiples of the vector width; full rotary),
// under one-shot, chunked (chunks that split groups), decode and mixed schedules; and the dense
// equivalence of contexts up to budget + r − 1 tokens (§4.5).
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <cstdio>
#include <random>
#include <string>
#include <utility>

#include "sieve/backends/backend.h"
#include "sieve/models/model_factory.h"
#include "models/qsa/model.h"
#include "qsa_test_util.h"

namespace sieve::model_test {
namespace {

struct Loaded {
    ModelConfig config;
    std::unique_ptr<Checkpoint> checkpoint;
    std::unique_ptr<Backend> backend;
    std::unique_ptr<AttentionModel> model;
};

// `json`: the config.json text to use instead of qsa_config_json(tc) (the weights still follow tc).
Loaded load(const QsaTestConfig& tc, uint64_t seed, const std::string& backend, NumericsProfile profile,
            const std::string& json = {}) {
    Loaded l;
    auto config = parse_model_config(json.empty() ? qsa_config_json(tc) : json, "test config.json");
    EXPECT_TRUE(config.has_value()) << config.status().to_string();
    l.config = *config;
    auto ckpt = qsa_checkpoint(tc, qsa_random_weights(tc, seed));
    EXPECT_TRUE(ckpt.has_value()) << ckpt.status().to_string();
    l.checkpoint = std::move(*ckpt);
    auto b = make_backend(backend);
    EXPECT_TRUE(b.has_value()) << b.status().to_string();
    l.backend = std::move(*b);
    ModelOptions o;
    o.profile = profile;
    o.backend = l.backend.get();
    auto m = load_attention_model(l.config, *l.checkpoint, o);
    EXPECT_TRUE(m.has_value()) << m.status().to_string();
    if (m) l.model = std::move(*m);
    return l;
}

struct Compared {
    double worst_rel = 0;
    int64_t tokens = 0, tie_tokens = 0;
};

// Every request and layer against the reference: equal selected sets (tokens whose reference
// selection has a boundary tie are skipped and counted), outputs within `tol` relative error over
// the other rows.
Compared compare_with_reference(Loaded& l, const RandomRequests& requests, const GoldenRun& run, double tol) {
    Compared c;
    expect_every_selection_once(run);
    const QsaConfig& qc = *l.config.qsa();
    const std::vector<int64_t> layers = l.model->layers();
    for (size_t lp = 0; lp < layers.size(); ++lp) {
        auto w = reference_weights(*l.checkpoint, l.config, layers[lp]);
        EXPECT_TRUE(w.has_value()) << w.status().to_string();
        if (!w) return c;
        for (size_t r = 0; r < requests.n_tokens.size(); ++r) {
            SCOPED_TRACE(fmt::format("layer {} request {}", layers[lp], r));
            const int64_t n_tokens = requests.n_tokens[r];
            const ReferenceResult ref = reference_layer(qc, *w, requests.inputs[r][lp].data(), n_tokens);
            const auto& selections = run.requests[r].selections[lp];
            std::vector<int64_t> rows;
            for (int64_t t = 0; t < n_tokens && selections.count(t); ++t) {
                ++c.tokens;
                const ReferenceToken& rt = ref.tokens[static_cast<size_t>(t)];
                const SelectionRecord& s = selections.at(t);
                const std::vector<int32_t> tokens = valid_entries(s);
                const std::set<int32_t> mine = s.set();
                EXPECT_EQ(tokens.size(), mine.size()) << "position " << t << ": a repeated token";
                EXPECT_TRUE(std::is_sorted(tokens.begin(), tokens.end())) << "position " << t;
                EXPECT_EQ(s.tokens_per_score, qc.indexer_compress_ratio);
                EXPECT_EQ(s.scores.size(), rt.scores.size()) << "position " << t;
                if (rt.boundary_tie) {
                    ++c.tie_tokens;
                    continue;
                }
                EXPECT_EQ(mine, rt.tokens) << "position " << t;
                for (size_t g = 0; g < std::min(s.scores.size(), rt.scores.size()); ++g)
                    EXPECT_NEAR(s.scores[g], rt.scores[g], 1e-5 * (1 + std::fabs(rt.scores[g]))) << "position " << t << " group " << g;
                rows.push_back(t);
            }
            const double rel = relative_error(run.requests[r].outputs[lp], ref.out, qc.hidden_size, rows);
            EXPECT_LE(rel, tol);
            c.worst_rel = std::max(c.worst_rel, rel);
        }
    }
    return c;
}

struct ConfigCase {
    const char* name;
    QsaTestConfig config;
    std::vector<int64_t> lengths;
};

std::vector<ConfigCase> config_cases() {
    std::vector<ConfigCase> cases;
    QsaTestConfig a;  // r = 3, block_topk 2, W 8; GQA group 2; D 16, R 8 (partial 0.5), Di 8
    cases.push_back({"r3_k2", a, {8, 13, 41}});
    QsaTestConfig b;  // one KV head (group 6), D 24, full rotary, Di = R = 24, r = 2, block_topk 4
    b.hidden = 40, b.heads = 6, b.kv_heads = 1, b.head_dim = 24, b.partial_rotary = 1.0, b.index_heads = 3,
    b.index_dim = 24, b.budget = 8, b.ratio = 2, b.layer_types = {"qwen_sparse_attention", "linear_attention",
                                                                  "qwen_sparse_attention"};
    cases.push_back({"r2_k4_gqa6", b, {9, 30}});
    QsaTestConfig c;  // r = 1: no tail, every token its own group; block_topk 5
    c.hidden = 32, c.heads = 2, c.kv_heads = 2, c.head_dim = 8, c.partial_rotary = 0.25, c.index_heads = 1,
    c.index_dim = 4, c.budget = 5, c.ratio = 1;
    cases.push_back({"r1_k5", c, {5, 23}});
    QsaTestConfig d;  // r = 5, block_topk 1, multimodal names, θ 1e6
    d.hidden = 64, d.heads = 8, d.kv_heads = 4, d.head_dim = 32, d.partial_rotary = 0.25, d.theta = 1e6,
    d.index_heads = 4, d.index_dim = 16, d.budget = 5, d.ratio = 5, d.multimodal = true;
    cases.push_back({"r5_k1_multimodal", d, {9, 36}});
    return cases;
}

TEST(QsaLayer, MatchesReferenceUnderEverySchedule) {
    for (const ConfigCase& cc : config_cases()) {
        for (const std::string backend : {"cpu", "ref"}) {
            SCOPED_TRACE(fmt::format("{} on {}", cc.name, backend));
            Loaded l = load(cc.config, 11, backend, NumericsProfile::exact);
            ASSERT_TRUE(l.model);
            const int64_t n_layers = static_cast<int64_t>(l.model->layers().size());
            const std::vector<std::string> schedules =
                backend == "ref" ? std::vector<std::string>{"chunk:4", "mixed:3"}
                                 : std::vector<std::string>{"one-shot", "chunk:3", "chunk:5", "decode", "mixed:1", "mixed:2"};
            double worst = 0;
            int64_t ties = 0;
            for (const std::string& sched : schedules) {
                SCOPED_TRACE(sched);
                const RandomRequests requests = random_requests(cc.lengths, n_layers, cc.config.hidden, 5);
                auto run = run_golden_requests(*l.model, requests.requests(), qsa_schedule(sched, cc.lengths));
                ASSERT_TRUE(run.has_value()) << run.status().to_string();
                // fp32 against double: a few ulps per reduction (dims ≤ 64), far below 1e-5.
                const Compared c = compare_with_reference(l, requests, *run, 1e-5);
                EXPECT_LE(c.tie_tokens * 20, c.tokens) << "too many boundary ties for the test to mean much";
                worst = std::max(worst, c.worst_rel);
                ties += c.tie_tokens;
            }
            std::printf("  %-18s %-3s worst relative error vs the double reference over %zu schedules: %.3e "
                        "(boundary-tie tokens skipped: %lld)\n",
                        cc.name, backend.c_str(), schedules.size(), worst, static_cast<long long>(ties));
        }
    }
}

// Without an observer the layer selects inside indexer_scores (ops/indexer_scores.h "Fused selection":
// no score row written); with one it writes the scores and runs the topk op. Both must select the same
// groups, so the outputs are bit-identical: both profiles, ref and every cpu ISA, prefill chunks and
// decode steps, several requests per step. The last config has 4 index heads of 32 (the vdpbf16ps
// scores at avx512_bf16 in the deployed profile).
TEST(QsaLayer, FusedSelectionMatchesScoresThenTopk) {
    std::vector<ConfigCase> cases = config_cases();
    QsaTestConfig e;  // index heads in fours of 32 dims
    e.hidden = 64, e.heads = 4, e.kv_heads = 2, e.head_dim = 32, e.index_heads = 4, e.index_dim = 32, e.budget = 6,
    e.ratio = 2;
    cases.push_back({"r2_k3_index4x32", e, {11, 40}});
    std::vector<std::string> backends = {"ref", "cpu"};
    for (const char* isa : {"scalar", "avx2", "avx512", "avx512_bf16"})
        if (make_backend(fmt::format("cpu:{}", isa)).has_value()) backends.push_back(fmt::format("cpu:{}", isa));
    for (const ConfigCase& cc : cases) {
        for (const NumericsProfile profile : {NumericsProfile::exact, NumericsProfile::deployed}) {
            for (const std::string& backend : backends) {
                SCOPED_TRACE(fmt::format("{} {} on {}", cc.name, profile == NumericsProfile::exact ? "exact" : "deployed",
                                         backend));
                Loaded l = load(cc.config, 31, backend, profile);
                ASSERT_TRUE(l.model);
                const int64_t n_layers = static_cast<int64_t>(l.model->layers().size());
                for (const std::string sched : {"chunk:3", "mixed:4"}) {
                    SCOPED_TRACE(sched);
                    const RandomRequests requests = random_requests(cc.lengths, n_layers, cc.config.hidden, 13);
                    const GoldenSchedule s = qsa_schedule(sched, cc.lengths);
                    GoldenRunOptions fused_selection;
                    fused_selection.observe = false;
                    auto observed = run_golden_requests(*l.model, requests.requests(), s);
                    auto fused = run_golden_requests(*l.model, requests.requests(), s, fused_selection);
                    ASSERT_TRUE(observed.has_value()) << observed.status().to_string();
                    ASSERT_TRUE(fused.has_value()) << fused.status().to_string();
                    for (size_t r = 0; r < cc.lengths.size(); ++r)
                        for (int64_t lp = 0; lp < n_layers; ++lp) {
                            const auto& a = observed->requests[r].outputs[static_cast<size_t>(lp)];
                            const auto& b = fused->requests[r].outputs[static_cast<size_t>(lp)];
                            EXPECT_EQ(0, std::memcmp(a.data(), b.data(), a.size() * sizeof(float)))
                                << "request " << r << " layer " << lp;
                        }
                }
            }
        }
    }
}

// indexer_budget near 2^31 with max_position_embeddings 2^31 − 1 (a config that passes validation): the
// layer sizes its selection rows by the step (min(block_topk, the groups a token sees)), so it runs with a
// small scratch and equals the same layer with a budget of 3000 (above every request: both dense, the
// same rows in the same order). Before, a step of 8 tokens asked for 8 × (budget + r − 1) index slots and
// failed with out_of_memory.
TEST(QsaLayer, HugeBudgetSizesRowsByTheStep) {
    QsaTestConfig tc;  // r = 3
    tc.budget = 3000;
    std::string json = qsa_config_json(tc);
    using Edit = std::pair<std::string, std::string>;
    for (const auto& [from, to] : {Edit{"\"indexer_budget\": 3000", "\"indexer_budget\": 2147483646"},
                                   Edit{"\"max_position_embeddings\": 4096", "\"max_position_embeddings\": 2147483647"}}) {
        const size_t at = json.find(from);
        ASSERT_NE(at, std::string::npos) << from;
        json.replace(at, from.size(), to);
    }
    for (const NumericsProfile profile : {NumericsProfile::exact, NumericsProfile::deployed}) {
        SCOPED_TRACE(numerics_profile_name(profile));
        Loaded wide = load(tc, 29, "cpu", profile), huge = load(tc, 29, "cpu", profile, json);
        ASSERT_TRUE(wide.model && huge.model);
        ASSERT_EQ(huge.config.qsa()->indexer_budget, 2147483646);
        const int64_t n_layers = static_cast<int64_t>(wide.model->layers().size());
        for (const char* name : {"one-shot", "chunk:5", "decode"}) {
            SCOPED_TRACE(name);
            const RandomRequests requests = random_requests({40, 7}, n_layers, tc.hidden, 31);
            const GoldenSchedule s = qsa_schedule(name, requests.n_tokens);
            auto a = run_golden_requests(*wide.model, requests.requests(), s);
            auto b = run_golden_requests(*huge.model, requests.requests(), s);
            ASSERT_TRUE(a.has_value()) << a.status().to_string();
            ASSERT_TRUE(b.has_value()) << b.status().to_string();
            for (size_t r = 0; r < requests.n_tokens.size(); ++r)
                EXPECT_EQ(a->requests[r].outputs, b->requests[r].outputs) << "request " << r;
        }
        EXPECT_LT(huge.model->workspace_bytes(), int64_t{64} << 20) << "scratch sized by the budget";
    }
}

// qsa.md §4.5: a row with p + 1 ≤ budget + r − 1 takes every group plus its tail: exactly dense.
// Shown three ways: its selection is {0, …, p} without scoring; its output is bit-identical to the
// same layer with every selection forced to {0, …, p}; and it matches a plain dense causal
// attention (double precision). Rows past that length are sparse: the same rewrite (there: the
// first budget + r − 1 tokens) changes them, so the bit-identity above is not vacuous.
TEST(QsaLayer, ShortContextsAreExactlyDense) {
    for (const ConfigCase& cc : config_cases()) {
        SCOPED_TRACE(cc.name);
        Loaded l = load(cc.config, 23, "cpu", NumericsProfile::exact);
        ASSERT_TRUE(l.model);
        const QsaConfig& qc = *l.config.qsa();
        const int64_t W = qc.output_width;
        const int64_t n_layers = static_cast<int64_t>(l.model->layers().size());
        const RandomRequests requests = random_requests({W, W + 3 * qc.indexer_compress_ratio + 2}, n_layers,
                                                        qc.hidden_size, 9);
        const GoldenSchedule s = qsa_schedule("chunk:3", requests.n_tokens);
        auto sparse = run_golden_requests(*l.model, requests.requests(), s);
        ASSERT_TRUE(sparse.has_value()) << sparse.status().to_string();
        expect_every_selection_once(*sparse);
        GoldenRunOptions every_token;
        every_token.rewrite = [](int64_t, int64_t, int64_t position, std::span<int32_t> sel, std::span<const float>, int64_t) {
            for (size_t j = 0; j < sel.size(); ++j) sel[j] = static_cast<int64_t>(j) <= position ? static_cast<int32_t>(j) : -1;
        };
        auto dense = run_golden_requests(*l.model, requests.requests(), s, every_token);
        ASSERT_TRUE(dense.has_value()) << dense.status().to_string();
        int64_t sparse_rows_changed = 0;
        for (size_t r = 0; r < requests.n_tokens.size(); ++r) {
            for (int64_t lp = 0; lp < n_layers; ++lp) {
                auto w = reference_weights(*l.checkpoint, l.config, l.model->layers()[static_cast<size_t>(lp)]);
                ASSERT_TRUE(w.has_value());
                const std::vector<double> ref_dense =
                    reference_dense_layer(qc, *w, requests.inputs[r][static_cast<size_t>(lp)].data(), requests.n_tokens[r]);
                const std::vector<float>& a = sparse->requests[r].outputs[static_cast<size_t>(lp)];
                const std::vector<float>& b = dense->requests[r].outputs[static_cast<size_t>(lp)];
                const auto& selections = sparse->requests[r].selections[static_cast<size_t>(lp)];
                std::vector<int64_t> short_rows;
                for (int64_t t = 0; t < requests.n_tokens[r] && selections.count(t); ++t) {
                    const SelectionRecord& sel = selections.at(t);
                    const bool row_equal = std::equal(a.begin() + t * qc.hidden_size, a.begin() + (t + 1) * qc.hidden_size,
                                                      b.begin() + t * qc.hidden_size);
                    if (t + 1 <= W) {
                        std::vector<int32_t> all(static_cast<size_t>(t + 1));
                        std::iota(all.begin(), all.end(), 0);
                        EXPECT_EQ(valid_entries(sel), all) << "position " << t;
                        EXPECT_TRUE(sel.scores.empty()) << "position " << t;
                        EXPECT_TRUE(row_equal) << "position " << t << ": not bit-identical to dense";
                        short_rows.push_back(t);
                    } else {
                        EXPECT_FALSE(sel.scores.empty()) << "position " << t;
                        EXPECT_LT(static_cast<int64_t>(valid_entries(sel).size()), t + 1) << "position " << t;
                        sparse_rows_changed += row_equal ? 0 : 1;
                    }
                }
                EXPECT_LE(relative_error(a, ref_dense, qc.hidden_size, short_rows), 1e-5);
            }
        }
        EXPECT_GT(sparse_rows_changed, 0) << "forcing dense rows changed nothing: the comparison proves nothing";
    }
}

}  // namespace
}  // namespace sieve::model_test
