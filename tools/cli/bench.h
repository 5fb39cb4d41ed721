// `sieve bench`: measures this machine's ceilings (memory bandwidth, fp32 FMA and bf16 dot peaks, the
// AMX bf16 tile peak where there is one, one core and all cores), then times every stage of each
// family's attention layers at the real models' shapes (bench_layers.h) and reports each stage
// against its roofline, the whole step against the sum of its stages' rooflines, thread scaling,
// AVX2 against the best ISA and sparse against dense attention, with the performance targets checked.
// Points that look timed under load (tools/bench/noise.h) are timed again and, if still noisy, flagged
// in the report, as is a target whose worst point is one of them. Writes a table, or JSON, and an SVG
// plot of decode step time against context (bench_plot.h).
#pragma once

#include <iosfwd>
#include <string>
#include <vector>

#include "bench_layers.h"
#include "ceilings.h"
#include "sieve/core/status.h"

namespace sieve::cli {

struct BenchOptions {
    bool quick = false;           // small arrays, one repetition, one small sweep point (a smoke test): targets not evaluated
    bool ceilings_only = false;   // skip the layer sweep
    bool json = false;
    std::string svg;              // write the decode plot here (empty: no plot); checked before anything is timed
    LayerBenchOptions layers;
};

// The verdict: true when every target evaluated was met (none is with --quick, nor with
// --ceilings-only); an error where the run could not be made or its plot not written.
Expected<bool> run_bench(const BenchOptions& options, std::ostream& out);

// What a run measured, for report_bench.
struct BenchMeasurements {
    std::vector<bench::Ceiling> ceilings;
    int ceiling_runs = 1;  // more than 1: measured again after points ran above their rooflines, each one's best kept
    std::vector<LayerPoint> points;
};

// The report half of run_bench, over measurements already made: judges each point's noise against
// the final ceilings, evaluates the targets, writes the table or the JSON and the plot.
Expected<bool> report_bench(const BenchOptions& options, const BenchMeasurements& measured, std::ostream& out);

}  // namespace sieve::cli
