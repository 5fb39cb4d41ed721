// `sieve bench`: measures this machine's ceilings (memory bandwidth, fp32 FMA and bf16 dot peaks,
// one core and all cores), then times every stage of each family's attention layers at the real
// models' shapes (bench_layers.h) and reports each stage against its roofline, the whole step
// against the sum of its stages' rooflines, thread scaling, AVX2 against the best ISA and sparse
// against dense attention, with the targets checked. Writes a table, or JSON, and an SVG
// plot of decode step time against context.
#pragma once

#include <iosfwd>
#include <string>

#include "bench_layers.h"
#include "core/status.h"

namespace sieve::cli {

struct BenchOptions {
    bool quick = false;           // small arrays, few repetitions, one small sweep point (for tests)
    bool ceilings_only = false;   // skip the layer sweep
    bool json = false;
    std::string svg;              // write the decode plot here (empty: no plot)
    LayerBenchOptions layers;
};

Status run_bench(const BenchOptions& options, std::ostream& out);

}  // namespace sieve::cli
