// `sieve bench`: the per-stage work model (bytes and flops that the rooflines divide) checked
// against hand counts, a small layer sweep that must time every stage it claims to time and time
// again the points flagged as noisy, the rule that flags them, the plot's layout and the verdict of
// the report.
#include <gtest/gtest.h>

#include <cmath>
#include <nlohmann/json.hpp>
#include <sstream>

#include "bench.h"
#include "bench_layers.h"
#include "bench_plot.h"
#include "bench_roofline.h"
#include "core/cpu_features.h"
#include "core/thread_pool.h"
#include "sieve/models/attention_layout.h"
#include "noise.h"
#include "presets.h"

namespace sieve::cli {
namespace {

const StageWork& stage(const StepWork& w, Stage s) { return w[static_cast<size_t>(s)]; }

const AttentionLayerLayout& layer_of(const AttentionLayout& layout, int64_t layer) {
    for (const AttentionLayerLayout& l : layout.layers)
        if (l.layer == layer) return l;
    ADD_FAILURE() << "no layer " << layer;
    return layout.layers.front();
}

TEST(BenchWork, DeepseekV4CsaDecodeByHand) {
    auto config = preset_config("deepseek-v4-flash");
    ASSERT_TRUE(config.has_value());
    auto ckpt = preset_checkpoint("deepseek-v4-flash", *config, {2}, 1);
    ASSERT_TRUE(ckpt.has_value()) << ckpt.status().to_string();
    auto layout = attention_layout(*config, NumericsProfile::deployed);
    ASSERT_TRUE(layout.has_value());
    const AttentionLayerLayout& csa = layer_of(*layout, 2);
    ASSERT_EQ(csa.kind, "csa");

    // One decode token at position 65535: 16384 compressed entries, top-512, window 128.
    auto w = layer_step_work(*config, csa, **ckpt, {{65535, 1}}, false);
    ASSERT_TRUE(w.has_value());
    EXPECT_DOUBLE_EQ(stage(*w, Stage::indexer).flops, 2.0 * 64 * 128 * 16384 + 2.0 * (64 * 128 * 1024 + 64 * 4096));
    EXPECT_DOUBLE_EQ(stage(*w, Stage::topk).bytes, 4.0 * 16384);
    EXPECT_DOUBLE_EQ(stage(*w, Stage::attention).bytes, (128.0 + 512.0) * 584.0);
    EXPECT_DOUBLE_EQ(stage(*w, Stage::attention).flops, (128.0 + 512.0) * 2 * 64 * 2 * 512);
    // wq_a [1024, 4096], wq_b [32768, 1024], wkv [512, 4096]: one byte per FP8 weight plus one UE8M0 scale
    // byte per 128×128 block.
    const double fp8_weights = 1024.0 * 4096 + 32768.0 * 1024 + 512.0 * 4096;
    EXPECT_GE(stage(*w, Stage::projections).bytes, fp8_weights);
    EXPECT_LE(stage(*w, Stage::projections).bytes, fp8_weights * 1.01);
    EXPECT_DOUBLE_EQ(stage(*w, Stage::projections).flops, 2 * fp8_weights);
    // The indexer streams its weights and its keys (132 B each) once; attention has no weights.
    EXPECT_DOUBLE_EQ(stage(*w, Stage::indexer).bytes - stage(*w, Stage::indexer).weight_bytes, 16384.0 * 132);
    EXPECT_GE(stage(*w, Stage::indexer).weight_bytes, 64.0 * 128 * 1024 + 2.0 * 64 * 4096);
    EXPECT_EQ(stage(*w, Stage::attention).weight_bytes, 0.0);

    // Dense: no indexer, no top-k, every compressed entry attended.
    auto d = layer_step_work(*config, csa, **ckpt, {{65535, 1}}, true);
    ASSERT_TRUE(d.has_value());
    EXPECT_EQ(stage(*d, Stage::indexer).flops, 0.0);
    EXPECT_EQ(stage(*d, Stage::indexer).bytes, 0.0);
    EXPECT_EQ(stage(*d, Stage::topk).bytes, 0.0);
    EXPECT_DOUBLE_EQ(stage(*d, Stage::attention).bytes, (128.0 + 16384.0) * 584.0);

    // Two requests of 3 tokens each: keys are read once per request, attention rows per token.
    auto p = layer_step_work(*config, csa, **ckpt, {{8189, 3}, {8189, 3}}, false);
    ASSERT_TRUE(p.has_value());
    EXPECT_DOUBLE_EQ(stage(*p, Stage::topk).bytes, 2 * 4.0 * (2047 + 2047 + 2048));
    EXPECT_DOUBLE_EQ(stage(*p, Stage::attention).bytes, 6 * (128.0 + 512.0) * 584.0);
}

TEST(BenchWork, QsaShortContextTakesNoIndexer) {
    auto config = preset_config("qwen3.8-flash-next");
    ASSERT_TRUE(config.has_value());
    auto ckpt = preset_checkpoint("qwen3.8-flash-next", *config, {3}, 1);
    ASSERT_TRUE(ckpt.has_value());
    auto layout = attention_layout(*config, NumericsProfile::deployed);
    ASSERT_TRUE(layout.has_value());
    const AttentionLayerLayout& l = layer_of(*layout, 3);
    // 2051 = budget + r − 1 visible tokens: every token is attended, nothing scored.
    auto w = layer_step_work(*config, l, **ckpt, {{2050, 1}}, false);
    ASSERT_TRUE(w.has_value());
    EXPECT_EQ(stage(*w, Stage::indexer).flops, 0.0);
    EXPECT_DOUBLE_EQ(stage(*w, Stage::attention).bytes, 2051.0 * 2 * 2 * 256 * 2);
    // One more token: 2052 / 4 = 513 groups scored by 4 heads of 128, 2051 token slots attended.
    w = layer_step_work(*config, l, **ckpt, {{2051, 1}}, false);
    ASSERT_TRUE(w.has_value());
    EXPECT_DOUBLE_EQ(stage(*w, Stage::indexer).flops, 513.0 * 2 * 4 * 128);
    EXPECT_DOUBLE_EQ(stage(*w, Stage::attention).bytes, 2051.0 * 2 * 2 * 256 * 2);
}

TEST(BenchLayers, SmallSweepTimesEveryStage) {
    LayerBenchOptions o;
    o.presets = {"qwen3.8-flash-next"};
    o.contexts = {3000};
    o.batches = {1, 2};
    o.prefill_chunks = {32};
    o.prefill_context = 256;
    o.compare_context = 3000;
    o.seed_tokens = 256;
    o.reps = 1;
    o.compare_isa = active_isa() > Isa::avx2 ? "avx2" : "";
    int reported = 0;
    auto points = run_layer_bench(o, [&](const LayerPoint&) { ++reported; });
    ASSERT_TRUE(points.has_value()) << points.status().to_string();
    EXPECT_EQ(reported, static_cast<int>(points->size()));
    int sparse_decode = 0, dense_decode = 0, prefill = 0;
    for (const LayerPoint& p : *points) {
        SCOPED_TRACE(p.phase + " " + p.variant + " batch " + std::to_string(p.batch));
        EXPECT_EQ(p.kind, "qsa");
        EXPECT_GT(p.seconds, 0.0);
        EXPECT_GT(p.stage_seconds[static_cast<size_t>(Stage::projections)], 0.0);
        EXPECT_GT(p.stage_seconds[static_cast<size_t>(Stage::attention)], 0.0);
        EXPECT_GT(p.work[static_cast<size_t>(Stage::attention)].bytes, 0.0);
        const double indexer = p.stage_seconds[static_cast<size_t>(Stage::indexer)];
        if (p.phase == "prefill") {
            ++prefill;
            EXPECT_EQ(p.tokens, 32);
            EXPECT_EQ(p.context, 256);
        } else if (p.variant == "dense") {
            ++dense_decode;
            EXPECT_EQ(indexer, 0.0);  // the dense variant scores nothing
            EXPECT_EQ(p.batch, 1);
        } else {
            ++sparse_decode;
            EXPECT_GT(indexer, 0.0);  // 3000 tokens > the 2051-token budget: the indexer runs
            EXPECT_EQ(p.tokens, p.batch);
        }
    }
    EXPECT_EQ(prefill, 1);
    EXPECT_EQ(dense_decode, 1);
    // Batches 1 and 2, the one-thread point (when there is more than one thread) and the ISA pair.
    EXPECT_GE(sparse_decode, 2);

    o.batches = {0};
    EXPECT_FALSE(run_layer_bench(o, {}).has_value());
}

TEST(BenchLayers, TheSecondPassRetimesFlaggedPoints) {
    LayerBenchOptions o;
    o.presets = {"qwen3.8-flash-next"};
    o.contexts = {3000};
    o.batches = {1};
    o.prefill_chunks = {};
    o.seed_tokens = 256;
    o.reps = 1;
    o.compare_isa = "";
    o.thread_compare = false;
    // The dense point always looks noisy; the sparse one until it has been timed again.
    int judged = 0;
    const NoiseJudge judge = [&](const std::vector<LayerPoint>& points) {
        ++judged;
        std::vector<std::string> why;
        for (const LayerPoint& p : points)
            why.push_back(p.variant == "dense" ? "always" : p.retimed ? "" : "first timing");
        return why;
    };
    int retimed_reports = 0;
    auto points = run_layer_bench(o, [&](const LayerPoint& p) { retimed_reports += p.retimed; }, judge);
    ASSERT_TRUE(points.has_value()) << points.status().to_string();
    ASSERT_EQ(points->size(), 2u);
    EXPECT_GT(judged, 0);
    EXPECT_EQ(retimed_reports, 2);
    for (const LayerPoint& p : *points) {
        SCOPED_TRACE(p.variant);
        EXPECT_TRUE(p.retimed);
        EXPECT_GT(p.seconds, 0.0);
        EXPECT_EQ(p.noise, p.variant == "dense" ? "always" : "");  // replaced, or kept with its flag
    }
}

// A decode sweep of one series on a contexts × batches grid: each point's step and its attention
// stage (three quarters of the step) at `ratio` × their rooflines, the work growing with context and
// batch; `slow` multiplies the attention time of one point.
struct Grid {
    std::vector<int64_t> contexts = {4096, 16384, 65536, 131072};
    std::vector<int64_t> batches = {1, 4, 16};
};
std::vector<bench::NoisePoint> decode_sweep(const Grid& g, double ratio, int64_t slow_context = 0,
                                            int64_t slow_batch = 0, double slow = 1.0) {
    std::vector<bench::NoisePoint> points;
    for (int64_t c : g.contexts)
        for (int64_t b : g.batches) {
            bench::NoisePoint p;
            p.series = "layer 2 decode sparse";
            p.at = {c, b};
            const double roof = 1e-6 * static_cast<double>(b) * std::log2(static_cast<double>(c));
            const double attention = 0.75 * ratio * roof * (c == slow_context && b == slow_batch ? slow : 1.0);
            const double projections = 0.25 * ratio * roof;
            p.step = {"step", attention + projections, roof};
            p.stages = {{"projections", projections, 0.25 * roof}, {"attention", attention, 0.75 * roof}};
            points.push_back(p);
        }
    return points;
}

size_t count_noisy(const std::vector<bench::Noise>& noise) {
    size_t n = 0;
    for (const bench::Noise& x : noise) n += x.noisy();
    return n;
}

TEST(BenchNoise, AQuietSweepIsNotFlagged) {
    const std::vector<bench::Noise> noise = bench::judge_noise(decode_sweep(Grid{}, 1.6));
    EXPECT_EQ(count_noisy(noise), 0u);
}

TEST(BenchNoise, APointThreeTimesOffItsNeighboursIsFlagged) {
    const Grid g;
    const auto points = decode_sweep(g, 1.6, 16384, 4, 3.0);
    const std::vector<bench::Noise> noise = bench::judge_noise(points);
    ASSERT_EQ(noise.size(), points.size());
    for (size_t i = 0; i < points.size(); ++i) {
        SCOPED_TRACE(fmt::format("context {} batch {}", points[i].at[0], points[i].at[1]));
        const bool odd = points[i].at[0] == 16384 && points[i].at[1] == 4;
        EXPECT_EQ(noise[i].noisy(), odd) << noise[i].reason;
        if (!odd) continue;
        EXPECT_TRUE(noise[i].out_of_line);
        EXPECT_FALSE(noise[i].above_roofline);
        EXPECT_NE(noise[i].reason.find("attention"), std::string::npos) << noise[i].reason;
        EXPECT_NE(noise[i].reason.find("contexts"), std::string::npos) << noise[i].reason;
        EXPECT_NE(noise[i].reason.find("batches"), std::string::npos) << noise[i].reason;
    }
    // The first point of the sweep, with neighbours on one side only.
    const std::vector<bench::Noise> edge = bench::judge_noise(decode_sweep(g, 1.6, 4096, 1, 3.0));
    EXPECT_TRUE(edge.front().out_of_line) << edge.front().reason;
    EXPECT_EQ(count_noisy(edge), 1u);
}

TEST(BenchNoise, WhatLoadCannotCauseIsNotFlagged) {
    const Grid g;
    // Faster than its neighbours (and slower than its roofline): not a sign of load on itself.
    EXPECT_EQ(count_noisy(bench::judge_noise(decode_sweep(g, 4.0, 16384, 4, 1.0 / 3))), 0u);
    // Within the factor.
    EXPECT_EQ(count_noisy(bench::judge_noise(decode_sweep(g, 1.6, 16384, 4, 1.8))), 0u);
    // Two points per line: neither can be told to be the odd one.
    EXPECT_EQ(count_noisy(bench::judge_noise(decode_sweep({{4096, 16384}, {1, 4}}, 1.6, 16384, 4, 3.0))), 0u);
    // A stage below the judged fraction of its step, 3x off: its time is mostly fixed cost.
    auto points = decode_sweep(g, 1.6);
    for (bench::NoisePoint& p : points) p.stages.push_back({"top-k", 0.01 * p.step.seconds, 0.001 * p.step.seconds});
    points[4].stages.back().seconds *= 3;
    EXPECT_EQ(count_noisy(bench::judge_noise(points)), 0u);
}

TEST(BenchNoise, AboveTheRooflineOrSpreadIsFlagged) {
    auto points = decode_sweep(Grid{}, 1.6);
    points[2].step.seconds = 0.8 * points[2].step.roofline_seconds;  // faster than the ceilings allow
    points[5].spread = 0.8;
    const std::vector<bench::Noise> noise = bench::judge_noise(points);
    EXPECT_TRUE(noise[2].above_roofline);
    EXPECT_NE(noise[2].reason.find("step at 125% of its roofline"), std::string::npos) << noise[2].reason;
    EXPECT_TRUE(noise[5].spread);
    EXPECT_NE(noise[5].reason.find("spread 80%"), std::string::npos) << noise[5].reason;
    EXPECT_EQ(count_noisy(noise), 2u);
}

LayerPoint plot_point(const std::string& preset, int64_t layer, const std::string& variant, int64_t batch,
                      int64_t context, double seconds) {
    LayerPoint p;
    p.preset = preset;
    p.layer = layer;
    p.kind = layer == 2 ? "csa" : "hca";
    p.phase = "decode";
    p.variant = variant;
    p.isa = "avx512_bf16";
    p.threads = 2;
    p.batch = batch;
    p.context = context;
    p.tokens = batch;
    p.seconds = seconds;
    return p;
}

size_t count_of(const std::string& s, const std::string& part) {
    size_t n = 0;
    for (size_t at = s.find(part); at != std::string::npos; at = s.find(part, at + 1)) ++n;
    return n;
}

bool inside(const PlotBox& inner, const PlotBox& outer) {
    return inner.x >= outer.x && inner.y >= outer.y && inner.x + inner.w <= outer.x + outer.w &&
           inner.y + inner.h <= outer.y + outer.h;
}
bool overlap(const PlotBox& a, const PlotBox& b) {
    return a.x < b.x + b.w && b.x < a.x + a.w && a.y < b.y + b.h && b.y < a.y + a.h;
}

TEST(BenchPlot, ARowPerBatchMeasuredWithoutBatchOne) {
    std::vector<LayerPoint> points;
    for (int64_t batch : {4, 16})
        for (int64_t layer : {2, 3})
            for (int64_t ctx : {4096, 16384, 65536})
                points.push_back(plot_point("deepseek-v4-flash", layer, "sparse", batch, ctx, 1e-3 * batch * layer));
    points.push_back(plot_point("deepseek-v4-flash", 2, "sparse", 4, 131072, 1e-2));
    points.back().noise = "attention 3.0x the time per unit of work of its neighbouring contexts";
    points.push_back(plot_point("deepseek-v4-flash", 2, "sparse", 1, 4096, 1e-3));
    points.back().isa = "avx2";  // another ISA: not plotted
    points.push_back(plot_point("deepseek-v4-flash", 2, "sparse", 1, 131072, 1e-3));  // a comparison point
    const DecodePlot plot = decode_plot(points, "avx512_bf16", 2, {4, 16});
    EXPECT_EQ(plot.batches, (std::vector<int64_t>{4, 16}));
    EXPECT_NE(plot.svg.find(">deepseek-v4-flash, batch 4<"), std::string::npos);
    EXPECT_NE(plot.svg.find(">deepseek-v4-flash, batch 16<"), std::string::npos);
    EXPECT_EQ(plot.svg.find("batch 1<"), std::string::npos);
    EXPECT_EQ(count_of(plot.svg, "<polyline"), 4u);  // two layers in two panels
    EXPECT_EQ(plot.plot_areas.size(), 2u);
    EXPECT_EQ(count_of(plot.svg, "r=\"6\""), 2u);  // the noisy point's ring and its legend entry
    EXPECT_NE(plot.svg.find(">layer 2 (csa)<"), std::string::npos);
    EXPECT_NE(plot.svg.find(">step time (ms)<"), std::string::npos);
    EXPECT_NE(plot.svg.find(">context (tokens in the cache)<"), std::string::npos);
}

TEST(BenchPlot, TitleLegendsAndLabelsFitTheCanvasAndLeaveThePlotAreasFree) {
    for (const std::vector<std::string>& presets :
         {std::vector<std::string>{"qwen3.8-flash-next"}, std::vector<std::string>{"deepseek-v4-flash", "hy4", "qwen3.8-flash-next"}}) {
        std::vector<LayerPoint> points;
        for (const std::string& preset : presets)
            for (int64_t batch : {1, 4})
                for (int64_t ctx : {4096, 131072}) {
                    points.push_back(plot_point(preset, 2, "sparse", batch, ctx, 2e-3));
                    points.push_back(plot_point(preset, 3, "sparse", batch, ctx, 9e-3));
                    if (batch == 1) points.push_back(plot_point(preset, 2, "dense", batch, ctx, 4e-2));
                }
        const DecodePlot plot = decode_plot(points, "avx512_bf16", 2, {1, 4});
        SCOPED_TRACE(presets.size());
        ASSERT_EQ(plot.plot_areas.size(), 2 * presets.size());
        ASSERT_EQ(plot.legends.size(), presets.size());
        std::vector<PlotBox> text = plot.labels;
        text.push_back(plot.title);
        text.insert(text.end(), plot.legends.begin(), plot.legends.end());
        for (const PlotBox& b : text) {
            EXPECT_TRUE(inside(b, plot.canvas)) << b.x << "," << b.y << " " << b.w << "x" << b.h;
            for (const PlotBox& area : plot.plot_areas) EXPECT_FALSE(overlap(b, area)) << b.x << "," << b.y;
        }
        for (size_t i = 0; i < text.size(); ++i)
            for (size_t j = i + 1; j < text.size(); ++j) EXPECT_FALSE(overlap(text[i], text[j])) << i << " " << j;
        for (const PlotBox& area : plot.plot_areas) EXPECT_TRUE(inside(area, plot.canvas));
        EXPECT_NE(plot.svg.find(fmt::format("width=\"{:.0f}\"", std::ceil(plot.canvas.w))), std::string::npos);
    }
}

// Measurements with one decode point whose projections and output stream 100 MB of weights in
// `seconds`, on a machine of 10 GB/s.
BenchMeasurements one_point(double seconds, double spread = 0) {
    const int threads = ThreadPool::global().size();
    BenchMeasurements m;
    m.ceilings = {{"triad bandwidth", "GB/s", "compiler", threads, 10.0, 0.01},
                  {"fp32 fma", "GFLOP/s", "avx512", threads, 100.0, 0.01},
                  {"bf16 dot", "GFLOP/s", "avx512_bf16", threads, 200.0, 0.01}};
    LayerPoint p = plot_point("qwen3.8-flash-next", 3, "sparse", 1, 4096, seconds);
    p.kind = "qsa";
    p.threads = threads;
    p.spread = spread;
    p.stage_seconds[static_cast<size_t>(Stage::projections)] = seconds;
    StageWork& w = p.work[static_cast<size_t>(Stage::projections)];
    w.bytes = w.weight_bytes = 1e8;
    w.flops = w.weight_flops = 2e8;
    m.points = {p};
    return m;
}

BenchOptions report_options(bool quick, bool json) {
    BenchOptions o;
    o.quick = quick;
    o.json = json;
    o.layers.isa = "avx512_bf16";
    return o;
}

TEST(BenchReport, AMissedTargetIsAFailedVerdict) {
    std::ostringstream out;
    // 1 GB/s of 10: the decode projections target (85%) is missed.
    auto verdict = report_bench(report_options(false, false), one_point(0.1), out);
    ASSERT_TRUE(verdict.has_value()) << verdict.status().to_string();
    EXPECT_FALSE(*verdict);
    EXPECT_NE(out.str().find("MISSED"), std::string::npos) << out.str();
    EXPECT_NE(out.str().find("verdict: 2 of 2 target(s) measured MISSED"), std::string::npos) << out.str();

    // 95% of the bandwidth: every target measured is met.
    std::ostringstream met;
    verdict = report_bench(report_options(false, false), one_point(0.0105), met);
    ASSERT_TRUE(verdict.has_value());
    EXPECT_TRUE(*verdict) << met.str();

    // --quick: reported, not evaluated.
    std::ostringstream quick;
    verdict = report_bench(report_options(true, true), one_point(0.1), quick);
    ASSERT_TRUE(verdict.has_value());
    EXPECT_TRUE(*verdict);
    const nlohmann::json j = nlohmann::json::parse(quick.str());
    EXPECT_EQ(j["verdict"], "not evaluated (--quick)");
    for (const auto& t : j["targets"]) {
        EXPECT_TRUE(t["met"].is_null()) << t.dump();
        if (!t["worst"].is_null()) {
            EXPECT_EQ(t["state"], "not evaluated (--quick)");
        }
    }
}

TEST(BenchReport, ATargetWhoseWorstPointIsNoisySaysSo) {
    std::ostringstream out;
    auto verdict = report_bench(report_options(false, true), one_point(0.1, 0.9), out);
    ASSERT_TRUE(verdict.has_value());
    EXPECT_FALSE(*verdict);
    const nlohmann::json j = nlohmann::json::parse(out.str());
    ASSERT_EQ(j["points"].size(), 1u);
    EXPECT_EQ(j["points"][0]["noisy"], true);
    EXPECT_NE(j["points"][0]["noise"].get<std::string>().find("spread 90%"), std::string::npos);
    bool seen = false;
    for (const auto& t : j["targets"])
        if (t["name"] == "decode projections") {
            seen = true;
            EXPECT_EQ(t["noisy"], true);
            EXPECT_EQ(t["met"], false);
        }
    EXPECT_TRUE(seen);
}

}  // namespace
}  // namespace sieve::cli
