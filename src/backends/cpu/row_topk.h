// The top-k of whole score rows (ops/topk.h semantics): one kernels.h TopkStream per row, pushed the row
// at once, with room for 2k + kTopkStreamSlack candidates (at most the row's length + 16), one workspace
// slot per thread. The cpu backend's topk op, and the indexer's selection when it writes whole score rows
// (cpu_indexer_scores.cpp), both run it.
#pragma once

#include <cstddef>
#include <cstdint>

#include "backends/cpu/kernels.h"
#include "core/thread_pool.h"

namespace sieve::cpu {

struct RowTopk {
    const float* scores = nullptr;  // [n_rows, scores_row_stride]
    int64_t scores_row_stride = 0;
    const int32_t* valid_len = nullptr;  // [n_rows] candidates of each row, or nullptr: n_cols each
    int64_t n_rows = 0, n_cols = 0, k = 0;
    int32_t* out = nullptr;  // [n_rows, out_row_stride]: a row's picks ascending, then −1
    int64_t out_row_stride = 0;
    int32_t* out_count = nullptr;  // [n_rows] picks per row, or nullptr
};

size_t row_topk_workspace_size(const ThreadPool& pool, int64_t n_rows, int64_t n_cols, int64_t k);
// ws: row_topk_workspace_size bytes, 64-aligned.
void row_topk(const CpuKernels& kernels, ThreadPool& pool, const RowTopk& r, void* ws);

}  // namespace sieve::cpu
