// The Lightning Indexer's scores on tensor cores (ops/indexer_scores.h), private to selection_kernels.cu:
// used where q is bf16 or e4m3 and the keys bf16 or fp8_row_scale and indexer_scores_wgmma.h does not take
// them (more than 64 heads, bf16 operands), up to 128 heads and 128 dims, with every key row and block of
// the cache at least 4-byte aligned (cp.async copies: base, block_bytes and the entry's data bytes
// multiples of 4; the fp8 scales too); selection_kernels.cu's fp32 kernel takes every other case.
#pragma once

#include <cuda_runtime_api.h>

#include "backends/cuda/indexer_scores_args.cuh"
#include "sieve/core/status.h"

namespace sieve::cuda {

// Whether launch_indexer_scores_mma takes these args.
bool indexer_scores_mma_supported(const ScoresArgs& a);
// The scores of every (token, candidate) into a.out, as the fp32 kernel's contract (columns ≥ n_keys
// untouched, unlocatable keys NaN).
Status launch_indexer_scores_mma(const ScoresArgs& a, cudaStream_t stream);

}  // namespace sieve::cuda
