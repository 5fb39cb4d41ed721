// How `sieve bench` tells a point timed while something else ran on the machine from one that
// measured the code. Load only ever slows a step down, by an amount that changes from moment to
// moment, so a point timed under load shows at least one of three signs:
//
//   above its roofline  a judged stage, or the whole step, took less than its roofline time: faster
//                       than the ceilings allow, so the ceilings were measured under load.
//   out of line         a judged stage, or the whole step, took more than kOutOfLineFactor times the
//                       time per unit of work (seconds / roofline seconds) of its neighbourhood: the
//                       median over the point itself and up to two neighbours on each side along
//                       one axis (decode: the contexts at its batch, or the batches at its context;
//                       prefill: the chunk sizes), when that neighbourhood holds three points or
//                       more (of two, neither can be told to be the odd one). The median ignores one odd neighbour; dividing by the
//                       roofline takes out the growth of the work with context and batch. Only a
//                       point slower than its neighbourhood is flagged: a faster one is not a sign
//                       of load on itself.
//   spread              its repetitions spread more than kMaxSpread of their median.
//
// A stage is judged when it takes at least kJudgedStageFraction of its step: a smaller one's time
// is mostly fixed cost (thread wake-up, small loops), which per unit of work falls steeply as the
// work grows, and its bytes often come from caches (top-k reads the scores the indexer just wrote),
// so neither its share nor its neighbours say anything about load. Smaller stages still serve as
// neighbours of larger ones (a stage that load stretched from 1 % to 40 % of its step is judged).
//
// The thresholds come from sweeps of the three presets on a 2-core machine shared with compiler
// jobs. In the calmest one (Hy4, 40 points) no stage was more than 1.7x its neighbourhood's time
// per unit of work and no point's repetitions spread more than 28%. Busier ones put stages 3x to
// 80x off their neighbourhoods (a QSA indexer stage at 8.4 ms between neighbours at 0.1 and
// 0.6 ms), spread repetitions by 50% to 235%, and, with the bandwidth ceiling measured at a third
// of its quiet value, showed stages at up to 356% of their rooflines.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <vector>

namespace sieve::bench {

constexpr double kOutOfLineFactor = 2.0;
constexpr double kMaxSpread = 0.5;
constexpr double kJudgedStageFraction = 0.1;

struct NoiseStage {
    std::string name;             // "attention", "step"
    double seconds = 0;           // measured; 0: the stage did not run
    double roofline_seconds = 0;  // the least the machine could take; 0: unknown (not judged)
};

// One timed point as the rule sees it.
struct NoisePoint {
    std::string series;            // points that may be compared: one layer, phase, variant, ISA, thread count
    std::array<int64_t, 2> at{};   // coordinates (decode: context, batch); a neighbour shares one, differs in the other
    std::array<const char*, 2> axis_names{"contexts", "batches"};  // said in the reason
    double spread = 0;             // (max − min) / median over the repetitions
    NoiseStage step;               // the whole step
    std::vector<NoiseStage> stages;
};

struct Noise {
    bool above_roofline = false;
    bool out_of_line = false;
    bool spread = false;
    std::string reason;  // every sign seen, "; "-separated; empty: not noisy
    bool noisy() const { return !reason.empty(); }
};

// One verdict per point, in order.
std::vector<Noise> judge_noise(const std::vector<NoisePoint>& points);

}  // namespace sieve::bench
