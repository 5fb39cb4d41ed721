// The Lightning Indexer's scores with warpgroup MMAs (ops/indexer_scores.h), private to selection_kernels.cu:
// the deployed operands of DeepSeek-V3.2, Hy4 and DeepSeek-V4 (e4m3 q with its scale, fp8_row_scale keys), up
// to 64 heads and 128 dims, with every key row and block of the cache at least 4-byte aligned (as for
// indexer_scores_mma.h). The mma.sync kernel takes the other bf16 / e4m3 cases.
#pragma once

#include <cuda_runtime_api.h>

#include "backends/cuda/indexer_scores_args.cuh"
#include "sieve/core/status.h"

namespace sieve::cuda {

// Whether launch_indexer_scores_wgmma takes these args.
bool indexer_scores_wgmma_supported(const ScoresArgs& a);
// The scores of every (token, candidate) into a.out, as the fp32 kernel's contract (columns ≥ n_keys
// untouched, unlocatable keys NaN).
Status launch_indexer_scores_wgmma(const ScoresArgs& a, cudaStream_t stream);

}  // namespace sieve::cuda
