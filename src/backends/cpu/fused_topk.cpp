#include "backends/cpu/fused_topk.h"

#include <algorithm>
#include <atomic>

#include "sieve/backends/backend.h"
#include "backends/cpu/parallel.h"

namespace sieve::cpu {

FusedTopkPlan fused_topk_plan(int64_t slots, int64_t n_tokens, int64_t k, int64_t threads) {
    FusedTopkPlan p;
    p.slots = std::max<int64_t>(slots, 0);
    p.n_tokens = std::max<int64_t>(n_tokens, 0);
    p.k = std::max<int64_t>(k, 1);
    p.threads = std::max<int64_t>(threads, 1);
    p.capacity = p.k + kTopkStreamSlack;
    const int64_t streams = p.slots * p.n_tokens;
    p.streams = 0;
    p.keys = p.streams + workspace_round_up(streams * static_cast<int64_t>(sizeof(TopkStream)));
    p.idx = p.keys + workspace_round_up(streams * p.capacity * 4);
    p.merge = p.idx + workspace_round_up(streams * p.capacity * 4);
    p.merge_bytes = workspace_round_up(p.slots * p.capacity * 16);  // u64 pairs, then keys and indices
    p.bytes = p.merge + p.threads * p.merge_bytes;
    return p;
}

FusedTopk::FusedTopk(const FusedTopkPlan& plan, char* base)
    : plan_(plan), base_(base), streams_(reinterpret_cast<TopkStream*>(base + plan.streams)) {
    int32_t* keys = reinterpret_cast<int32_t*>(base + plan.keys);
    int32_t* idx = reinterpret_cast<int32_t*>(base + plan.idx);
    for (int64_t i = 0; i < plan.slots * plan.n_tokens; ++i) {
        TopkStream& s = streams_[i];
        s = TopkStream{};
        s.keys = keys + i * plan.capacity;
        s.idx = idx + i * plan.capacity;
        s.capacity = plan.capacity;
        s.k = plan.k;
    }
}

void FusedTopk::finish(const CpuKernels& kernels, ThreadPool& pool, int32_t* out, int64_t out_row_stride) {
    const FusedTopkPlan& p = plan_;
    std::atomic<int64_t> next_buffer{0};  // one merge buffer per chunk (≤ one chunk per thread)
    parallel_chunks(pool, p.n_tokens, 16, [&](int64_t t0, int64_t t1) {
        char* m = base_ + p.merge + next_buffer.fetch_add(1) * p.merge_bytes;
        uint64_t* pairs = reinterpret_cast<uint64_t*>(m);  // index << 32 | key bits: sorting orders by index
        int32_t* keys = reinterpret_cast<int32_t*>(m + p.slots * p.capacity * 8);
        int32_t* idx = keys + p.slots * p.capacity;
        for (int64_t t = t0; t < t1; ++t) {
            int64_t n = 0;
            for (int64_t slot = 0; slot < p.slots; ++slot) {
                const TopkStream& s = streams_[slot * p.n_tokens + t];
                for (int64_t i = 0; i < s.count; ++i)
                    pairs[n++] = static_cast<uint64_t>(static_cast<uint32_t>(s.idx[i])) << 32 |
                                 static_cast<uint32_t>(s.keys[i]);
            }
            std::sort(pairs, pairs + n);
            for (int64_t i = 0; i < n; ++i) {
                idx[i] = static_cast<int32_t>(pairs[i] >> 32);
                keys[i] = static_cast<int32_t>(static_cast<uint32_t>(pairs[i]));
            }
            TopkStream merged;
            merged.keys = keys;
            merged.idx = idx;
            merged.count = merged.capacity = n;
            merged.k = p.k;
            int32_t* row = out + t * out_row_stride;
            const int64_t picked = n > 0 ? kernels.topk_stream_finish(&merged, row) : 0;
            std::fill(row + picked, row + p.k, -1);
        }
    });
}

}  // namespace sieve::cpu
