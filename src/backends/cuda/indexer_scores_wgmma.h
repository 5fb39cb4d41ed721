// The Lightning Indexer's scores with warpgroup MMAs (ops/indexer_scores.h), private to selection_kernels.cu:
// the deployed key layout of DeepSeek-V3.2, Hy4 and DeepSeek-V4 (fp8_row_scale keys of 128 dims in blocks of
// a multiple of 64 entries, 16-byte aligned), with e4m3 q and its scale or bf16 q, up to 64 heads; the copy
// engine brings the keys. The mma.sync kernel (indexer_scores_mma.h) takes the other bf16 / e4m3 cases.
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
