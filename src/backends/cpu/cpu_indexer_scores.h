// The cpu backend's indexer scores (ops/indexer_scores.h): validation, the work units, threading and
// workspace around the per-ISA kernels of indexer_kernels.h, and the fused top-k (fused_topk.h).
// Internal to backends/cpu; cpu_backend.cpp forwards its Backend methods here.
#pragma once

#include <cstddef>

#include "sieve/backends/backend.h"
#include "backends/cpu/indexer_kernels.h"
#include "backends/cpu/kernels.h"
#include "core/cpu_features.h"
#include "core/thread_pool.h"
#include "sieve/ops/indexer_scores.h"

namespace sieve::cpu {

const CpuIndexerKernels& indexer_kernels_for(Isa isa);

size_t indexer_scores_workspace_size(const ThreadPool& pool, const IndexerScoresParams& p);
// `base`: the backend's main kernel table, whose streaming top-k (kernels.h TopkStream) makes the fused
// selection.
Status indexer_scores(const CpuIndexerKernels& k, const CpuKernels& base, ThreadPool& pool, const IndexerScoresParams& p,
                      Workspace ws);

}  // namespace sieve::cpu
