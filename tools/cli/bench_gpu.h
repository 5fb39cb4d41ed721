// `sieve bench --backend cuda`: the GPU's ceilings (device-to-device copy bandwidth, cuBLAS bf16 GEMM
// rate; tools/bench/gpu_ceilings.h) and the sparse-attention kernels at the shapes of the CUDA targets:
// DeepSeek-V4 sparse decode (64 heads, d 512, 128 window + 512 compressed 584-B records, sink),
// DeepSeek-V3.2 sparse decode (128 heads, d 576 / 512, top-2048 of 656-B records), the Lightning Indexer
// (64 heads × 128, FP8 keys, 128K keys per token, with the fused top-2048), top-k 2048 of 128K and QSA's
// sparse GQA (24 q / 2 KV heads, d 256, 2051 slots). Each point runs through the Backend interface on
// caches filled by the backend's own cache_store, L2 flushed before every timed call, device time
// (StreamTimer), median of the repetitions; it reports shares of the measured ceilings and the ratio to
// the peer's time at the same shape on an H200 (FlashMLA 9241ae3 and the torch / Triton baselines), and
// whether the target is met. Then whole decode layer steps: every layer kind of each preset run by the
// layer benchmark (bench_layers.h) on the GPU at 128K tokens of context and a batch of 64, against the sum
// of its stages' rooflines at the measured ceilings (bench_roofline.h).
#pragma once

#include <iosfwd>
#include <string>
#include <vector>

#include "sieve/core/status.h"

namespace sieve::cli {

struct GpuBenchOptions {
    std::string backend = "cuda";  // a cuda spec
    bool quick = false;            // the smallest point of each kind, 3 repetitions (a smoke test: no targets)
    bool json = false;
    int reps = 20;                 // timed calls per point
    // The kinds of points to time (empty: all): "v4", "v32", "indexer", "topk", "qsa", "step" (whole decode
    // layer steps).
    std::vector<std::string> only;
    // Batch sizes of the sparse-attention (v4, v32) and QSA points (empty: the targets' sizes).
    std::vector<int64_t> batches;
};

// The kinds of points the GPU benchmark has, for --only.
inline constexpr const char* kGpuBenchKinds[] = {"v4", "v32", "indexer", "topk", "qsa", "step"};

// True when every target evaluated was met.
Expected<bool> run_gpu_bench(const GpuBenchOptions& options, std::ostream& out);

}  // namespace sieve::cli
