#include "backends/cpu/row_topk.h"

#include <algorithm>
#include <atomic>

#include "backends/cpu/parallel.h"
#include "core/assert.h"
#include "sieve/backends/backend.h"

namespace sieve::cpu {
namespace {

// Stream entries per row: 2k + slack, but never more than the row can fill.
int64_t row_topk_capacity(int64_t n_cols, int64_t k) { return std::min(2 * k + kTopkStreamSlack, n_cols + 16); }

size_t row_topk_slot_bytes(int64_t n_cols, int64_t k) {
    return 2 * workspace_round_up(static_cast<size_t>(row_topk_capacity(n_cols, k)) * 4);  // keys + indices
}

}  // namespace

size_t row_topk_workspace_size(const ThreadPool& pool, int64_t n_rows, int64_t n_cols, int64_t k) {
    if (n_rows <= 0 || k <= 0) return 0;
    return static_cast<size_t>(std::min<int64_t>(pool.size(), n_rows)) * row_topk_slot_bytes(n_cols, k);
}

void row_topk(const CpuKernels& kernels, ThreadPool& pool, const RowTopk& r, void* ws) {
    if (r.n_rows <= 0) return;
    const size_t slot_bytes = row_topk_slot_bytes(r.n_cols, r.k);
    const int64_t capacity = row_topk_capacity(r.n_cols, r.k);
    const int64_t n_slots = std::min<int64_t>(pool.size(), r.n_rows);
    std::atomic<int64_t> next_slot{0};  // each chunk claims one workspace slot (≤ one chunk per thread)
    parallel_chunks(pool, r.n_rows, min_chunk_for(std::max<int64_t>(r.n_cols, 1), 16384), [&](int64_t b, int64_t e) {
        const int64_t slot = next_slot.fetch_add(1);
        SIEVE_ASSERT(slot < n_slots, "row_topk: more chunks than workspace slots");
        char* base = static_cast<char*>(ws) + static_cast<size_t>(slot) * slot_bytes;
        TopkStream s;
        s.keys = reinterpret_cast<int32_t*>(base);
        s.idx = reinterpret_cast<int32_t*>(base + slot_bytes / 2);
        s.capacity = capacity;
        s.k = r.k;
        for (int64_t row = b; row < e; ++row) {
            const int64_t n = r.valid_len ? r.valid_len[row] : r.n_cols;
            int32_t* out = r.out + row * r.out_row_stride;
            s.count = 0;
            s.threshold = INT32_MIN;
            kernels.topk_stream_push(&s, r.scores + row * r.scores_row_stride, n, 0);
            const int64_t picks = kernels.topk_stream_finish(&s, out);
            for (int64_t j = picks; j < r.k; ++j) out[j] = -1;
            if (r.out_count) r.out_count[row] = static_cast<int32_t>(picks);
        }
    });
}

}  // namespace sieve::cpu
