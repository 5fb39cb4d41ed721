// `sieve run`'s argument parsing and workload checks, the CLI's flag checks and the presets (the
// runs themselves need a model family; their tests live with the families).
#include "run.h"

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <cstdint>
#include <limits>
#include <sstream>

#include "flag_checks.h"
#include "sieve/models/attention_layout.h"
#include "presets.h"

namespace sieve::cli {
namespace {

TEST(RunOptions, LayerLists) {
    EXPECT_EQ(*parse_layer_list("0-3", 43), (std::vector<int64_t>{0, 1, 2, 3}));
    EXPECT_EQ(*parse_layer_list("7,2,2-3", 43), (std::vector<int64_t>{2, 3, 7}));
    EXPECT_EQ(*parse_layer_list("0-42", 43).value().rbegin(), 42);
    for (const char* bad : {"", "a", "3-1", "-1", "1,,2", "2-", "1.5", "1-2-3", " 1", "+1", "0x1"}) {
        auto r = parse_layer_list(bad, 43);
        EXPECT_FALSE(r.has_value()) << bad;
        if (!r) {
            EXPECT_NE(r.status().message().find("--layers"), std::string::npos) << r.status().message();
        }
    }
}

// A number past the model's layers is an error before any range is expanded: these returned only
// after filling memory (0-99999999999) or never (an int64 overflow at 9223372036854775807).
TEST(RunOptions, LayerListsBoundNumbersByTheModel) {
    for (const char* bad : {"43", "0-43", "0-99999999999", "0-9223372036854775807", "99999999999999999999",
                            "9223372036854775807-9223372036854775807", "1,0-18446744073709551616"}) {
        auto r = parse_layer_list(bad, 43);
        ASSERT_FALSE(r.has_value()) << bad;
        EXPECT_EQ(r.status().code(), StatusCode::invalid_argument);
        EXPECT_NE(r.status().message().find(std::string("--layers ") + bad), std::string::npos) << r.status().message();
        EXPECT_NE(r.status().message().find("(0 to 42)"), std::string::npos) << r.status().message();
    }
    EXPECT_FALSE(parse_layer_list("0", 0).has_value());
}

TEST(FlagChecks, Decimals) {
    EXPECT_EQ(parse_decimal("0"), 0);
    EXPECT_EQ(parse_decimal("-17"), -17);
    EXPECT_EQ(parse_decimal("9223372036854775807"), INT64_MAX);
    EXPECT_EQ(parse_decimal("-9223372036854775808"), INT64_MIN);
    for (const char* bad : {"", "-", "9223372036854775808", "-9223372036854775809", "99999999999999999999", "+1", " 1",
                            "1 ", "0x10", "1e3", "1.0", "abc", "12abc"})
        EXPECT_FALSE(parse_decimal(bad).has_value()) << bad;
}

// Every bad value of an integer flag, whatever is wrong with it, gets the same message: the flag,
// the value as given and the allowed range.
TEST(FlagChecks, IntegerFlagsNameTheFlagTheValueAndTheRange) {
    const IntRange range{1, 4096};
    EXPECT_EQ(*parse_int_flag("--requests", "1", range), 1);
    EXPECT_EQ(*parse_int_flag("--requests", "4096", range), 4096);
    EXPECT_EQ(*parse_int_flag("--requests", "007", range), 7);  // decimal, not octal
    for (const char* bad :
         {"0", "-1", "4097", "9223372036854775807", "99999999999999999999", "abc", "", "1.5", "0x10"}) {
        auto r = parse_int_flag("--requests", bad, range);
        ASSERT_FALSE(r.has_value()) << bad;
        EXPECT_EQ(r.status().code(), StatusCode::invalid_argument);
        EXPECT_EQ(r.status().message(), fmt::format("--requests {}: must be an integer in [1, 4096]", bad));
    }
    EXPECT_TRUE(check_int_flag("--seed", INT64_MAX, kSeedRange).is_ok());
    EXPECT_EQ(check_int_flag("--seed", -1, kSeedRange).message(),
              "--seed -1: must be an integer in [0, 9223372036854775807]");
}

TEST(FlagChecks, RealFlagsRejectNonFiniteValues) {
    const RealRange range{0, 1};
    EXPECT_EQ(*parse_real_flag("--min-topk-agreement", "0", range), 0.0);
    EXPECT_EQ(*parse_real_flag("--min-topk-agreement", "1", range), 1.0);
    EXPECT_EQ(*parse_real_flag("--min-topk-agreement", "0.85", range), 0.85);
    EXPECT_EQ(*parse_real_flag("--min-topk-agreement", "1e-4", range), 1e-4);
    for (const char* bad : {"nan", "NaN", "-nan", "inf", "-inf", "infinity", "1e999", "-1e-9", "1.0000001", "2", "",
                            "x", "0.5x", " 0.5"}) {
        auto r = parse_real_flag("--min-topk-agreement", bad, range);
        ASSERT_FALSE(r.has_value()) << bad;
        EXPECT_EQ(r.status().message(), fmt::format("--min-topk-agreement {}: must be a number in [0, 1]", bad));
    }
    // A value set without parsing (RunOptions from C++) is held to the same range.
    EXPECT_TRUE(check_real_flag("--accept-rate", 0.7, range).is_ok());
    for (double bad : {-0.1, 1.5, std::numeric_limits<double>::quiet_NaN(), std::numeric_limits<double>::infinity()})
        EXPECT_NE(check_real_flag("--accept-rate", bad, range).message().find("must be a number in [0, 1]"),
                  std::string::npos) << bad;
}

TEST(FlagChecks, Schedules) {
    for (const char* good : {"one-shot", "decode", "mixed", "chunk:1", "chunk:1048576"})
        EXPECT_TRUE(check_schedule_flag("--schedule", good).is_ok()) << good;
    for (const char* bad : {"chunk:0", "chunk:-1", "chunk:1048577", "chunk:99999999999999999999", "chunk:",
                            "chunk:12abc", "chunk: 5", "chunk:+5", "sometimes", "", "one-shot "}) {
        Status s = check_schedule_flag("--schedule", bad);
        EXPECT_EQ(s.code(), StatusCode::invalid_argument) << bad;
        EXPECT_EQ(s.message().rfind(fmt::format("--schedule {}: ", bad), 0), 0u) << s.message();
    }
    EXPECT_NE(check_schedule_flag("--schedule", "chunk:0").message().find("[1, 1048576]"), std::string::npos);
}

TEST(FlagChecks, NamesOfPresetsBackendsAndIsas) {
    EXPECT_TRUE(check_preset_flag("--preset", "hy4").is_ok());
    EXPECT_NE(check_preset_flag("--preset", "gpt-2").message().find("--preset gpt-2: "), std::string::npos);
    EXPECT_TRUE(check_backend_flag("--backend", "ref").is_ok());
    EXPECT_TRUE(check_backend_flag("--backend", "cpu:scalar").is_ok());
    EXPECT_NE(check_backend_flag("--backend", "garbage").message().find("--backend garbage: "), std::string::npos);
    EXPECT_TRUE(check_isa_flag("--isa", "scalar", false).is_ok());
    EXPECT_TRUE(check_isa_flag("--compare-isa", "", true).is_ok());
    EXPECT_FALSE(check_isa_flag("--isa", "", false).is_ok());
    EXPECT_NE(check_isa_flag("--isa", "sse9", true).message().find("--isa sse9: "), std::string::npos);
}

TEST(FlagChecks, BenchLimitsAcrossFlags) {
    LayerBenchOptions o;
    EXPECT_TRUE(check_bench_flags(o).is_ok()) << check_bench_flags(o).to_string();
    LayerBenchOptions wide = o;
    wide.batches = {256};
    wide.contexts = {1 << 20};
    wide.presets = {"deepseek-v4-flash"};
    Status s = check_bench_flags(wide);
    EXPECT_NE(s.message().find("--batches 256"), std::string::npos) << s.message();
    LayerBenchOptions past = o;
    past.presets = {"hy4"};
    past.contexts = {262144};  // + 1 decoded token: past hy4's 262144 positions
    s = check_bench_flags(past);
    EXPECT_NE(s.message().find("--contexts 262144"), std::string::npos) << s.message();
    EXPECT_NE(s.message().find("max_position_embeddings 262144"), std::string::npos) << s.message();
    past.contexts = {262143};
    EXPECT_TRUE(check_bench_flags(past).is_ok());
}

// run_workload checks a workload against the model before it generates a weight or sizes a cache:
// each of these returns at once (they used to allocate or overflow first).
TEST(RunWorkload, RejectsWorkloadsBeforeBuildingAnything) {
    auto error = [](RunOptions o) {
        std::ostringstream out;
        const Status s = run_workload(o, out);
        EXPECT_TRUE(out.str().empty());
        return s;
    };
    RunOptions o;
    o.requests = 0;
    EXPECT_EQ(error(o).message(), "--requests 0: must be an integer in [1, 4096]");
    o = RunOptions{};
    o.decode_tokens = INT64_MAX;
    EXPECT_NE(error(o).message().find("--decode-tokens 9223372036854775807"), std::string::npos);
    o = RunOptions{};
    o.preset = "qwen3.8-flash-next";
    o.prompt_tokens = 262144;
    Status s = error(o);
    EXPECT_EQ(s.code(), StatusCode::invalid_argument);
    EXPECT_NE(s.message().find("262160 tokens per request, more than max_position_embeddings 262144"),
              std::string::npos) << s.message();
    o = RunOptions{};
    o.requests = 4096;
    o.prompt_tokens = 1000000;
    s = error(o);
    EXPECT_EQ(s.code(), StatusCode::out_of_memory);
    EXPECT_NE(s.message().find("GB of cache"), std::string::npos) << s.message();
    o = RunOptions{};
    o.layers = "0-99999999999";
    EXPECT_NE(error(o).message().find("--layers 0-99999999999"), std::string::npos);
    o = RunOptions{};
    o.preset = "qwen3.8-flash-next";
    o.layers = "0";
    EXPECT_EQ(error(o).code(), StatusCode::unsupported);
    o = RunOptions{};
    o.backend = "garbage";
    EXPECT_NE(error(o).message().find("--backend garbage"), std::string::npos);
}

TEST(Presets, ConfigsParseAndDefaultLayersExist) {
    ASSERT_EQ(presets().size(), 5u);
    for (const Preset& p : presets()) {
        SCOPED_TRACE(p.name);
        auto config = preset_config(p.name);
        ASSERT_TRUE(config.has_value()) << config.status().to_string();
        auto layout = attention_layout(*config, NumericsProfile::deployed);
        ASSERT_TRUE(layout.has_value());
        for (int64_t l : p.default_layers) {
            ASSERT_LT(l, static_cast<int64_t>(layout->layers.size()));
            EXPECT_TRUE(layout->layers[static_cast<size_t>(l)].sieve_runs);
        }
    }
    // The Flash defaults cover all three DeepSeek-V4 layer kinds.
    auto flash = preset_config("deepseek-v4-flash");
    auto layout = attention_layout(*flash, NumericsProfile::deployed);
    EXPECT_EQ(layout->layers[0].kind, "swa");
    EXPECT_EQ(layout->layers[2].kind, "csa");
    EXPECT_EQ(layout->layers[3].kind, "hca");
    EXPECT_FALSE(preset_config("gpt-2").has_value());
}

TEST(Presets, CheckpointHoldsTheLayoutsTensors) {
    // A V3.2 layer in full size is large; its shared-layer cousin in Hy4 too. Use the layout of
    // one DeepSeek-V4-Flash SWA layer (the smallest real layer) and check names, dtypes and shapes.
    auto config = preset_config("deepseek-v4-flash");
    ASSERT_TRUE(config.has_value());
    auto ckpt = preset_checkpoint("deepseek-v4-flash", *config, {0}, 7);
    ASSERT_TRUE(ckpt.has_value()) << ckpt.status().to_string();
    auto wq_b = (*ckpt)->tensor("layers.0.attn.wq_b.weight");
    ASSERT_TRUE(wq_b.has_value());
    EXPECT_EQ(wq_b->dtype, DType::f8_e4m3);
    EXPECT_EQ(std::vector<int64_t>(wq_b->shape.begin(), wq_b->shape.end()), (std::vector<int64_t>{32768, 1024}));
    auto scale = (*ckpt)->tensor("layers.0.attn.wq_b.scale");
    ASSERT_TRUE(scale.has_value());
    EXPECT_EQ(std::vector<int64_t>(scale->shape.begin(), scale->shape.end()), (std::vector<int64_t>{256, 8}));
    EXPECT_EQ((*ckpt)->tensor("layers.0.attn.attn_sink")->dtype, DType::f32);
    EXPECT_EQ((*ckpt)->tensor("layers.0.attn.kv_norm.weight")->dtype, DType::bf16);
    EXPECT_FALSE((*ckpt)->contains("layers.1.attn.wq_a.weight"));  // only the layers asked for
}

}  // namespace
}  // namespace sieve::cli
