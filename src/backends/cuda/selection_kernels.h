// Selection: the Lightning Indexer's scores with the optional fused top-k (ops/indexer_scores.h), top-k (ops/topk.h) and top-k → cache slots (ops/selected_slots.h).
// Each launcher enqueues on `stream`; the backend has validated the params (cuda_backend.cpp), whose
// pointers are device addresses.
#pragma once

#include <cstddef>

#include <cuda_runtime_api.h>

#include "sieve/backends/backend.h"
#include "sieve/core/status.h"
#include "sieve/ops/indexer_scores.h"
#include "sieve/ops/topk.h"
#include "sieve/ops/selected_slots.h"

namespace sieve::cuda {

size_t indexer_scores_workspace_size(const IndexerScoresParams& p);
Status indexer_scores(const IndexerScoresParams& p, Workspace ws, cudaStream_t stream);
size_t topk_workspace_size(const TopkParams& p);
Status topk(const TopkParams& p, Workspace ws, cudaStream_t stream);
Status selected_slots(const SelectedSlotsParams& p, cudaStream_t stream);

}  // namespace sieve::cuda
