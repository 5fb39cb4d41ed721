// `sieve check` cannot be fooled (specs/golden_format.md):
//   * a dead indexer (one indexer weight all NaN) fails every model type, in both profiles, and the
//     report says why, instead of passing on the reference's own selections as "ties";
//   * reference rows as torch.topk returns them (tests/data/raw_topk: future positions on rows with
//     fewer candidates than k) pass, because out-of-causal-range entries mean "none";
//   * degenerate fixtures are errors naming the tensor, not verdicts.
// Run with SIEVE_CHECK_SCRATCH=<dir>, CheckFixtureCopies.Write writes the broken fixtures that the
// CLI cases of check_cases.cmake run `sieve check` on.
#include "check.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <limits>
#include <map>
#include <nlohmann/json.hpp>
#include <random>
#include <regex>
#include <sstream>

#include "golden_check.h"
#include "sieve/io/safetensors.h"

namespace sieve {
namespace {

namespace fs = std::filesystem;
const fs::path kData = SIEVE_TEST_DATA_DIR;

// One indexer weight per model type whose loss kills the layer's selection, and that layer.
struct IndexerWeight {
    std::string family;
    std::string tensor;
    int64_t layer;
};
const IndexerWeight kIndexerWeights[] = {
    {"deepseek_v4", "model.layers.1.attn.indexer.compressor.wkv.weight", 1},  // the CSA indexer's keys
    {"deepseek_v32", "model.layers.0.self_attn.indexer.wk.weight", 0},
    {"hy_v4", "model.layers.0.self_attn.indexer.wk.weight", 0},  // layer 1 shares layer 0's top-k
    {"qwen4_exp", "model.language_model.layers.1.self_attn.indexer.index_qk_proj.weight", 1},
};

// A scratch directory removed at the end of the test.
struct ScratchDir {
    fs::path path;
    ScratchDir() {
        std::random_device rd;
        path = fs::temp_directory_path() / ("sieve_check_" + std::to_string(rd()));
        fs::create_directories(path);
    }
    ~ScratchDir() { fs::remove_all(path); }
};

std::vector<uint8_t> read_file(const fs::path& p) {
    std::ifstream in(p, std::ios::binary);
    return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

void write_file(const fs::path& p, const std::vector<uint8_t>& bytes) {
    std::ofstream out(p, std::ios::binary | std::ios::trunc);
    out.write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
    ASSERT_TRUE(out.good()) << p;
}

// Copies the fixture directory `source` to `out`, replacing whatever was there.
void copy_fixture(const fs::path& source, const fs::path& out) {
    fs::remove_all(out);
    fs::create_directories(out.parent_path());
    fs::copy(source, out, fs::copy_options::recursive);
}

// Overwrites every element of f32 tensor `name` of the checkpoint's model.safetensors with NaN, in
// place (the header, found by the safetensors parser, is untouched).
void poison_with_nan(const fs::path& fixture, const std::string& name) {
    const fs::path file = fixture / "ckpt" / "model.safetensors";
    std::vector<uint8_t> bytes = read_file(file);
    auto header = parse_safetensors_header(bytes, file.string());
    ASSERT_TRUE(header.has_value()) << header.status().to_string();
    const SafetensorsTensorInfo* t = header->find(name);
    ASSERT_NE(t, nullptr) << name;
    ASSERT_EQ(t->dtype, DType::f32) << name;
    const float nan = std::numeric_limits<float>::quiet_NaN();
    for (uint64_t at = header->data_offset + t->data_begin; at < header->data_offset + t->data_end; at += 4)
        std::memcpy(bytes.data() + at, &nan, 4);
    write_file(file, bytes);
}

// The golden's tensors, owned, for rewriting.
struct GoldenEntry {
    DType dtype;
    Shape shape;
    std::vector<uint8_t> bytes;
};
using GoldenEdit = std::function<void(std::map<std::string, GoldenEntry>&, std::map<std::string, std::string>&)>;

// Copies `source` to `out` with golden.safetensors rewritten by `edit`.
void write_edited_golden(const fs::path& source, const fs::path& out, const GoldenEdit& edit) {
    copy_fixture(source, out);
    auto golden = SafetensorsFile::open(source / "golden.safetensors");
    ASSERT_TRUE(golden.has_value()) << golden.status().to_string();
    std::map<std::string, GoldenEntry> tensors;
    for (const SafetensorsTensorInfo& t : (*golden)->tensors()) {
        const SafetensorsTensorView v = (*golden)->view(t);
        tensors[t.name] = {*t.dtype, t.shape, {v.bytes.begin(), v.bytes.end()}};
    }
    std::map<std::string, std::string> metadata = (*golden)->metadata();
    edit(tensors, metadata);
    std::vector<SafetensorsWriteEntry> entries;
    for (const auto& [name, e] : tensors) entries.push_back({name, e.dtype, e.shape, e.bytes});
    ASSERT_TRUE(write_safetensors(out / "golden.safetensors", entries, metadata).is_ok());
}

template <typename T>
T* elements(GoldenEntry& e) {
    return reinterpret_cast<T*>(e.bytes.data());
}

struct CheckRun {
    Expected<bool> verdict = false;
    nlohmann::json report;  // when the check ran
    std::string text;       // the same check's text report
};

CheckRun run(const fs::path& fixture, const std::string& profile = "exact", const std::string& schedule = "one-shot") {
    cli::CheckCommandOptions o;
    o.fixture = fixture;
    o.check.schedule = schedule;
    o.check.profile = profile == "deployed" ? NumericsProfile::deployed : NumericsProfile::exact;
    o.json = true;
    CheckRun r;
    std::ostringstream json;
    r.verdict = cli::run_check(o, json);
    if (!r.verdict) return r;
    r.report = nlohmann::json::parse(json.str());
    o.json = false;
    std::ostringstream text;
    EXPECT_TRUE(cli::run_check(o, text).has_value());
    r.text = text.str();
    return r;
}

// ---- a dead indexer ----------------------------------------------------------------------------

void write_dead_indexer(const IndexerWeight& w, const fs::path& out) {
    copy_fixture(kData / w.family, out);
    poison_with_nan(out, w.tensor);
}

class DeadIndexer : public testing::TestWithParam<std::tuple<IndexerWeight, std::string>> {};

TEST_P(DeadIndexer, FailsAndSaysWhy) {
    const auto& [w, profile] = GetParam();
    ScratchDir dir;
    write_dead_indexer(w, dir.path / w.family);
    const CheckRun r = run(dir.path / w.family, profile);
    ASSERT_TRUE(r.verdict.has_value()) << r.verdict.status().to_string();
    EXPECT_FALSE(*r.verdict) << r.text;
    // The poisoned layer fails on its selections: constant (ReLU turns NaN products into 0) or
    // non-finite index scores, which are never ties.
    const std::regex dead_scores("tokens? with (constant|non-finite) index scores");
    int64_t dead_layer_failures = 0;
    for (const auto& l : r.report.at("layers")) {
        const std::string reason = l.value("reason", "");
        EXPECT_EQ(l.at("passed").get<bool>(), reason.empty()) << l.dump();
        if (l.at("layer") == w.layer && !l.at("passed").get<bool>() && std::regex_search(reason, dead_scores))
            ++dead_layer_failures;
        EXPECT_EQ(l.at("tie_tokens"), 0) << "a dead indexer's rows are failures, not ties: " << l.dump();
    }
    EXPECT_GE(dead_layer_failures, 1) << r.text;
    EXPECT_NE(r.text.find("FAIL: "), std::string::npos) << r.text;
    EXPECT_TRUE(std::regex_search(r.text, dead_scores)) << r.text;
}

std::string dead_indexer_name(const testing::TestParamInfo<DeadIndexer::ParamType>& info) {
    return std::get<0>(info.param).family + "_" + std::get<1>(info.param);
}

INSTANTIATE_TEST_SUITE_P(EveryModelType, DeadIndexer,
                         testing::Combine(testing::ValuesIn(kIndexerWeights), testing::Values("exact", "deployed")),
                         dead_indexer_name);

// ---- raw reference rows ------------------------------------------------------------------------

const std::vector<std::string> kFamilies = {"deepseek_v4", "deepseek_v32", "hy_v4", "qwen4_exp"};

struct RawRowStats {
    int64_t past_causal_range = 0;  // entries ≥ 0 that the token may not select
    int64_t unordered_rows = 0;     // rows whose entries are not ascending (torch.topk's score order)
};

// Read straight from the file, without the checker: what a reader of the raw fixture meets.
RawRowStats raw_row_stats(const std::string& family) {
    RawRowStats s;
    auto golden = SafetensorsFile::open(kData / "raw_topk" / family / "golden.safetensors");
    EXPECT_TRUE(golden.has_value()) << golden.status().to_string();
    if (!golden) return s;
    EXPECT_EQ((*golden)->metadata().at("topk_rows"), "raw");
    // DeepSeek-V4 CSA: entry k is complete from token 4k + 3 on (deepseek_v4.md §3.6).
    const int64_t tokens_per_entry = family == "deepseek_v4" ? 4 : 1;
    for (const SafetensorsTensorInfo& t : (*golden)->tensors()) {
        if (!t.name.ends_with(".topk")) continue;
        auto rows = read_tensor((*golden)->view(t), DType::i32);
        EXPECT_TRUE(rows.has_value());
        const int64_t T = rows->dim(0), K = rows->dim(1);
        for (int64_t p = 0; p < T; ++p) {
            const int32_t* row = rows->as<int32_t>() + p * K;
            bool ascending = true;
            for (int64_t j = 0; j < K; ++j) {
                if (row[j] >= (p + 1) / tokens_per_entry) ++s.past_causal_range;
                if (j > 0 && row[j] >= 0 && row[j] < row[j - 1]) ascending = false;
            }
            s.unordered_rows += !ascending;
        }
    }
    return s;
}

TEST(RawTopk, FixturesHoldTheReferencesOwnRows) {
    for (const std::string& family : kFamilies) {
        SCOPED_TRACE(family);
        const RawRowStats s = raw_row_stats(family);
        EXPECT_GT(s.unordered_rows, 0);
        // Transformers' QSA indexer ranks only the complete groups a token sees (qsa.md §4.5), so
        // its raw rows are in score order but never reach past the token.
        if (family == "qwen4_exp")
            EXPECT_EQ(s.past_causal_range, 0);
        else
            EXPECT_GT(s.past_causal_range, 0) << "early rows must list entries past their token";
    }
}

class RawTopkPasses : public testing::TestWithParam<std::string> {};

TEST_P(RawTopkPasses, EverySchedule) {
    const std::string family = GetParam();
    const RawRowStats s = raw_row_stats(family);
    for (const char* schedule : {"one-shot", "chunk:3", "chunk:7", "decode", "mixed"}) {
        SCOPED_TRACE(schedule);
        const CheckRun r = run(kData / "raw_topk" / family, "exact", schedule);
        ASSERT_TRUE(r.verdict.has_value()) << r.verdict.status().to_string();
        EXPECT_TRUE(*r.verdict) << r.text;
        int64_t none = 0;
        for (const auto& l : r.report.at("layers")) {
            none += l.value("reference_none_entries", int64_t{-1});
            if (l.at("topk_tokens") > 0) {
                EXPECT_EQ(l.at("topk_equal"), l.at("topk_tokens")) << l.dump();
            }
            EXPECT_EQ(l.at("tie_tokens"), 0) << l.dump();
        }
        // Every entry past its token's causal range was read as "none", and the report says so.
        EXPECT_EQ(none, s.past_causal_range);
        if (s.past_causal_range > 0) {
            EXPECT_NE(r.text.find("entries past their token's causal range read as none"), std::string::npos)
                << r.text;
        }
    }
}

TEST_P(RawTopkPasses, Deployed) {
    const CheckRun r = run(kData / "raw_topk" / GetParam(), "deployed");
    ASSERT_TRUE(r.verdict.has_value()) << r.verdict.status().to_string();
    EXPECT_TRUE(*r.verdict) << r.text;
}

INSTANTIATE_TEST_SUITE_P(EveryModelType, RawTopkPasses, testing::ValuesIn(kFamilies));

// ---- degenerate fixtures -----------------------------------------------------------------------

struct BrokenGolden {
    std::string name;
    std::string family;
    GoldenEdit edit;
    std::string message;  // the error names this (a regex)
};

void set_topk_entry(std::map<std::string, GoldenEntry>& t, const std::string& name, int64_t row, int64_t col,
                    int32_t value) {
    GoldenEntry& e = t.at(name);
    elements<int32_t>(e)[row * e.shape[1] + col] = value;
}

std::vector<BrokenGolden> broken_goldens() {
    using Tensors = std::map<std::string, GoldenEntry>;
    using Meta = std::map<std::string, std::string>;
    return {
        {"topk_int64", "deepseek_v32",
         [](Tensors& t, Meta&) {
             GoldenEntry& e = t.at("req1.layer0.topk");
             std::vector<uint8_t> wide;
             for (int64_t i = 0; i < e.shape[0] * e.shape[1]; ++i) {
                 const int64_t v = elements<int32_t>(e)[i];
                 const auto* b = reinterpret_cast<const uint8_t*>(&v);
                 wide.insert(wide.end(), b, b + 8);
             }
             e = {DType::i64, e.shape, wide};
         },
         "req1\\.layer0\\.topk is I64, expected I32"},
        {"topk_short", "deepseek_v32",
         [](Tensors& t, Meta&) {
             GoldenEntry& e = t.at("req1.layer0.topk");
             e.shape[0] -= 1;
             e.bytes.resize(e.bytes.size() - static_cast<size_t>(e.shape[1]) * 4);
         },
         "req1\\.layer0\\.topk has shape \\[16, 16\\], expected \\[17, K\\]"},
        {"topk_past_the_request", "deepseek_v32",
         [](Tensors& t, Meta&) { set_topk_entry(t, "req1.layer0.topk", 3, 5, 17); },
         "req1\\.layer0\\.topk row 3 has entry 17, outside \\[-1, 17\\)"},
        {"topk_below_minus_one", "deepseek_v32",
         [](Tensors& t, Meta&) { set_topk_entry(t, "req0.layer1.topk", 0, 0, -2); },
         "req0\\.layer1\\.topk row 0 has entry -2"},
        {"topk_duplicate", "deepseek_v32",
         [](Tensors& t, Meta&) {
             GoldenEntry& e = t.at("req1.layer0.topk");
             const int32_t first = elements<int32_t>(e)[16 * e.shape[1]];
             set_topk_entry(t, "req1.layer0.topk", 16, 1, first);
         },
         "req1\\.layer0\\.topk row 16 lists entry [0-9]+ twice"},
        {"topk_all_none", "deepseek_v32",
         [](Tensors& t, Meta&) {
             GoldenEntry& e = t.at("req2.layer1.topk");
             std::fill(elements<int32_t>(e), elements<int32_t>(e) + e.shape[0] * e.shape[1], -1);
         },
         "req2\\.layer1\\.topk row 0 selects nothing, though the token has 1 candidate"},
        {"topk_past_the_entries", "deepseek_v4",  // 37 tokens: 9 compressed entries
         [](Tensors& t, Meta&) { set_topk_entry(t, "req1.layer1.topk", 36, 0, 9); },
         "req1\\.layer1\\.topk row 36 has entry 9, outside \\[-1, 9\\) \\(the request's 9 compressed entries\\)"},
        {"topk_on_a_layer_without_indexer", "deepseek_v4",
         [](Tensors& t, Meta&) { t["req0.layer2.topk"] = t.at("req0.layer1.topk"); },
         "req0\\.layer2\\.topk: layer 2 is a hca layer, which selects nothing"},
        {"no_requests", "deepseek_v32", [](Tensors&, Meta& m) { m["requests"] = "0"; },
         "\"requests\" = 0: a fixture without requests checks nothing"},
        {"requests_not_a_number", "deepseek_v32", [](Tensors&, Meta& m) { m["requests"] = "3x"; },
         "\"requests\" = \"3x\" is not a number"},
        {"fewer_requests_than_tensors", "deepseek_v32", [](Tensors&, Meta& m) { m["requests"] = "2"; },
         "tensor req2\\.layer0\\.input is not compared by the check"},
        {"family_of_another_model", "deepseek_v32", [](Tensors&, Meta& m) { m["family"] = "hy_v4"; },
         "\"family\" is hy_v4, but the checkpoint's model_type is deepseek_v32"},
        {"output_all_zero", "qwen4_exp",
         [](Tensors& t, Meta&) {
             GoldenEntry& e = t.at("req2.layer3.output");
             std::fill(e.bytes.begin(), e.bytes.end(), 0);
         },
         "tensor req2\\.layer3\\.output is all zero"},
        {"output_nan", "hy_v4",
         [](Tensors& t, Meta&) { elements<float>(t.at("req1.layer2.output"))[64 * 5 + 7] = std::nanf(""); },
         "tensor req1\\.layer2\\.output has a non-finite value nan at row 5, column 7"},
        {"input_infinite", "deepseek_v4",
         [](Tensors& t, Meta&) { elements<float>(t.at("req0.layer0.input"))[3] = INFINITY; },
         "tensor req0\\.layer0\\.input has a non-finite value inf at row 0, column 3"},
        {"empty_request", "deepseek_v32",
         [](Tensors& t, Meta&) {
             t.at("req0.positions") = {DType::i64, {0}, {}};
         },
         "tensor req0\\.positions has shape \\[0\\], expected \\[T\\] with T ≥ 1"},
    };
}

TEST(DegenerateFixture, IsAnErrorNamingTheTensor) {
    ScratchDir dir;
    for (const BrokenGolden& b : broken_goldens()) {
        SCOPED_TRACE(b.name);
        const fs::path fixture = dir.path / b.name / b.family;
        write_edited_golden(kData / b.family, fixture, b.edit);
        const CheckRun r = run(fixture);
        ASSERT_FALSE(r.verdict.has_value()) << "a broken fixture gave a verdict:\n" << r.text;
        EXPECT_TRUE(std::regex_search(r.verdict.status().message(), std::regex(b.message)))
            << r.verdict.status().to_string();
    }
}

// ---- the layer verdict -------------------------------------------------------------------------

LayerCheck measured_layer(int64_t tokens, int64_t ties) {
    LayerCheck c;
    c.tokens = c.topk_tokens = c.topk_equal = tokens;
    c.tie_tokens = ties;
    c.rel_error = 1e-6;
    return c;
}

TEST(LayerVerdict, TiesBeyondTheStatedFractionFail) {
    const CheckOptions options;
    EXPECT_DOUBLE_EQ(options.max_tie_fraction, kMaxTieFraction);
    LayerCheck few = measured_layer(100, 5);  // 5% exactly: allowed
    judge_layer(few, true, options);
    EXPECT_TRUE(few.passed) << few.reason;
    LayerCheck many = measured_layer(100, 6);
    judge_layer(many, true, options);
    EXPECT_FALSE(many.passed);
    EXPECT_EQ(many.reason, "ties 6/100 > 5%");
}

TEST(LayerVerdict, EveryFailedCriterionIsNamed) {
    CheckOptions options;
    LayerCheck c = measured_layer(90, 0);
    c.rel_error = 3e-2;
    c.topk_tokens = 80;
    c.topk_equal = 70;
    c.nonfinite_score_tokens = 12;
    c.constant_score_tokens = 1;
    judge_layer(c, true, options);
    EXPECT_FALSE(c.passed);
    EXPECT_EQ(c.reason,
              "rel error 3.00e-02 > 0.0001; top-k reported for 80 of 90 tokens; 12 tokens with non-finite index "
              "scores; 1 token with constant index scores; top-k equal on 70/80 tokens < 1.00");
    LayerCheck nan_out = measured_layer(4, 0);
    nan_out.nonfinite_outputs = 3;
    judge_layer(nan_out, false, options);
    EXPECT_EQ(nan_out.reason, "3 non-finite output values");
}

// ---- broken fixtures for the CLI cases ---------------------------------------------------------

// Writes, under $SIEVE_CHECK_SCRATCH (else a scratch directory), dead_indexer/<family> for every
// model type and duplicate_topk/deepseek_v32, and checks what it wrote.
TEST(CheckFixtureCopies, Write) {
    ScratchDir scratch;
    const char* env = std::getenv("SIEVE_CHECK_SCRATCH");
    const fs::path root = env && *env ? fs::path(env) : scratch.path;
    for (const IndexerWeight& w : kIndexerWeights) {
        const fs::path out = root / "dead_indexer" / w.family;
        write_dead_indexer(w, out);
        auto ckpt = SafetensorsFile::open(out / "ckpt" / "model.safetensors");
        ASSERT_TRUE(ckpt.has_value()) << ckpt.status().to_string();
        auto poisoned = read_tensor(*(*ckpt)->tensor(w.tensor), DType::f32);
        ASSERT_TRUE(poisoned.has_value());
        for (int64_t i = 0; i < poisoned->numel(); ++i) ASSERT_TRUE(std::isnan(poisoned->as<float>()[i])) << i;
    }
    const std::vector<BrokenGolden> broken = broken_goldens();
    const auto it = std::find_if(broken.begin(), broken.end(),
                                 [](const BrokenGolden& b) { return b.name == "topk_duplicate"; });
    ASSERT_NE(it, broken.end());
    const BrokenGolden& duplicate = *it;
    write_edited_golden(kData / duplicate.family, root / "duplicate_topk" / duplicate.family, duplicate.edit);
    EXPECT_TRUE(fs::exists(root / "duplicate_topk" / duplicate.family / "golden.safetensors"));
}

}  // namespace
}  // namespace sieve
