// The work of one layer step, stage by stage, for `sieve bench`: bytes that must come from memory and
// floating-point operations, from the config, the layer's cache layouts, its weights and the step's
// shape. With the machine's measured ceilings this gives each stage's roofline time (the least time
// the machine could take: max(bytes / bandwidth, flops / peak)), which the benchmark compares with
// the time the stage took. A stage's weights and its cache work run one after the other, so its
// roofline is the sum of the two parts' rooflines.
//
// What is counted (deployed profile; specs/performance_facts.md §5):
//   projections, output, indexer and compressor weights: every stored byte once per step (a decode
//       GEMV streams them; a prefill GEMM reuses them from cache), 2 flops per weight and token;
//   indexer: each request's key cache once per step (its tokens share it), 2·heads·dim flops per
//       token and key;
//   top-k: one fp32 score per candidate and token;
//   attention: each token's rows (window + selected or all compressed entries) once per token, and
//       2·heads·(d_qk + d_v) flops per row (QKᵀ and PV).
// Small terms (norms, RoPE, cache stores, compressor state rows) are left out; they make the
// rooflines slightly optimistic, never pessimistic.
#pragma once

#include <array>
#include <cstdint>
#include <vector>

#include "sieve/core/stage_timer.h"
#include "sieve/core/status.h"
#include "sieve/io/checkpoint.h"
#include "sieve/io/config.h"
#include "sieve/models/attention_layout.h"

namespace sieve::cli {

struct StageWork {
    double bytes = 0;         // all of the stage's bytes, weights included
    double flops = 0;         // all of its flops, weights' included
    double weight_bytes = 0;  // the share of weights (streamed, then used as a GEMV/GEMM)
    double weight_flops = 0;
    // The stage's cache work is GEMM-like (indexer scoring): judged against the bf16 dot peak where the
    // ISA has one, like the weights; otherwise (attention, top-k) against the fp32 FMA peak.
    bool matrix_math = false;
};
using StepWork = std::array<StageWork, static_cast<size_t>(Stage::count)>;

struct StepRequestShape {
    int64_t start = 0;     // tokens already in the cache
    int64_t n_tokens = 0;  // tokens of this step
};

// A stage's roofline on a machine of these ceilings (bytes/s; flop/s of matrix math and of plain FMA
// math): the weights, then the cache work, each part bound by the slower of its bytes and its flops:
// max(bytes / bandwidth, flops / peak) summed. The weights' flops run at matrix_peak, the cache work's at
// matrix_peak where it is GEMM-like (StageWork::matrix_math) and at fma_peak otherwise. Memory-bound
// when the memory-bound parts make up most of it. 0 (and compute-bound) when a ceiling is missing.
struct StageRoofline {
    double seconds = 0;
    bool memory_bound = false;
};
StageRoofline stage_roofline(const StageWork& w, double bandwidth, double matrix_peak, double fma_peak);
// A whole step's: the sum of its stages' rooflines, memory-bound when its memory-bound stages make up most
// of it (the same rule as a stage's).
StageRoofline step_roofline(const StepWork& w, double bandwidth, double matrix_peak, double fma_peak);

// `dense`: the layer takes every candidate (no indexer, no top-k), as the benchmark's dense variant
// does. The checkpoint gives the stored bytes of each weight (FP8 blocks with their scales).
Expected<StepWork> layer_step_work(const ModelConfig& config, const AttentionLayerLayout& layer,
                                   const Checkpoint& checkpoint, const std::vector<StepRequestShape>& step, bool dense);

}  // namespace sieve::cli
