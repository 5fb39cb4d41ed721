// `sieve bench`'s layer sweep: every stage of each family's attention layers at the real models'
// shapes (built-in presets with random weights), timed on the runtime's own data path for decode
// steps (batch × context) and prefill chunks, with caches filled synthetically: one real prefill of a
// seed request writes valid cache blocks, which are then copied into the blocks of the benchmark's
// requests, so that a 128K-token context takes a memcpy instead of a 128K-token prefill. The
// selections computed over copied blocks are as expensive as real ones (same entry counts, same
// formats); only their values repeat.
#pragma once

#include <array>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "bench_roofline.h"
#include "sieve/core/stage_timer.h"
#include "sieve/core/status.h"

namespace sieve::cli {

struct LayerBenchOptions {
    std::vector<std::string> presets = {"deepseek-v4-flash", "hy4", "qwen3.8-flash-next"};
    std::vector<int64_t> contexts = {4096, 16384, 65536, 131072};
    std::vector<int64_t> batches = {1, 4, 16};
    std::vector<int64_t> prefill_chunks = {512, 2048};
    int64_t prefill_context = 16384;  // tokens in the cache before a prefill chunk
    int64_t dense_max_batch = 1;      // the dense variant runs at batch sizes up to this
    int64_t compare_context = 65536;  // context of the thread-scaling and ISA comparisons (batch 1)
    int64_t seed_tokens = 1024;       // the real prefill whose cache blocks fill the contexts
    int reps = 5;                     // timed repetitions per point (median reported)
    std::string isa;                  // the main runs' backend ISA; empty: the best this machine has
    // A device backend's spec (e.g. "cuda") to run the layers on instead of the CPU backend: no ISA or
    // thread comparisons then, and a point's `isa` names the backend.
    std::string backend;
    // On a device backend: each layer is also timed as an engine runs it, recorded once into a graph
    // (Backend::capture) and replayed: device time between two stream marks, no host launch gaps, with
    // `l2_flush_bytes` of a device buffer written before each replay (a model runs its other layers between
    // two steps of one, so none finds its data in the L2 cache).
    bool graph_replay = false;
    size_t l2_flush_bytes = size_t{512} << 20;
    std::string compare_isa = "avx2"; // the ISA compared against it; empty: none
    bool thread_compare = true;       // also run the comparison point on one thread
    uint64_t seed = 1;
};

// One timed point: a layer of a preset, a step shape, a variant.
struct LayerPoint {
    std::string preset;
    int64_t layer = 0;
    std::string kind;     // "csa", "hca", "swa", "dsa_full", "dsa_shared", "qsa"
    std::string phase;    // "decode" | "prefill"
    std::string variant;  // "sparse" | "dense"
    std::string isa;
    int threads = 0;
    int64_t batch = 0;    // requests
    int64_t context = 0;  // tokens in each request's cache before the step
    int64_t tokens = 0;   // tokens of the step
    double seconds = 0;   // median wall time of the layer's forward
    double spread = 0;    // (max − min) / median over the repetitions
    double replay_seconds = 0;  // median device time of the layer replayed from its graph; 0: not timed
    double replay_spread = 0;
    std::array<double, static_cast<size_t>(Stage::count)> stage_seconds{};  // medians per stage
    StepWork work{};      // bytes and flops per stage (bench_roofline.h)
    std::string noise;    // why the point looks timed under load (tools/bench/noise.h); empty: it does not
    bool retimed = false; // timed again by the second pass
};

// Why each point of a sweep looks timed under load (empty: it does not), in order: bench.cpp judges
// with tools/bench/noise.h over the rooflines of the run's ceilings.
using NoiseJudge = std::function<std::vector<std::string>(const std::vector<LayerPoint>&)>;

// Runs the sweep; `progress` (optional) gets a line per point as it finishes. With a `judge`, a
// second pass follows each preset's sweep while its models are loaded: every point the judge flags
// is timed again, and the new timing replaces it when the judge finds nothing wrong with it among
// the others; otherwise the first one stays, with its flag. A point's `noise` is the judge's verdict
// after the second pass.
Expected<std::vector<LayerPoint>> run_layer_bench(const LayerBenchOptions& options,
                                                  const std::function<void(const LayerPoint&)>& progress,
                                                  const NoiseJudge& judge = {});

}  // namespace sieve::cli
