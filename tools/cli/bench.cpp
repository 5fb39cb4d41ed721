#include "bench.h"

#include <fmt/format.h>
#include <fmt/ostream.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <ostream>
#include <tuple>

#include "bench_plot.h"
#include "core/cpu_features.h"
#include "core/thread_pool.h"
#include "noise.h"

namespace sieve::cli {

namespace {

constexpr size_t kStages = static_cast<size_t>(Stage::count);

// The measured ceiling that judges a stage of a point.
class Ceilings {
public:
    explicit Ceilings(std::vector<bench::Ceiling> all) : all_(std::move(all)) {}
    const std::vector<bench::Ceiling>& all() const { return all_; }

    double bandwidth(int threads) const { return find("triad bandwidth", "", threads); }  // GB/s
    // GFLOP/s: the bf16 peak for matrix stages (AMX tiles on amx_bf16, vdpbf16ps on avx512_bf16), else the
    // fp32 FMA peak of the ISA.
    double peak(const std::string& isa, bool matrix, int threads) const {
        if (isa == "amx_bf16") return matrix ? find("bf16 amx", "amx_bf16", threads) : find("fp32 fma", "avx512", threads);
        if (isa == "avx512_bf16") return matrix ? find("bf16 dot", "avx512_bf16", threads) : find("fp32 fma", "avx512", threads);
        if (isa == "avx512" || isa == "avx2") return find("fp32 fma", isa, threads);
        return 0;
    }

private:
    double find(const std::string& name, const std::string& isa, int threads) const {
        for (const bench::Ceiling& c : all_)
            if (c.name == name && (isa.empty() || c.isa == isa) && c.threads == threads) return c.value;
        return 0;
    }
    std::vector<bench::Ceiling> all_;
};

StageRoofline roofline(const Ceilings& c, const LayerPoint& p, size_t stage) {
    return stage_roofline(p.work[stage], c.bandwidth(p.threads) * 1e9, c.peak(p.isa, true, p.threads) * 1e9,
                          c.peak(p.isa, false, p.threads) * 1e9);
}

double step_roofline(const Ceilings& c, const LayerPoint& p) {
    return sieve::cli::step_roofline(p.work, c.bandwidth(p.threads) * 1e9, c.peak(p.isa, true, p.threads) * 1e9,
                                     c.peak(p.isa, false, p.threads) * 1e9)
        .seconds;
}

std::string pct(double fraction) { return fraction > 0 ? fmt::format("{:.0f}%", 100 * fraction) : "-"; }

// The stages a table shows, with short headers.
constexpr std::pair<Stage, const char*> kShown[] = {{Stage::projections, "proj"}, {Stage::compressor, "compr"},
                                                    {Stage::indexer, "index"},     {Stage::topk, "top-k"},
                                                    {Stage::attention, "attn"},    {Stage::output, "out"}};

std::string stage_cell(const Ceilings& c, const LayerPoint& p, Stage s) {
    const size_t i = static_cast<size_t>(s);
    const double t = p.stage_seconds[i];
    if (t <= 0) return "-";
    const StageRoofline r = roofline(c, p, i);
    if (r.seconds <= 0) return fmt::format("{:.2f}", 1e3 * t);
    return fmt::format("{:.2f} {}{}", 1e3 * t, pct(r.seconds / t), r.memory_bound ? "m" : "c");
}

const LayerPoint* find_point(const std::vector<LayerPoint>& points, const LayerPoint& like, const std::string& variant,
                             const std::string& isa, int threads) {
    for (const LayerPoint& p : points)
        if (p.preset == like.preset && p.layer == like.layer && p.phase == like.phase && p.batch == like.batch &&
            p.context == like.context && p.tokens == like.tokens && p.variant == variant && p.isa == isa &&
            p.threads == threads)
            return &p;
    return nullptr;
}

std::string point_name(const LayerPoint& p) {
    return fmt::format("{} L{} {} {} b{} ctx {} {} {}t", p.preset, p.layer, p.kind, p.phase, p.batch, p.context, p.isa,
                       p.threads);
}

// One performance target: the worst measured value over the points it covers.
struct Target {
    enum class Unit { fraction, ratio };
    Target(std::string name_, std::string rule_, double threshold_, Unit unit_ = Unit::fraction, bool higher_better_ = true)
        : name(std::move(name_)), rule(std::move(rule_)), threshold(threshold_), unit(unit_), higher_better(higher_better_) {}
    std::string name;
    std::string rule;        // "≥ 85% of triad bandwidth"
    double threshold = 0;
    Unit unit = Unit::fraction;
    bool higher_better = true;
    std::optional<double> worst;
    std::string where;       // the worst point
    std::string noise;       // why the worst point (or the one it is compared with) looks timed under load
    // `value` at point `p`, compared with `other` where the value is a ratio of two points.
    void see(double value, const LayerPoint& p, const LayerPoint* other = nullptr) {
        if (worst && (higher_better ? value >= *worst : value <= *worst)) return;
        worst = value;
        where = point_name(p);
        noise = p.noise;
        if (other && !other->noise.empty())
            noise += (noise.empty() ? "" : "; ") + fmt::format("{} {}: {}", point_name(*other), other->variant, other->noise);
    }
    bool met() const { return worst && (higher_better ? *worst >= threshold : *worst <= threshold); }
    std::string value() const {
        if (!worst) return "-";
        return unit == Unit::ratio ? fmt::format("{:.2f}x", *worst) : fmt::format("{:.0f}%", 100 * *worst);
    }
};

std::vector<Target> evaluate_targets(const Ceilings& c, const std::vector<LayerPoint>& points, const std::string& main_isa,
                                     int all_threads, int64_t max_context) {
    Target proj{"decode projections", "≥ 85% of triad bandwidth (batch 1)", 0.85};
    Target prefill{"prefill projections", "≥ 70% of the bf16 dot peak (largest chunk)", 0.70};
    Target index{"indexer + top-k", "≥ 70% of its roofline (contexts ≥ 64K)", 0.70};
    Target attn{"sparse attention", "≥ 50% of its roofline", 0.50};
    Target step{"whole decode step", "≥ 60% of the sum of its stages' rooflines", 0.60};
    Target threads{"thread scaling", fmt::format("{} threads ≥ 1.8× one thread", all_threads), 1.8, Target::Unit::ratio};
    Target sparse{"sparse vs dense (V4 CSA)", fmt::format("decode step ≥ 5× faster than dense at {}", max_context), 5.0,
                  Target::Unit::ratio};
    Target flat{"outside the indexer (V4 CSA)", "time outside indexer + top-k, longest / shortest context ≤ 1.25×", 1.25,
                Target::Unit::ratio, false};
    Target avx2{"AVX2 path", "≥ 40% of the best ISA's speed", 0.40};
    int64_t max_chunk = 0;
    for (const LayerPoint& p : points)
        if (p.phase == "prefill") max_chunk = std::max(max_chunk, p.tokens);
    const double bw_all = c.bandwidth(all_threads);

    for (const LayerPoint& p : points) {
        const auto t = [&](Stage s) { return p.stage_seconds[static_cast<size_t>(s)]; };
        const auto r = [&](Stage s) { return roofline(c, p, static_cast<size_t>(s)).seconds; };
        const bool main = p.variant == "sparse" && p.isa == main_isa && p.threads == all_threads;
        if (main && p.phase == "decode") {
            if (p.batch == 1 && bw_all > 0) {
                const double bytes = p.work[static_cast<size_t>(Stage::projections)].bytes + p.work[static_cast<size_t>(Stage::output)].bytes;
                const double secs = t(Stage::projections) + t(Stage::output);
                if (secs > 0) proj.see(bytes / secs / (bw_all * 1e9), p);
            }
            if (p.context >= 65536 && r(Stage::indexer) > 0)
                index.see((r(Stage::indexer) + r(Stage::topk)) / (t(Stage::indexer) + t(Stage::topk)), p);
            if (r(Stage::attention) > 0 && t(Stage::attention) > 0)
                attn.see(r(Stage::attention) / t(Stage::attention), p);
            step.see(step_roofline(c, p) / p.seconds, p);
            if (p.kind == "csa" && p.batch == 1 && p.context == max_context)
                if (const LayerPoint* d = find_point(points, p, "dense", main_isa, all_threads))
                    sparse.see(d->seconds / p.seconds, p, d);
        }
        if (main && p.phase == "prefill" && p.tokens == max_chunk) {
            const double peak = c.peak(p.isa, true, p.threads);
            const double flops = p.work[static_cast<size_t>(Stage::projections)].flops + p.work[static_cast<size_t>(Stage::output)].flops;
            const double secs = t(Stage::projections) + t(Stage::output);
            if (peak > 0 && secs > 0) prefill.see(flops / secs / (peak * 1e9), p);
        }
        if (p.variant == "sparse" && p.isa == main_isa && p.threads == 1 && all_threads > 1)
            if (const LayerPoint* a = find_point(points, p, "sparse", main_isa, all_threads))
                threads.see(p.seconds / a->seconds, p, a);
        if (p.variant == "sparse" && p.isa != main_isa)
            if (const LayerPoint* a = find_point(points, p, "sparse", main_isa, all_threads))
                avx2.see(a->seconds / p.seconds, p, a);
    }
    // Time outside the indexer, longest against shortest context, per CSA layer at batch 1.
    std::map<std::string, std::pair<const LayerPoint*, const LayerPoint*>> csa;  // shortest, longest
    for (const LayerPoint& p : points)
        if (p.kind == "csa" && p.phase == "decode" && p.variant == "sparse" && p.batch == 1 && p.isa == main_isa &&
            p.threads == all_threads) {
            auto& [lo, hi] = csa[p.preset + std::to_string(p.layer)];
            if (!lo || p.context < lo->context) lo = &p;
            if (!hi || p.context > hi->context) hi = &p;
        }
    for (const auto& [key, pair] : csa) {
        const auto outside = [](const LayerPoint* p) {
            return p->seconds - p->stage_seconds[static_cast<size_t>(Stage::indexer)] -
                   p->stage_seconds[static_cast<size_t>(Stage::topk)];
        };
        if (pair.first != pair.second && outside(pair.first) > 0)
            flat.see(outside(pair.second) / outside(pair.first), *pair.second, pair.first);
    }
    return {proj, prefill, index, attn, step, threads, sparse, flat, avx2};
}

// The noise rule's view of each point (tools/bench/noise.h): the step and its stages against their
// rooflines, along contexts and batches for decode, along chunk sizes for prefill.
std::vector<bench::Noise> judge_points(const Ceilings& c, const std::vector<LayerPoint>& points) {
    std::vector<bench::NoisePoint> view;
    for (const LayerPoint& p : points) {
        bench::NoisePoint n;
        n.series = fmt::format("{} {} {} {} {} {}", p.preset, p.layer, p.phase, p.variant, p.isa, p.threads);
        if (p.phase == "decode") {
            n.at = {p.context, p.batch};
        } else {
            n.at = {p.tokens, p.context};
            n.axis_names = {"chunks", "contexts"};
        }
        n.spread = p.spread;
        n.step = {"step", p.seconds, step_roofline(c, p)};
        for (size_t s = 0; s < kStages; ++s)
            n.stages.push_back({std::string(stage_name(static_cast<Stage>(s))), p.stage_seconds[s], roofline(c, p, s).seconds});
        view.push_back(std::move(n));
    }
    return bench::judge_noise(view);
}

// The rule of tools/bench/noise.h in one sentence, for the report.
std::string noise_rule() {
    return fmt::format(
        "a point is noisy when its step, or a stage taking {:.0f}% of the step or more, runs above its roofline or at "
        "more than {:g}x the time per unit of work of the neighbouring contexts/batches, or when its repetitions spread "
        "more than {:.0f}%",
        100 * bench::kJudgedStageFraction, bench::kOutOfLineFactor, 100 * bench::kMaxSpread);
}

// A ceiling whose repetitions spread as much as a noisy point's was measured while the machine was
// busy (its best repetition may still be right: a ceiling is the best of them).
bool ceiling_noisy(const bench::Ceiling& c) { return c.spread > bench::kMaxSpread; }

void print_ceilings(std::ostream& out, const Ceilings& c, int runs) {
    fmt::print(out, "machine ceilings (best of repeated runs; spread = (best - worst) / best)\n");
    fmt::print(out, "  {:<16} {:<12} {:>7} {:>12} {:>8}\n", "ceiling", "isa", "threads", "value", "spread");
    bool noisy = false;
    for (const bench::Ceiling& x : c.all()) {
        noisy |= ceiling_noisy(x);
        fmt::print(out, "  {:<16} {:<12} {:>7} {:>8.1f} {:<7} {:>6.1f}%{}\n", x.name, x.isa, x.threads, x.value, x.unit,
                   100 * x.spread, ceiling_noisy(x) ? "  NOISY" : "");
    }
    if (noisy)
        fmt::print(out, "  NOISY: repetitions spread more than {:.0f}%: the machine was busy while they ran\n",
                   100 * bench::kMaxSpread);
    if (runs > 1)
        fmt::print(out, "  (measured {} times: points ran above their rooflines after the first; each ceiling's best kept)\n",
                   runs);
}

// The table's noise column: "NOISY", "re-timed" (flagged, then replaced by a consistent timing) or "-".
std::string noise_cell(const LayerPoint& p) {
    if (!p.noise.empty()) return "NOISY";
    return p.retimed ? "re-timed" : "-";
}

void print_points(std::ostream& out, const Ceilings& c, const std::vector<LayerPoint>& points, const std::string& main_isa,
                  int all_threads) {
    fmt::print(out,
               "\nlayer steps (ms; a stage shows its time, the share of its roofline reached and what binds it: "
               "m = memory, c = compute; noise: see below)\n");
    std::vector<const LayerPoint*> shown;
    for (const LayerPoint& p : points)
        if (p.variant == "sparse" && p.isa == main_isa && p.threads == all_threads) shown.push_back(&p);
    std::stable_sort(shown.begin(), shown.end(), [](const LayerPoint* a, const LayerPoint* b) {
        return std::tie(a->preset, a->layer, a->phase, a->context, a->batch) <
               std::tie(b->preset, b->layer, b->phase, b->context, b->batch);
    });
    std::string last;
    for (const LayerPoint* pp : shown) {
        const LayerPoint& p = *pp;
        const std::string head = fmt::format("{} layer {} ({}) {}", p.preset, p.layer, p.kind, p.phase);
        if (head != last) {
            last = head;
            fmt::print(out, "\n{}, {}, {} thread(s)\n", head, p.isa, p.threads);
            fmt::print(out, "  {:>7} {:>5} {:>6} {:>9} {:>9} {:>5}", "context", "batch", "tokens", "step", "roofline",
                       "eff");
            for (const auto& [s, name] : kShown) fmt::print(out, " {:>13}", name);
            fmt::print(out, " {:>9} {:>7} {:>6} {:>8}\n", "dense", "speedup", "spread", "noise");
        }
        const double roof = step_roofline(c, p);
        fmt::print(out, "  {:>7} {:>5} {:>6} {:>9.3f} {:>9.3f} {:>5}", p.context, p.batch, p.tokens, 1e3 * p.seconds,
                   1e3 * roof, pct(roof / p.seconds));
        for (const auto& [s, name] : kShown) fmt::print(out, " {:>13}", stage_cell(c, p, s));
        const LayerPoint* d = find_point(points, p, "dense", main_isa, all_threads);
        if (d)
            fmt::print(out, " {:>9.3f} {:>6.1f}x", 1e3 * d->seconds, d->seconds / p.seconds);
        else
            fmt::print(out, " {:>9} {:>7}", "-", "-");
        fmt::print(out, " {:>5.0f}% {:>8}\n", 100 * p.spread, d && !d->noise.empty() ? "NOISY" : noise_cell(p));
    }

    fmt::print(out, "\ncomparisons at batch 1 (ms per layer step)\n");
    fmt::print(out, "  {:<44} {:>10} {:>10} {:>8}\n", "layer", "best", "other", "ratio");
    for (const LayerPoint& p : points) {
        if (p.variant != "sparse" || (p.isa == main_isa && p.threads == all_threads)) continue;
        const LayerPoint* a = find_point(points, p, "sparse", main_isa, all_threads);
        if (!a) continue;
        const std::string what = p.threads != all_threads ? fmt::format("{} vs {} thread(s)", all_threads, p.threads)
                                                            : fmt::format("{} vs {}", main_isa, p.isa);
        fmt::print(out, "  {:<44} {:>10.3f} {:>10.3f} {:>7.2f}x  ({}){}\n",
                   fmt::format("{} L{} {} ctx {}", p.preset, p.layer, p.kind, p.context), 1e3 * a->seconds,
                   1e3 * p.seconds, p.seconds / a->seconds, what,
                   p.noise.empty() && a->noise.empty() ? "" : "  NOISY");
    }
}

void print_noise(std::ostream& out, const std::vector<LayerPoint>& points) {
    size_t noisy = 0, retimed = 0, replaced = 0;
    for (const LayerPoint& p : points) {
        noisy += !p.noise.empty();
        retimed += p.retimed;
        replaced += p.retimed && p.noise.empty();
    }
    fmt::print(out, "\nnoise ({})\n", noise_rule());
    fmt::print(out, "  {} point(s) flagged and timed again, {} of them replaced by a consistent timing\n", retimed,
               replaced);
    if (noisy == 0) {
        fmt::print(out, "  no point looks timed under load\n");
        return;
    }
    fmt::print(out,
               "  {} of {} point(s) still noisy: the machine was busy while they ran (or while the ceilings were "
               "measured); their numbers, and the targets whose worst point is one of them, are not to be trusted: "
               "run again on a quiet machine\n",
               noisy, points.size());
    for (const LayerPoint& p : points)
        if (!p.noise.empty()) fmt::print(out, "  {} {}: {}\n", point_name(p), p.variant, p.noise);
}

// "met", "MISSED", or why there is no verdict.
std::string target_state(const Target& t, bool evaluated) {
    if (!t.worst) return "not measured in this run";
    if (!evaluated) return "not evaluated (--quick)";
    return t.met() ? "met" : "MISSED";
}

// The run's verdict over its targets: met when every target evaluated was.
struct Verdict {
    bool evaluated = true;  // false with --quick
    size_t measured = 0, missed = 0;
    bool passed() const { return !evaluated || missed == 0; }
    std::string code() const {  // the JSON's
        if (!evaluated) return "not evaluated (--quick)";
        if (measured == 0) return "no target measured";
        return missed == 0 ? "met" : "missed";
    }
    std::string sentence() const {
        if (!evaluated || measured == 0) return code();
        if (missed == 0) return fmt::format("all {} target(s) measured were met", measured);
        return fmt::format("{} of {} target(s) measured MISSED", missed, measured);
    }
};

Verdict verdict_of(const std::vector<Target>& targets, bool evaluated) {
    Verdict v;
    v.evaluated = evaluated;
    for (const Target& t : targets) {
        v.measured += t.worst.has_value();
        v.missed += t.worst && !t.met();
    }
    return v;
}

void print_targets(std::ostream& out, const std::vector<Target>& targets, const Verdict& verdict) {
    fmt::print(out, "\ntargets (worst point){}\n",
               verdict.evaluated ? "" : ": not evaluated with --quick, whose sizes are too small to mean anything");
    for (const Target& t : targets) {
        const std::string state = target_state(t, verdict.evaluated);
        if (!t.worst) {
            fmt::print(out, "  {:<30} {:<66} {}\n", t.name, t.rule, state);
            continue;
        }
        fmt::print(out, "  {:<30} {:<66} {:>7} {:<6}  ({})\n", t.name, t.rule, t.value(),
                   verdict.evaluated ? state : "-", t.where);
        if (!t.noise.empty()) fmt::print(out, "  {:<30} worst point NOISY: {}\n", "", t.noise);
    }
    fmt::print(out, "verdict: {}\n", verdict.sentence());
}

nlohmann::json points_json(const Ceilings& c, const std::vector<LayerPoint>& points) {
    nlohmann::json a = nlohmann::json::array();
    for (const LayerPoint& p : points) {
        nlohmann::json j{{"preset", p.preset},   {"layer", p.layer},     {"kind", p.kind},   {"phase", p.phase},
                         {"variant", p.variant}, {"isa", p.isa},         {"threads", p.threads},
                         {"batch", p.batch},     {"context", p.context}, {"tokens", p.tokens},
                         {"seconds", p.seconds}, {"spread", p.spread},   {"roofline_seconds", step_roofline(c, p)},
                         {"noisy", !p.noise.empty()}, {"noise", p.noise}, {"retimed", p.retimed}};
        for (size_t s = 0; s < kStages; ++s) {
            if (p.stage_seconds[s] <= 0 && p.work[s].bytes <= 0 && p.work[s].flops <= 0) continue;
            const StageRoofline r = roofline(c, p, s);
            j["stages"][std::string(stage_name(static_cast<Stage>(s)))] = {
                {"seconds", p.stage_seconds[s]},
                {"bytes", p.work[s].bytes},
                {"flops", p.work[s].flops},
                {"weight_bytes", p.work[s].weight_bytes},
                {"roofline_seconds", r.seconds},
                {"bound", r.memory_bound ? "memory" : "compute"}};
        }
        a.push_back(std::move(j));
    }
    return a;
}

// Opens the plot's path for appending (creating the file if needed), so that an unwritable path
// fails before minutes of measuring instead of after them. Returns whether it created the file.
Expected<bool> probe_plot_path(const std::string& path) {
    std::error_code ec;
    const bool existed = std::filesystem::exists(path, ec);
    errno = 0;
    std::ofstream f(path, std::ios::app);
    if (!f) return io_error("cannot write the plot to {}: {}", path, errno != 0 ? std::strerror(errno) : "open failed");
    return !existed;
}

// The sweep with its quick sizes: one small point per layer kind, for tests of the command itself.
LayerBenchOptions sweep_options(const BenchOptions& options) {
    LayerBenchOptions lo = options.layers;
    if (options.quick) {
        lo.contexts = {std::min<int64_t>(lo.contexts.empty() ? 2048 : lo.contexts.front(), 4096)};
        lo.batches = {1};
        if (!lo.prefill_chunks.empty()) lo.prefill_chunks = {64};  // none with --no-prefill
        lo.prefill_context = 512;
        lo.compare_context = lo.contexts.front();
        lo.seed_tokens = 256;
        lo.reps = 1;
    }
    return lo;
}

Expected<BenchMeasurements> measure(const BenchOptions& options, bool live) {
    ThreadPool& pool = ThreadPool::global();
    BenchMeasurements m;
    if (live) fmt::print(stderr, "measuring machine ceilings...\n");
    m.ceilings = bench::measure_ceilings(pool, options.quick);
    if (options.ceilings_only) return m;
    // A point above its roofline says the ceilings were measured under load: they are measured again,
    // each one's best kept, before the points are judged; at most once per preset swept (the judge
    // runs many times in a preset's second pass), as the load may have eased since the last time.
    size_t points_at_last_run = 0;
    const NoiseJudge judge = [&](const std::vector<LayerPoint>& points) {
        std::vector<bench::Noise> noise = judge_points(Ceilings(m.ceilings), points);
        const bool above = std::any_of(noise.begin(), noise.end(), [](const bench::Noise& n) { return n.above_roofline; });
        if (above && points.size() != points_at_last_run) {
            if (live) fmt::print(stderr, "points ran above their rooflines: measuring the machine ceilings again...\n");
            bench::keep_best(m.ceilings, bench::measure_ceilings(pool, options.quick));
            ++m.ceiling_runs;
            points_at_last_run = points.size();
            noise = judge_points(Ceilings(m.ceilings), points);
        }
        std::vector<std::string> reasons;
        for (const bench::Noise& n : noise) reasons.push_back(n.reason);
        return reasons;
    };
    const auto progress = [&](const LayerPoint& p) {
        if (!live) return;
        const std::string name = point_name(p) + " " + p.variant;
        if (!p.retimed)
            fmt::print(stderr, "  {:<60} {:>9.3f} ms\n", name, 1e3 * p.seconds);
        else
            fmt::print(stderr, "  {:<60} {:>9.3f} ms  re-timed: {}\n", name, 1e3 * p.seconds,
                       p.noise.empty() ? "consistent, replaces the first timing" : "still noisy (" + p.noise + ")");
    };
    SIEVE_ASSIGN_OR_RETURN(m.points, run_layer_bench(sweep_options(options), progress, judge));
    return m;
}

}  // namespace

Expected<bool> report_bench(const BenchOptions& options, const BenchMeasurements& measured, std::ostream& out) {
    const int all_threads = ThreadPool::global().size();
    const Ceilings ceilings(measured.ceilings);
    std::vector<LayerPoint> points = measured.points;
    const std::vector<bench::Noise> noise = judge_points(ceilings, points);
    for (size_t i = 0; i < points.size(); ++i) points[i].noise = noise[i].reason;
    const std::string main_isa = options.layers.isa.empty() ? std::string(isa_name(active_isa())) : options.layers.isa;
    int64_t max_context = 0;
    for (const LayerPoint& p : points) max_context = std::max(max_context, p.context);
    const std::vector<Target> targets = evaluate_targets(ceilings, points, main_isa, all_threads, max_context);
    const Verdict verdict = verdict_of(targets, !options.quick);

    if (!options.svg.empty()) {
        std::ofstream f(options.svg);
        if (!f) return io_error("cannot write the plot to {}: {}", options.svg, std::strerror(errno));
        f << decode_plot(points, main_isa, all_threads, sweep_options(options).batches).svg;
        if (!f) return io_error("writing the plot to {} failed", options.svg);
    }
    if (options.json) {
        nlohmann::json j{{"isa", isa_name(active_isa())}, {"threads", all_threads},
                         {"ceiling_runs", measured.ceiling_runs}, {"noise_rule", noise_rule()}};
        for (const bench::Ceiling& c : ceilings.all())
            j["ceilings"].push_back({{"name", c.name}, {"unit", c.unit}, {"isa", c.isa}, {"threads", c.threads},
                                     {"value", c.value}, {"spread", c.spread}, {"noisy", ceiling_noisy(c)}});
        j["points"] = points_json(ceilings, points);
        for (const Target& t : targets)
            j["targets"].push_back({{"name", t.name}, {"rule", t.rule}, {"threshold", t.threshold},
                                    {"worst", t.worst ? nlohmann::json(*t.worst) : nlohmann::json(nullptr)},
                                    {"state", target_state(t, verdict.evaluated)},
                                    {"met", t.worst && verdict.evaluated ? nlohmann::json(t.met()) : nlohmann::json(nullptr)},
                                    {"where", t.where}, {"noisy", !t.noise.empty()}, {"noise", t.noise}});
        j["verdict"] = verdict.code();
        out << j.dump(2) << "\n";
        return verdict.passed();
    }
    print_ceilings(out, ceilings, measured.ceiling_runs);
    if (points.empty()) return verdict.passed();
    print_points(out, ceilings, points, main_isa, all_threads);
    print_noise(out, points);
    print_targets(out, targets, verdict);
    if (!options.svg.empty()) fmt::print(out, "\nplot: {}\n", options.svg);
    return verdict.passed();
}

Expected<bool> run_bench(const BenchOptions& options, std::ostream& out) {
    bool created_plot = false;
    if (!options.svg.empty()) {
        if (options.ceilings_only)
            return invalid_argument_error("--svg {}: the plot needs the layer sweep, which --ceilings-only skips",
                                          options.svg);
        SIEVE_ASSIGN_OR_RETURN(created_plot, probe_plot_path(options.svg));
    }
    const bool live = !options.json && isatty(STDERR_FILENO);
    Expected<BenchMeasurements> measured = measure(options, live);
    if (!measured.has_value()) {
        std::error_code ec;
        if (created_plot) std::filesystem::remove(options.svg, ec);  // leave no empty plot behind
        return measured.status();
    }
    return report_bench(options, *measured, out);
}

}  // namespace sieve::cli
