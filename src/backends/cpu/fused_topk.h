// The fused top-k of the cpu indexer scores (ops/indexer_scores.h, "Fused selection"): the scores of a
// key tile go straight into a streaming top-k (kernels.h TopkStream), one per (workspace slot, token), so
// no score row is ever written. Scoring threads claim key tiles in
// increasing order, so each stream sees its candidates in ascending index order, as it requires. At the
// end, each token's streams are merged in index order and cut to k. This selects exactly what ops/topk.h
// selects over the same scores: a candidate a stream dropped had k candidates in that stream that rank
// above it (higher score, or equal score and lower index), so it cannot be among the k best overall.
#pragma once

#include <cstdint>

#include "backends/cpu/kernels.h"
#include "core/thread_pool.h"

namespace sieve::cpu {

struct FusedTopkPlan {
    int64_t slots = 0, n_tokens = 0, k = 0, threads = 0;
    int64_t capacity = 0;  // entries per stream: k + kTopkStreamSlack
    // byte offsets from the plan's base (64-aligned): streams [slots, n_tokens] TopkStream, their keys and
    // indices [slots, n_tokens, capacity] i32 each, and per merging thread [slots · capacity] u64 + 2 × i32
    int64_t streams = 0, keys = 0, idx = 0, merge = 0, merge_bytes = 0;
    int64_t bytes = 0;     // workspace the plan needs
};

// `threads`: the pool's size (merging threads); `slots`: how many threads score.
FusedTopkPlan fused_topk_plan(int64_t slots, int64_t n_tokens, int64_t k, int64_t threads);

class FusedTopk {
public:
    // Lays the streams out at `base` (plan.bytes bytes, 64-aligned), every one empty.
    FusedTopk(const FusedTopkPlan& plan, char* base);
    TopkStream* stream(int64_t slot, int64_t token) { return streams_ + slot * plan_.n_tokens + token; }
    // Row t of out (stride out_row_stride, width k) for every token: its picks ascending, then −1.
    void finish(const CpuKernels& kernels, ThreadPool& pool, int32_t* out, int64_t out_row_stride);

private:
    FusedTopkPlan plan_;
    char* base_;
    TopkStream* streams_;
};

}  // namespace sieve::cpu
