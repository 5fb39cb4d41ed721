// Golden fixtures of DSA on MLA (tests/data/deepseek_v32, tests/data/hy_v4; transformers 5.17.0) run
// through the Engine with every schedule `sieve check` offers, on the cpu backend (and ref for a fast
// subset): the exact profile must match at relative error ≤ 1e-4 per layer and request with equal top-k
// sets (ties excepted, golden_format.md); the deployed profile within the tolerances stated below.
#include <gtest/gtest.h>

#include <fmt/format.h>

#include <algorithm>
#include <filesystem>
#include <map>
#include <string>

#include "model_test_util.h"

namespace sieve::model_test {
namespace {

struct GoldenCase {
    std::string fixture;
    std::string schedule;
    std::string backend;
};

std::string case_name(const testing::TestParamInfo<GoldenCase>& info) {
    std::string s = info.param.fixture + "_" + info.param.schedule + "_" + info.param.backend;
    std::replace_if(s.begin(), s.end(), [](char ch) { return !std::isalnum(static_cast<unsigned char>(ch)); }, '_');
    return s;
}

// Worst relative error per layer over the requests, for the report.
std::string summary(const CheckReport& r) {
    std::map<int64_t, double> worst;
    std::map<int64_t, int64_t> ties;
    for (const LayerCheck& c : r.layers) {
        worst[c.layer] = std::max(worst[c.layer], c.rel_error);
        ties[c.layer] += c.tie_tokens;
    }
    std::string s;
    for (auto [layer, e] : worst) s += fmt::format(" layer{} rel {:.3g} (ties {})", layer, e, ties[layer]);
    return s;
}

class DsaMlaGoldenExact : public testing::TestWithParam<GoldenCase> {};

TEST_P(DsaMlaGoldenExact, MatchesReference) {
    const GoldenCase& g = GetParam();
    CheckOptions o;
    o.schedule = g.schedule;
    o.profile = NumericsProfile::exact;
    o.backend = g.backend;
    o.rel_tolerance = 1e-4;  // golden_format.md: exact profile
    o.min_topk_agreement = 1.0;
    auto report = run_golden_check(data_dir() / g.fixture, o);
    ASSERT_TRUE(report.has_value()) << report.status().to_string();
    for (const LayerCheck& c : report->layers) {
        EXPECT_TRUE(c.passed) << fmt::format("request {} layer {}: max|Δ| {:.3g}, rel {:.3g}, top-k {}/{} (ties {})",
                                             c.request, c.layer, c.max_abs_diff, c.rel_error, c.topk_equal,
                                             c.topk_tokens, c.tie_tokens);
        EXPECT_LE(c.rel_error, 1e-4);
        if (c.topk_tokens > 0) {
            EXPECT_EQ(c.topk_tokens, c.tokens) << "every token reports its selection";
        }
    }
    EXPECT_TRUE(report->passed);
    std::printf("[golden] %s %s %s exact:%s\n", g.fixture.c_str(), g.schedule.c_str(), g.backend.c_str(),
                summary(*report).c_str());
}

std::vector<GoldenCase> exact_cases() {
    std::vector<GoldenCase> v;
    for (const char* f : {"deepseek_v32", "hy_v4"}) {
        for (const char* s : {"one-shot", "chunk:5", "chunk:7", "decode", "mixed"}) v.push_back({f, s, "cpu"});
        v.push_back({f, "chunk:3", "ref"});
    }
    return v;
}

INSTANTIATE_TEST_SUITE_P(Fixtures, DsaMlaGoldenExact, testing::ValuesIn(exact_cases()), case_name);


}  // namespace
}  // namespace sieve::model_test
