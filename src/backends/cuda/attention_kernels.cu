// Attention: sparse attention over listed cache rows with a sink (ops/sparse_attention.h), QSA's pooling, expansion and sparse GQA (ops/qsa_pool.h, qsa_expand.h, qsa_sparse_gqa.h), DSA's output gate and per-head projection (ops/dsa_output_gate.h, mla_head_proj.h).
//
// sparse_attention over fp8 records with bf16 q, and qsa_sparse_gqa over bf16 caches with bf16 math, run on
// tensor cores (sparse_attention_mma_kernel and qsa_sparse_gqa_mma_kernel, each in its own section below).
// Everything else runs in the simple, correct first versions (fp32 CUDA-core arithmetic):
//   sparse_attention, qsa_sparse_gqa  one thread block per (token, block of heads sharing the KV rows, split of
//       the list): the listed entries are gathered (−1 skipped) in chunks of up to 32 rows, each dequantized
//       ONCE into shared memory for all heads of the block, then logits, an fp32 online softmax (running max,
//       sum, output accumulator) and the P·V update, all in shared memory (attention_step_* below). When the
//       (token, head block) items alone would not fill the GPU (decode), each item's list is split over
//       several blocks (split-K over the rows): every split writes its running max, sum, row count and
//       accumulator to the workspace and a second kernel merges them (attention_combine_*), as vLLM's split-K
//       decode does (qsa.md §9 item 5; ops/qsa_sparse_gqa.h allows it explicitly).
//   qsa_pool      one block per group; each thread sums its dims over the members in member order.
//   qsa_expand    one block per token; a block-wide compaction of the sel row, then the open tail and −1.
//   dsa_output_gate  one block per (token, head) row.
//   mla_head_proj a tiled fp32 GEMM per head (32 tokens × 64 outputs per block), for the exact profile and
//                 fp32 inputs; bf16 ones take a batched cuBLAS GEMM (cuda_linear.h).
//
// Index arrays live on the device and are not range-checked by the backend (check_indices cannot run on
// device memory): every kernel keeps its reads and writes in bounds whatever the indices hold, and the
// comments at each index read say what an out-of-contract value does (it is skipped where possible).
#include "backends/cuda/attention_kernels.h"

#include <algorithm>
#include <climits>
#include <cmath>
#include <cstdint>

#include <cuda_bf16.h>
#include <fmt/format.h>

#include "backends/cuda/async_copy.cuh"
#include "backends/cuda/attention_cache.cuh"
#include "backends/cuda/cuda_status.h"
#include "backends/cuda/dependent_launch.cuh"
#include "backends/cuda/dtype_access.cuh"
#include "backends/cuda/mma_sync.cuh"
#include "backends/cuda/wgmma.cuh"

namespace sieve::cuda {
namespace {

using namespace attn;  // attention_cache.cuh

constexpr int kWarp = 32;
constexpr unsigned kFullMask = 0xffffffffu;

__device__ __forceinline__ float warp_sum(float v) {
    for (int offset = 16; offset > 0; offset /= 2) v += __shfl_xor_sync(kFullMask, v, offset);
    return v;
}
// fmaxf ignores a NaN operand: a NaN logit does not become the max, it shows through its own exp() (NaN)
// in the sums instead, as the contracts require.
__device__ __forceinline__ float warp_max(float v) {
    for (int offset = 16; offset > 0; offset /= 2) v = fmaxf(v, __shfl_xor_sync(kFullMask, v, offset));
    return v;
}
__device__ __forceinline__ int warp_sum_int(int v) {
    for (int offset = 16; offset > 0; offset /= 2) v += __shfl_xor_sync(kFullMask, v, offset);
    return v;
}
__device__ __forceinline__ float round_bf16(float v) { return __bfloat162float(__float2bfloat16_rn(v)); }

// A runtime call's Status, its message formatted only on failure (a launcher allocates nothing when it works).
Status launch_check(cudaError_t error, const char* op, const char* what) {
    if (error == cudaSuccess) return Status::ok();
    return cuda_status(error, fmt::format("{}: {}", op, what));
}

// ================================ the attention step (shared) ================================
//
// Both attention kernels keep, per block, nh ≤ heads_per_block heads and a chunk of n ≤ chunk ≤ 32 gathered
// rows in dynamic shared memory (floats):
//   sQ   [heads, q_dim]      the q rows, widened exactly
//   sK   [chunk, k_stride]   the chunk's dequantized K rows (sparse attention: the whole entry, V = its prefix)
//   sV   [chunk, v_stride]   qsa_sparse_gqa only: the chunk's V rows
//   sAcc [heads, v_dim]      Σ_j p_j · V_j, rescaled to the running max
//   sP   [heads, chunk]      the chunk's logits, then its weights p_j
//   sM, sL, sAlpha [heads]   running max, running Σ p_j, the chunk's rescale factor exp(M_old − M_new)

constexpr int kAttnThreads = 256;
constexpr int kAttnWarps = kAttnThreads / kWarp;
constexpr int kMaxChunk = 32;  // rows per chunk: one lane per row in attention_step_softmax and the gathers
constexpr int kMaxHeadsPerBlock = 16;
// Split-K: the grid aims at two blocks per multiprocessor of an H100 / H200 SXM (132 of them). A constant,
// not a device query, so that the workspace size is a function of the shapes alone.
constexpr int64_t kTargetBlocks = 2 * 132;
constexpr int64_t kMinSplitPositions = 2 * kMaxChunk;  // list positions per split, at least
constexpr int64_t kMaxSplits = 64;
constexpr int kStats = 4;  // per (row, split) in the workspace: running max, running sum, rows gathered, 0

// Floats of the dynamic shared memory (the layout above), host and device.
__host__ __device__ inline int64_t attention_smem_floats(int64_t heads, int64_t chunk, int64_t q_dim, int64_t k_stride,
                                                         int64_t v_stride, int64_t v_dim) {
    return heads * q_dim + chunk * k_stride + chunk * v_stride + heads * v_dim + heads * chunk + 3 * heads;
}

// sP[hh·chunk + r] = scale · ⟨sQ[hh], sK[r]⟩ for hh < nh, r < n: one warp per (head, row) pair, the lanes
// striding the dims (fp32 products and sums, order unspecified: ops/sparse_attention.h, qsa_sparse_gqa.h),
// then one rounded product by the scale, as in ref (l = scale · dot).
__device__ __forceinline__ void attention_step_logits(const float* sQ, const float* sK, int q_dim, int k_stride, int nh,
                                                      int n, int chunk, float scale, float* sP) {
    const int warp = threadIdx.x / kWarp, lane = threadIdx.x % kWarp;
    for (int pair = warp; pair < nh * n; pair += kAttnWarps) {
        const int hh = pair / n, r = pair - hh * n;
        const float* q = sQ + hh * q_dim;
        const float* k = sK + r * k_stride;
        float dot0 = 0.0f, dot1 = 0.0f;  // two chains: more loads in flight
        int i = lane;
        for (; i + kWarp < q_dim; i += 2 * kWarp) {
            dot0 = fmaf(q[i], k[i], dot0);
            dot1 = fmaf(q[i + kWarp], k[i + kWarp], dot1);
        }
        if (i < q_dim) dot0 = fmaf(q[i], k[i], dot0);
        const float dot = warp_sum(dot0 + dot1);
        if (lane == 0) sP[hh * chunk + r] = __fmul_rn(scale, dot);
    }
}

// The online-softmax update of one chunk, one warp per head, one lane per row (n ≤ 32):
//   M_new = max(M_old, max_r l_r);  p_r = exp(l_r − M_new);  alpha = exp(M_old − M_new);  L = L·alpha + Σ p_r
// In exact arithmetic this is the contracts' exp(l_j − M) with M the global max (the rescales cancel).
// Non-finite logits, following the contracts (ops/sparse_attention.h "never masked"):
//   * a −inf logit weighs exactly 0 even while M is still −inf (ref: exp(−inf − M) = 0 beside any larger M);
//     if no logit (and no sink) is ever finite, L stays 0 and the final quotient 0/0 is NaN, as ref's
//     exp(−inf − (−inf)) = NaN makes it;
//   * a NaN logit never becomes the max (fmaxf) but gives p = NaN, so L and the output are NaN;
//   * a +inf logit makes M = +inf and its p = exp(inf − inf) = NaN: NaN output (inf / inf in ref).
// alpha = 1 while M is −inf (nothing gathered can weigh yet: L and the accumulators are still 0).
// p_bf16 (QSA math bf16, qsa_sparse_gqa.h): the P·V weight is bf16(p), the sum L takes p unrounded.
__device__ __forceinline__ void attention_step_softmax(float* sP, float* sM, float* sL, float* sAlpha, int nh, int n,
                                                       int chunk, bool p_bf16) {
    const int warp = threadIdx.x / kWarp, lane = threadIdx.x % kWarp;
    for (int hh = warp; hh < nh; hh += kAttnWarps) {
        const float l = lane < n ? sP[hh * chunk + lane] : -INFINITY;
        const float m_old = sM[hh];
        const float m_new = fmaxf(m_old, warp_max(l));
        const float p = lane < n && l != -INFINITY ? expf(l - m_new) : 0.0f;
        const float sum = warp_sum(p);
        const float alpha = m_new == -INFINITY ? 1.0f : expf(m_old - m_new);
        if (lane < n) sP[hh * chunk + lane] = p_bf16 ? round_bf16(p) : p;
        __syncwarp();  // every lane has read sM[hh] before lane 0 overwrites it
        if (lane == 0) {
            sL[hh] = sL[hh] * alpha + sum;
            sM[hh] = m_new;
            sAlpha[hh] = alpha;
        }
    }
}

// sAcc[hh, i] = sAcc[hh, i] · alpha_hh + Σ_r P[hh, r] · V_r[i]: one thread per (head, dim) pair (fp32), two
// (head, dim) pairs at a time (independent chains: more shared loads in flight).
__device__ __forceinline__ void attention_step_accumulate(float* sAcc, const float* sP, const float* sAlpha,
                                                          const float* sV, int v_stride, int v_dim, int nh, int n,
                                                          int chunk) {
    const int total = nh * v_dim;
    for (int idx = threadIdx.x; idx < total; idx += 2 * kAttnThreads) {
        const int idx1 = idx + kAttnThreads;
        const bool two = idx1 < total;
        const int h0 = idx / v_dim, i0 = idx - h0 * v_dim;
        const int h1 = two ? idx1 / v_dim : h0, i1 = two ? idx1 - h1 * v_dim : i0;
        const float* p0 = sP + h0 * chunk;
        const float* p1 = sP + h1 * chunk;
        float a0 = sAcc[idx] * sAlpha[h0];
        float a1 = two ? sAcc[idx1] * sAlpha[h1] : 0.0f;
        for (int r = 0; r < n; ++r) {
            a0 = fmaf(p0[r], sV[r * v_stride + i0], a0);
            a1 = fmaf(p1[r], sV[r * v_stride + i1], a1);
        }
        sAcc[idx] = a0;
        if (two) sAcc[idx1] = a1;
    }
}

// The weight of a split (or of the one running state) whose running max is m, against the row's max M:
// exp(m − M), and exactly 0 for a split that weighed nothing yet (m = −inf: its sum and accumulator are 0,
// or NaN where an entry held one, which must survive: 0 · NaN = NaN).
__device__ __forceinline__ float attention_split_weight(float m, float M) { return m == -INFINITY ? 0.0f : expf(m - M); }

// The launch shape of an attention kernel: heads per block, rows per chunk, head blocks per item, splits of
// each item's list, the dynamic shared memory.
struct AttentionShape {
    int heads_per_block = 1, chunk = kMaxChunk;
    int64_t head_blocks = 1, splits = 1;
    size_t smem_bytes = 0;
};

// Splits of each item's list (split-K), from the shapes alone: enough blocks to fill the GPU at the nominal
// heads per block, each split at least kMinSplitPositions list positions (−1 entries included).
int64_t attention_splits(int64_t items, int64_t heads, int64_t positions) {
    if (items <= 0 || heads < 1 || positions <= kMinSplitPositions) return 1;
    const int64_t hb = std::min<int64_t>(heads, kMaxHeadsPerBlock);
    const int64_t base = items * ((heads + hb - 1) / hb);
    if (base >= kTargetBlocks) return 1;
    int64_t s = (kTargetBlocks + base - 1) / base;
    s = std::min(s, (positions + kMinSplitPositions - 1) / kMinSplitPositions);
    return std::max<int64_t>(1, std::min(s, kMaxSplits));
}

// The split-K workspace: [rows, splits, v_dim] accumulators, then [rows, splits, kStats] statistics, each
// part 64-byte aligned (rows = tokens × query heads). 0 without splits.
struct SplitWorkspace {
    size_t acc_bytes = 0, total = 0;
};
SplitWorkspace split_workspace(int64_t rows, int64_t splits, int64_t v_dim) {
    SplitWorkspace w;
    if (splits <= 1 || rows <= 0 || v_dim < 1) return w;  // (malformed shapes: validate refuses them before run)
    const size_t n = static_cast<size_t>(rows) * static_cast<size_t>(splits);
    w.acc_bytes = workspace_round_up(n * static_cast<size_t>(v_dim) * 4);
    w.total = w.acc_bytes + workspace_round_up(n * kStats * 4);
    return w;
}

// Picks the shape for `items` work items (tokens, or (token, KV head) pairs) of `heads` heads each sharing
// the rows, whose lists are `splits` ways split: up to 16 heads per block (every row dequantized once per
// block), fewer while the grid would not fill the GPU (kTargetBlocks), and fewer heads or rows per chunk while
// the shared memory would exceed the device's per-block limit. Unsupported when even one head and one row do
// not fit.
Status attention_shape(const char* op, int64_t items, int64_t heads, int64_t splits, int64_t q_dim, int64_t k_stride,
                       int64_t v_stride, int64_t v_dim, const void* kernel, AttentionShape* shape) {
    int device = 0, optin = 0;
    SIEVE_RETURN_IF_ERROR(launch_check(cudaGetDevice(&device), op, "cudaGetDevice"));
    SIEVE_RETURN_IF_ERROR(launch_check(cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, device),
                                       op, "shared memory limit"));
    // The kernels' static shared memory (the gathered row addresses) stays below 1 KiB.
    const int64_t budget = static_cast<int64_t>(optin) - 1024;
    auto bytes = [&](int64_t hb, int64_t c) { return 4 * attention_smem_floats(hb, c, q_dim, k_stride, v_stride, v_dim); };
    // Dims this large could overflow the products below; no block could hold them anyway.
    if (q_dim > budget || k_stride > budget || v_stride > budget || v_dim > budget || bytes(1, 1) > budget)
        return unsupported_error("cuda: {}: one head and one cache row (q {} + K {} + V {} + out {} floats) exceed the "
                                 "{} bytes of shared memory a block may use",
                                 op, q_dim, k_stride, v_stride, v_dim, budget);
    int64_t hb = std::min<int64_t>(heads, kMaxHeadsPerBlock);
    while (hb > 1 && items * ((heads + hb - 1) / hb) * splits < kTargetBlocks) hb = (hb + 1) / 2;
    int64_t c = kMaxChunk;
    while (bytes(hb, c) > budget) {
        if (c > 8)
            c /= 2;
        else if (hb > 1)
            hb = (hb + 1) / 2;
        else
            c /= 2;  // bytes(1, 1) fits: c stays ≥ 1
    }
    // Balance the head blocks (the last one not much smaller than the others); this never grows hb, and
    // (head_blocks − 1) · heads_per_block < heads: every block has a head.
    shape->head_blocks = (heads + hb - 1) / hb;
    shape->heads_per_block = static_cast<int>((heads + shape->head_blocks - 1) / shape->head_blocks);
    shape->chunk = static_cast<int>(c);
    shape->splits = splits;
    shape->smem_bytes = static_cast<size_t>(bytes(shape->heads_per_block, c));
    if (items > INT_MAX / shape->head_blocks / splits)
        return unsupported_error("cuda: {}: {} items × {} head blocks × {} splits exceed the grid's 2^31 − 1 blocks", op,
                                 items, shape->head_blocks, splits);
    if (shape->smem_bytes > 48 * 1024)
        SIEVE_RETURN_IF_ERROR(launch_check(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                                                static_cast<int>(shape->smem_bytes)),
                                           op, "raising the kernel's dynamic shared memory limit"));
    return Status::ok();
}

// Where a block of the attention kernels writes its split's partial state (split-K), nullptr without splits.
struct SplitOut {
    float* acc = nullptr;    // [rows, splits, v_dim]
    float* stats = nullptr;  // [rows, splits, kStats]: running max, running sum, rows gathered
    int64_t splits = 1;
};

// The statistics of a split's rows row0 … row0 + nh − 1 (running max sM, running sum sL, rows gathered),
// thread hh writing row hh's.
__device__ __forceinline__ void attention_write_split_stats(const SplitOut& so, int64_t split, int64_t row0, int nh,
                                                            const float* sM, const float* sL, int64_t n_rows) {
    const int hh = static_cast<int>(threadIdx.x);
    if (hh >= nh) return;
    float* st = so.stats + ((row0 + hh) * so.splits + split) * kStats;
    st[0] = sM[hh];
    st[1] = sL[hh];
    st[2] = static_cast<float>(n_rows);  // ≤ the list width: exact in fp32 up to 2^24, and only tested ≠ 0
    st[3] = 0.0f;
}

// Block-level epilogue of a split: the state of heads h0 … h0 + nh − 1 of token t (rows t·n_heads + h).
__device__ __forceinline__ void attention_write_split(const SplitOut& so, int64_t split, int64_t row0, int nh,
                                                      int v_dim, const float* sAcc, const float* sM, const float* sL,
                                                      int64_t n_rows) {
    for (int idx = threadIdx.x; idx < nh * v_dim; idx += kAttnThreads) {
        const int hh = idx / v_dim, i = idx - hh * v_dim;
        so.acc[((row0 + hh) * so.splits + split) * v_dim + i] = sAcc[idx];
    }
    attention_write_split_stats(so, split, row0, nh, sM, sL, n_rows);
}

// The merge of a row's split states (and of the sink σ, a virtual key of zero value): with
//   M = max(σ, max_s m_s),  f_s = exp(m_s − M) (attention_split_weight),
//   den = Σ_s f_s · L_s + exp(σ − M)  (no term for σ = −inf: no sink),  out_i = Σ_s f_s · acc_s,i / den,
// which is the contract's quotient in exact arithmetic. A warp merges a row's statistics, each lane reading
// the 16-byte states of two splits; each thread then sums f_s · acc_s,i over the splits in order for its own
// values of the row and divides once. combine_shape says which threads take which values.
constexpr int kCombineMaxSlabs = 4;            // slabs a warp at most (1, 2 or 4): 512 values of float4 reads
// float4 reads a lane has in flight (attention_combine_slabs): a warp of one slab serves few rows, each split many
// ways (a one-token decode: 20 to 64), a warp of more slabs many rows split a few ways (kTargetBlocks)
constexpr int kCombineInFlightOneSlab = 32;
constexpr int kCombineInFlight = 8;
constexpr int64_t kCombineTargetWarps = 1024;  // ~8 a multiprocessor, every lane with loads to wait on
constexpr int kCombineBlockWarps = 2;          // small blocks: a thousand warps still spread over every multiprocessor
constexpr int kCombineRowThreads = 512;        // a row block: one thread a value of a 512-value row
constexpr int combine_threads(int slabs_per_warp) { return slabs_per_warp == 0 ? kCombineRowThreads : kCombineBlockWarps * kWarp; }
static_assert(kMaxSplits <= 2 * kWarp, "a lane holds the states of two splits (attention_combine_stats)");
// How the combine kernels spread the rows: where v_dim is a multiple of 4, a warp takes slabs_per_warp
// consecutive slabs (a slab: 32 float4) of one row, as many as keep about kCombineTargetWarps warps busy, whole
// rows for a large batch (attention_combine_part); otherwise (slabs_per_warp 0) a block of one thread a value
// takes a row, its first warp merging the statistics once for all (attention_combine_row_block). A kernel
// instance each, so that each keeps the registers it needs: the reads in flight of one slab take 128. Timed
// on one H100 with the attention kernel before them (medians of 20 L2-flushed calls, interleaved processes),
// against row blocks below 512 rows and statistics read before the values: DeepSeek-V4 b=1 18.2 µs → 17.0,
// b=16 30.8 → 28.0, b=64 52.0 → 47.7; V3.2 b=1 23.6 → 22.2, b=16 56.3 → 53.4; QSA b=1 20.0 → 18.6.
struct CombineShape {
    int64_t rows = 0;
    int slabs_per_warp = 0, warps_per_row = 1;  // 0: row blocks
    unsigned blocks = 0, threads = 0;
};
inline CombineShape combine_shape(int64_t rows, int v_dim) {
    CombineShape c;
    c.rows = rows;
    if (v_dim % 4 != 0) {  // float4 reads need 16-byte aligned rows
        c.threads = static_cast<unsigned>(std::min<int64_t>(kCombineRowThreads, (v_dim + kWarp - 1) / kWarp * kWarp));
        c.blocks = static_cast<unsigned>(rows);
        return c;
    }
    const int64_t slabs = (v_dim + 4 * kWarp - 1) / (4 * kWarp);
    const int64_t fit =
        std::clamp<int64_t>(rows * slabs / kCombineTargetWarps, 1, std::min<int64_t>(slabs, kCombineMaxSlabs));
    c.slabs_per_warp = fit >= 4 ? 4 : fit >= 2 ? 2 : 1;  // attention_combine_slabs' instances
    c.warps_per_row = static_cast<int>((slabs + c.slabs_per_warp - 1) / c.slabs_per_warp);
    c.threads = combine_threads(c.slabs_per_warp);
    c.blocks = static_cast<unsigned>((rows * c.warps_per_row + kCombineBlockWarps - 1) / kCombineBlockWarps);
    return c;
}
struct CombineStats {
    float M = 0.0f, den = 0.0f;
    float f[2] = {0.0f, 0.0f};  // f_s of the calling lane's splits, s = lane and lane + 32 (0 past the last)
    bool zero = true;           // the row gets 0: no listed entry, or σ = +inf (ops/sparse_attention.h)
};
__device__ __forceinline__ CombineStats attention_combine_stats(const float* stats, int64_t splits, float sigma) {
    const int lane = static_cast<int>(threadIdx.x % kWarp);
    float4 st[2];
#pragma unroll
    for (int r = 0; r < 2; ++r) {
        const int64_t s = lane + r * kWarp;
        st[r] = s < splits ? *reinterpret_cast<const float4*>(stats + s * kStats) : make_float4(-INFINITY, 0.0f, 0.0f, 0.0f);
    }
    CombineStats c;
    c.M = warp_max(fmaxf(sigma, fmaxf(st[0].x, st[1].x)));
    const float rows = warp_sum(st[0].z + st[1].z);
#pragma unroll
    for (int r = 0; r < 2; ++r) c.f[r] = attention_split_weight(st[r].x, c.M);
    const float den = warp_sum(c.f[0] * st[0].y + c.f[1] * st[1].y);
    c.den = den + (sigma == -INFINITY ? 0.0f : expf(sigma - c.M));  // a NaN σ makes den NaN
    c.zero = rows == 0.0f || sigma == INFINITY;
    return c;
}
// kSlabs slabs of a row from first_slab on: out_i through store(i, out_i). Each lane sums f_s · acc_s,i over the
// splits in order for its four values of each slab and divides once. The splits go in groups whose reads are
// all issued before the group's first addition, and the first group's before the statistics are read, which
// they do not wait for: a row of up to 32 splits (a one-token decode split 20 ways) waits for one round trip,
// not one for the statistics and more for the values. f_s comes from the lane holding split s by a shuffle.
template <int kSlabs, typename Store>
__device__ __forceinline__ void attention_combine_slabs(const float* stats, const float* acc, int64_t splits, int v_dim,
                                                        float sigma, int first_slab, Store&& store) {
    constexpr int kGroup = (kSlabs == 1 ? kCombineInFlightOneSlab : kCombineInFlight) / kSlabs;
    static_assert(kWarp % kGroup == 0, "groups do not cross the 32 splits of a shuffle round");
    const int lane = static_cast<int>(threadIdx.x % kWarp);
    auto first = [&](int j) { return ((first_slab + j) * kWarp + lane) * 4; };  // 4 divides v_dim
    float4 a[kSlabs];
#pragma unroll
    for (int j = 0; j < kSlabs; ++j) a[j] = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
    CombineStats cs;  // set by the first group (a split row has two splits at least)
    for (int64_t s0 = 0; s0 < splits; s0 += kGroup) {
        const int n = static_cast<int>(min(static_cast<int64_t>(kGroup), splits - s0));
        float4 v[kGroup][kSlabs];
#pragma unroll
        for (int g = 0; g < kGroup; ++g)
#pragma unroll
            for (int j = 0; j < kSlabs; ++j)
                if (g < n && first(j) < v_dim) v[g][j] = *reinterpret_cast<const float4*>(acc + (s0 + g) * v_dim + first(j));
        if (s0 == 0) cs = attention_combine_stats(stats, splits, sigma);
        const float f_lane = s0 < kWarp ? cs.f[0] : cs.f[1];
#pragma unroll
        for (int g = 0; g < kGroup; ++g) {
            const float f = __shfl_sync(kFullMask, f_lane, static_cast<int>(s0 % kWarp) + g);
#pragma unroll
            for (int j = 0; j < kSlabs; ++j)
                if (g < n && first(j) < v_dim)
                    a[j] = make_float4(fmaf(f, v[g][j].x, a[j].x), fmaf(f, v[g][j].y, a[j].y), fmaf(f, v[g][j].z, a[j].z),
                                       fmaf(f, v[g][j].w, a[j].w));
        }
    }
#pragma unroll
    for (int j = 0; j < kSlabs; ++j) {
        const int i = first(j);
        if (i >= v_dim) continue;
        const float q[4] = {a[j].x, a[j].y, a[j].z, a[j].w};
#pragma unroll
        for (int k = 0; k < 4; ++k) store(i + k, cs.zero ? 0.0f : __fdiv_rn(q[k], cs.den));
    }
}
// The merge of row blockIdx.x by a block of one thread a value (CombineShape::slabs_per_warp 0): its first warp merges
// the statistics, the threads then sum their values over the splits in order.
template <typename Store>
__device__ __forceinline__ void attention_combine_row_block(const float* stats_base, const float* acc_base, int64_t splits,
                                                            int v_dim, const float* sink, int64_t n_heads,
                                                            Store&& store_row) {
    __shared__ float s_f[2 * kWarp];
    __shared__ CombineStats s_cs;
    const int64_t row = blockIdx.x;
    if (threadIdx.x < kWarp) {
        const CombineStats cs =
            attention_combine_stats(stats_base + row * splits * kStats, splits, sink ? sink[row % n_heads] : -INFINITY);
        s_f[threadIdx.x] = cs.f[0];
        s_f[threadIdx.x + kWarp] = cs.f[1];
        if (threadIdx.x == 0) s_cs = cs;
    }
    __syncthreads();
    const CombineStats cs = s_cs;
    const float* const acc = acc_base + row * splits * v_dim;
    for (int i = threadIdx.x; i < v_dim; i += blockDim.x) {
        float a = 0.0f;
#pragma unroll 8  // eight loads in flight: the splits' accumulators are read once each
        for (int64_t s = 0; s < splits; ++s) a = fmaf(s_f[s], acc[s * v_dim + i], a);
        store_row(row, i, cs.zero ? 0.0f : __fdiv_rn(a, cs.den));
    }
}
// The merge of one row's part, kSlabs slabs, by the calling warp: store_row(row, i, out_i).
template <int kSlabs, typename Store>
__device__ __forceinline__ void attention_combine_part(const CombineShape& shape, const float* stats_base,
                                                       const float* acc_base, int64_t splits, int v_dim,
                                                       const float* sink, int64_t n_heads, Store&& store_row) {
    const int64_t warp = static_cast<int64_t>(blockIdx.x) * (blockDim.x / kWarp) + threadIdx.x / kWarp;
    const int64_t row = warp / shape.warps_per_row;
    if (row >= shape.rows) return;  // a whole warp
    const int part = static_cast<int>(warp % shape.warps_per_row);
    const float* const stats = stats_base + row * splits * kStats;
    const float sigma = sink ? sink[row % n_heads] : -INFINITY;
    auto store = [&](int i, float o) { store_row(row, i, o); };
    const float* const acc = acc_base + row * splits * v_dim;
    attention_combine_slabs<kSlabs>(stats, acc, splits, v_dim, sigma, part * kSlabs, store);
}
// The merge of the instance for CombineShape::slabs_per_warp kSlabs.
template <int kSlabs, typename Store>
__device__ __forceinline__ void attention_combine(const CombineShape& shape, const float* stats, const float* acc,
                                                  int64_t splits, int v_dim, const float* sink, int64_t n_heads,
                                                  Store&& store_row) {
    if constexpr (kSlabs == 0)
        attention_combine_row_block(stats, acc, splits, v_dim, sink, n_heads, store_row);
    else
        attention_combine_part<kSlabs>(shape, stats, acc, splits, v_dim, sink, n_heads, store_row);
}
// The kernel instance of a shape, of the four a combine kernel has (0, 1, 2, 4 slabs a warp).
template <typename Kernel>
Kernel combine_instance(const CombineShape& shape, Kernel row_blocks, Kernel one, Kernel two, Kernel four) {
    switch (shape.slabs_per_warp) {
        case 0: return row_blocks;
        case 1: return one;
        case 2: return two;
        default: return four;
    }
}
// One split: attention_combine_stats' merge over the one running state of a row (max m, sum L) and the sink
// σ, computed once per row; then each accumulator value acc gives out = f · acc / den, one IEEE division.
// 0 for a token with no listed entry and for a head with σ = +inf, and only there.
struct OneSplitRow {
    float f = 0.0f, den = 1.0f;
    bool zero = true;
};
__device__ __forceinline__ OneSplitRow attention_one_split_row(float m, float L, float sigma, int64_t n_rows) {
    OneSplitRow r;
    r.zero = n_rows == 0 || sigma == INFINITY;
    const float M = fmaxf(sigma, m);
    r.f = attention_split_weight(m, M);
    r.den = r.f * L + (sigma == -INFINITY ? 0.0f : expf(sigma - M));
    return r;
}
__device__ __forceinline__ float attention_one_split_value(float acc, const OneSplitRow& r) {
    return r.zero ? 0.0f : __fdiv_rn(r.f * acc, r.den);
}
// attention_one_split_value of eight accumulator values, bit for bit, with one division's cost spread over a
// row: where the row's den and every numerator a = f·acc lie in [2^-60, 2^61), each quotient is
// q = fma(a − den·q1, y, q1) from y = 1/den correctly rounded (once a row, `reciprocal`) and q1, a quotient
// within an ulp (one FMA correction of a·y). Markstein's theorem makes q the correctly rounded a / den, as
// __fdiv_rn is; the bounds keep every step clear of overflow and subnormals. Other groups divide. Returns
// whether the group took the correction (its quotients are then all finite).
__device__ __forceinline__ bool attention_quotient_in_range(float x) {
    const uint32_t biased = (__float_as_uint(x) >> 23) & 0xffu;  // 2^-60 … 2^61: exponents 67 … 187
    return biased - 67u <= 187u - 67u;
}
__device__ __forceinline__ bool attention_one_split_values8(float (&v)[8], const OneSplitRow& r, float reciprocal) {
    float a[8];
    bool fast = !r.zero && attention_quotient_in_range(r.den);
#pragma unroll
    for (int k = 0; k < 8; ++k) {
        a[k] = r.f * v[k];
        fast = fast && attention_quotient_in_range(a[k]);
    }
    if (!fast) {
#pragma unroll
        for (int k = 0; k < 8; ++k) v[k] = attention_one_split_value(v[k], r);
        return false;
    }
#pragma unroll
    for (int k = 0; k < 8; ++k) {
        const float q0 = a[k] * reciprocal;
        const float q1 = fmaf(fmaf(-r.den, q0, a[k]), reciprocal, q0);
        v[k] = fmaf(fmaf(-r.den, q1, a[k]), reciprocal, q1);
    }
    return true;
}
// ===================================== sparse_attention =====================================

struct SparseListArgs {
    AttnRecord rec;                 // the list's cache and entry format (attention_cache.cuh)
    const int32_t* slots = nullptr; // [n_tokens, width] at slots + t·slots_stride
    int64_t width = 0, slots_stride = 0;
};

struct SparseAttentionArgs {
    const void* q = nullptr;
    void* out = nullptr;
    const float* sink = nullptr;
    SparseListArgs main, extra;
    SplitOut split;
    float scale = 0.0f;
    int64_t n_heads = 0, q_token_stride = 0, q_head_stride = 0, out_token_stride = 0, out_head_stride = 0;
    int64_t head_blocks = 1;
    int qk_dim = 0, v_dim = 0, heads_per_block = 1, chunk = kMaxChunk;
    bool q_bf16 = false, out_bf16 = false;
    bool p_bf16 = false;  // AttentionMath::bf16
};

// Warp 0 gathers the next up to `chunk` listed entries of token t in list positions [cursor, end) (main,
// then extra; ops/sparse_attention.h "Token t reads, in this order") whose slot is valid: their data and
// scale addresses and list. `cursor` is identical in every lane. Returns the rows gathered (0: the range is
// exhausted). A slot of −1 is skipped (the contract); so is any other slot outside [0, n_slots), which
// check_indices would have refused: on the device it is never addressed.
__device__ __forceinline__ int sparse_attention_gather(const SparseAttentionArgs& a, int64_t t, int64_t& cursor,
                                                       int64_t end, int chunk, const uint8_t** s_data,
                                                       const uint8_t** s_scales, int* s_list) {
    const int lane = threadIdx.x % kWarp;
    int filled = 0;
    while (filled < chunk && cursor < end) {
        const int64_t c = cursor + lane;
        bool valid = false;
        int list = 0;
        const uint8_t* data = nullptr;
        const uint8_t* scales = nullptr;
        if (c < end) {
            list = c < a.main.width ? 0 : 1;
            const SparseListArgs& l = list == 0 ? a.main : a.extra;
            const int64_t j = list == 0 ? c : c - a.main.width;
            const int64_t slot = l.slots[t * l.slots_stride + j];
            valid = slot >= 0 && slot < l.rec.n_slots;
            if (valid) {
                const AttnBlockPos bp = attn_block_pos(slot, l.rec.block_size);
                data = attn_record_data(l.rec, bp);
                scales = attn_record_scales(l.rec, bp);
            }
        }
        const unsigned ballot = __ballot_sync(kFullMask, valid);
        const int count = __popc(ballot);
        const int take = min(count, chunk - filled);
        const int rank = __popc(ballot & ((1u << lane) - 1u));
        if (valid && rank < take) {
            s_data[filled + rank] = data;
            s_scales[filled + rank] = scales;
            s_list[filled + rank] = list;
        }
        if (take < count) {  // the chunk is full: resume at the first valid entry not taken
            unsigned rest = ballot;
            for (int k = 0; k < take; ++k) rest &= rest - 1u;
            cursor += __ffs(static_cast<int>(rest)) - 1;
        } else {
            cursor += kWarp;
        }
        filled += take;
    }
    return filled;
}

// Block-level epilogue of sparse attention: heads h0 … h0 + nh − 1 of token t from the block's running state
// (sAcc [nh][v_dim], sM, sL, n_rows gathered), as a split's partial state or, with one split, merged with
// the sink into the output. A warp per head row, its lanes striding the dims: the row's terms are computed
// once and the stores are coalesced.
__device__ __forceinline__ void sparse_attention_write_block(const SparseAttentionArgs& a, int64_t split, int64_t t,
                                                             int64_t h0, int nh, const float* sAcc, const float* sM,
                                                             const float* sL, int64_t n_rows) {
    const int Dv = a.v_dim, warp = threadIdx.x / kWarp, lane = threadIdx.x % kWarp;
    if (a.split.splits > 1) {
        const bool vectors = Dv % (4 * kWarp) == 0 && reinterpret_cast<uintptr_t>(a.split.acc) % 16 == 0 &&
                             mma::smem_address(sAcc) % 16 == 0;
        for (int hh = warp; hh < nh; hh += kAttnWarps) {
            float* dst = a.split.acc + ((t * a.n_heads + h0 + hh) * a.split.splits + split) * Dv;
            if (vectors) {
                for (int i = 4 * lane; i < Dv; i += 4 * kWarp)
                    *reinterpret_cast<float4*>(dst + i) = *reinterpret_cast<const float4*>(sAcc + hh * Dv + i);
            } else {
                for (int i = lane; i < Dv; i += kWarp) dst[i] = sAcc[hh * Dv + i];
            }
        }
        attention_write_split_stats(a.split, split, t * a.n_heads + h0, nh, sM, sL, n_rows);
        return;
    }
    // Rows whose output starts 16-byte aligned go out eight values a lane at a time (two 16-byte loads, one
    // or two 16-byte stores); others value by value.
    const int value_bytes = a.out_bf16 ? 2 : 4;
    const bool vectors = Dv % (8 * kWarp) == 0 && reinterpret_cast<uintptr_t>(a.out) % 16 == 0 &&
                         mma::smem_address(sAcc) % 16 == 0;
    for (int hh = warp; hh < nh; hh += kAttnWarps) {
        const OneSplitRow row = attention_one_split_row(sM[hh], sL[hh], a.sink ? a.sink[h0 + hh] : -INFINITY, n_rows);
        const int64_t o0 = t * a.out_token_stride + (h0 + hh) * a.out_head_stride;
        const float* const acc = sAcc + hh * Dv;
        if (!vectors || o0 * value_bytes % 16 != 0) {
            for (int i = lane; i < Dv; i += kWarp) store_act(a.out, a.out_bf16, o0 + i, attention_one_split_value(acc[i], row));
            continue;
        }
        const float reciprocal = __frcp_rn(row.den);
        for (int i = 8 * lane; i < Dv; i += 8 * kWarp) {
            const float4 lo = *reinterpret_cast<const float4*>(acc + i), hi = *reinterpret_cast<const float4*>(acc + i + 4);
            float v[8] = {lo.x, lo.y, lo.z, lo.w, hi.x, hi.y, hi.z, hi.w};
            const bool finite = attention_one_split_values8(v, row, reciprocal);
            if (a.out_bf16) {
                // Finite values round to nearest even in one instruction a pair (f32_to_bf16_bits' result).
                auto pair = [&](int k) {
                    return finite ? mma::pack_bf16x2(v[2 * k], v[2 * k + 1])
                                  : static_cast<uint32_t>(f32_to_bf16_bits(v[2 * k])) |
                                        (static_cast<uint32_t>(f32_to_bf16_bits(v[2 * k + 1])) << 16);
                };
                // One 16-byte store (written as a uint4 assignment, the compiler splits it into four).
                asm volatile("st.global.v4.b32 [%0], {%1, %2, %3, %4};\n" ::"l"(__cvta_generic_to_global(static_cast<uint16_t*>(a.out) + o0 + i)),
                             "r"(pair(0)), "r"(pair(1)), "r"(pair(2)), "r"(pair(3))
                             : "memory");
            } else {
                float4* const dst = reinterpret_cast<float4*>(static_cast<float*>(a.out) + o0 + i);
                dst[0] = make_float4(v[0], v[1], v[2], v[3]);
                dst[1] = make_float4(v[4], v[5], v[6], v[7]);
            }
        }
    }
}

// One block per (token, head block, split). Semantics: ops/sparse_attention.h; the step functions above.
__global__ void __launch_bounds__(kAttnThreads) sparse_attention_kernel(SparseAttentionArgs a) {
    wait_for_previous_kernel();
    extern __shared__ float4 attention_smem[];
    __shared__ const uint8_t* s_data[kMaxChunk];
    __shared__ const uint8_t* s_scales[kMaxChunk];
    __shared__ int s_list[kMaxChunk];
    __shared__ int s_count;
    const int HB = a.heads_per_block, C = a.chunk, Dk = a.qk_dim, Dv = a.v_dim;
    float* sQ = reinterpret_cast<float*>(attention_smem);
    float* sK = sQ + HB * Dk;
    float* sAcc = sK + C * Dk;
    float* sP = sAcc + HB * Dv;
    float* sM = sP + HB * C;
    float* sL = sM + HB;
    float* sAlpha = sL + HB;

    const int64_t split = blockIdx.x % a.split.splits, item = blockIdx.x / a.split.splits;
    const int64_t t = item / a.head_blocks;
    const int64_t h0 = (item % a.head_blocks) * HB;
    const int nh = static_cast<int>(min(static_cast<int64_t>(HB), a.n_heads - h0));
    const int warp = threadIdx.x / kWarp, lane = threadIdx.x % kWarp;
    // This split's list positions: [total·s/S, total·(s + 1)/S) of the concatenated main + extra lists.
    const int64_t total = a.main.width + a.extra.width;
    const int64_t begin = total * split / a.split.splits, end = total * (split + 1) / a.split.splits;

    for (int hh = 0; hh < nh; ++hh) {
        const int64_t qo = t * a.q_token_stride + (h0 + hh) * a.q_head_stride;
        for (int i = threadIdx.x; i < Dk; i += kAttnThreads) sQ[hh * Dk + i] = load_act(a.q, a.q_bf16, qo + i);
    }
    for (int idx = threadIdx.x; idx < nh * Dv; idx += kAttnThreads) sAcc[idx] = 0.0f;
    // The running state starts empty; the sink σ enters at the end (attention_combine_stats' formula).
    if (static_cast<int>(threadIdx.x) < nh) {
        sM[threadIdx.x] = -INFINITY;
        sL[threadIdx.x] = 0.0f;
    }

    int64_t cursor = begin, n_rows = 0;  // cursor: warp 0's; n_rows: every thread's count of gathered rows
    for (;;) {
        __syncthreads();  // the previous chunk's readers are done (and the initial state is visible)
        if (warp == 0) {
            const int filled = sparse_attention_gather(a, t, cursor, end, C, s_data, s_scales, s_list);
            if (lane == 0) s_count = filled;
        }
        __syncthreads();
        const int n = s_count;
        if (n == 0) break;
        n_rows += n;
        for (int r = warp; r < n; r += kAttnWarps) {  // dequantize each gathered entry once, for all heads
            const AttnRecord& rec = s_list[r] == 0 ? a.main.rec : a.extra.rec;
            const uint8_t* data = s_data[r];
            const uint8_t* scales = s_scales[r];
#pragma unroll 4
            for (int i = lane; i < Dk; i += kWarp) sK[r * Dk + i] = attn_record_value(rec, data, scales, i);
        }
        __syncthreads();
        attention_step_logits(sQ, sK, Dk, Dk, nh, n, C, a.scale, sP);
        __syncthreads();
        attention_step_softmax(sP, sM, sL, sAlpha, nh, n, C, a.p_bf16);
        __syncthreads();
        attention_step_accumulate(sAcc, sP, sAlpha, sK, Dk, Dv, nh, n, C);  // V_j = the first v_dim values of K_j
    }
    // The loop ends right after a barrier that follows the last accumulation: sAcc, sM and sL are complete.
    sparse_attention_write_block(a, split, t, h0, nh, sAcc, sM, sL, n_rows);
}

// ---- sparse_attention on tensor cores: fp8 records (fp8_model1, fp8_v32), bf16 q ----
//
// The same contract and the same split-K / combine / sink handling as sparse_attention_kernel, with both
// products on mma.sync (bf16 operands, fp32 accumulation) over chunks of kMmaChunk gathered entries and
// blocks of kMmaHeads heads. Values enter the products exactly (ops/sparse_attention.h: fp32 products and
// sums in any order):
//   fp8_model1  e4m3 · 2^k (a UE8M0 scale) is a bf16 value: the entries are dequantized into bf16 exactly,
//               and P·V takes the weights p_j split into two bf16 terms (mma::split_bf16: 16 significant
//               bits instead of bf16's 8), each multiplied by the exact value
//   fp8_v32     an fp32 scale times e4m3 is not a bf16 value, so the e4m3 values enter unscaled and the
//               scales are applied in fp32: l_j = scale · Σ_groups s_jg · ⟨q_g, e_jg⟩ (one mma chain per
//               group, scaled as it is added), and for output dims of group g the weight p_j · s_jg is split
//               into two bf16 terms that multiply e_j
// With math bf16 (kBf16P) the weights are one bf16 term: bf16(p_j), or bf16(bf16(p_j) · s_jg) for fp8_v32
// (mma::bf16_weights_x2, ops/sparse_attention.h), half the P·V products.
// The bf16 rope tail is exact in both. Warp w computes the logits of head m-tile w / 4 and entry n-tile w % 4
// over all dims, and owns output dims [w·v_dim/8, (w + 1)·v_dim/8) of every head of the block (an fp32
// accumulator in registers), which lie in one fp8_v32 group or in the tail (mma_attention_supported). The
// next chunk is gathered and staged (cp.async) while the current one is computed.
constexpr int kMmaHeads = 32;     // heads per block: two m-tiles of 16
constexpr int kMmaChunk = 32;     // gathered entries per chunk: four n-tiles of 8
constexpr int kMmaThreads = 256;  // 8 warps (= kAttnThreads: the softmax step is shared)
constexpr int kMmaWarps = kMmaThreads / kWarp;
constexpr int kMmaMaxQkDim = 576;
constexpr int kMmaMaxVDim = 512;
constexpr int kMmaMaxTiles = kMmaMaxVDim / kMmaWarps / 8;  // output n-tiles per warp
constexpr int kMmaPad = 8;        // bf16 values of padding per shared row: ldmatrix's 8 rows hit distinct banks
constexpr int kMmaPRow = kMmaChunk + kMmaPad;  // bf16 values per row of the split weights
constexpr int64_t kMmaMinSplitPositions = kMmaChunk;
static_assert(kMmaThreads == kAttnThreads, "the block epilogue strides by kAttnWarps and kAttnThreads");

// The entry format's numbers the kernel needs (host-computed from CacheRecordLayout).
struct MmaRecordNumbers {
    int quant_dim = 0;      // e4m3 values per entry, then the bf16 tail up to qk_dim
    int group = 0;          // values per scale
    int data_bytes = 0;     // the entry's data part in its block (CacheRecordLayout::data_bytes)
    int scale_bytes = 0;    // fp8_model1: its UE8M0 tile bytes, kept after the block's data parts; fp8_v32: 0 (inside the data)
    int tail_offset = 0;    // bytes from the data to the bf16 tail
    int scales_offset = 0;  // bytes from a staged entry's start to its scales
};

struct MmaAttentionShape {
    int row = 0;        // bf16 values per shared row of q and of the converted entries (qk_dim + kMmaPad)
    int n_groups = 0;   // scales per entry
    int stage_row = 0;  // bytes per staged raw entry: its data part, then (fp8_model1) its scales; 16-byte multiple
    size_t q_off = 0, kv_off = 0, stage_off = 0, p_off = 0, ph_off = 0, scale_off = 0, stats_off = 0, bytes = 0;
};
__host__ __device__ inline MmaAttentionShape mma_attention_shape(int qk_dim, const MmaRecordNumbers& r, bool model1) {
    MmaAttentionShape s;
    s.row = qk_dim + kMmaPad;
    s.n_groups = (r.quant_dim + r.group - 1) / r.group;
    s.stage_row = (r.data_bytes + r.scale_bytes + 15) / 16 * 16;
    s.q_off = 0;
    s.kv_off = s.q_off + static_cast<size_t>(kMmaHeads) * s.row * 2;
    s.stage_off = s.kv_off + static_cast<size_t>(kMmaChunk) * s.row * 2;
    s.p_off = s.stage_off + static_cast<size_t>(kMmaChunk) * s.stage_row;
    s.ph_off = s.p_off + static_cast<size_t>(kMmaHeads) * kMmaChunk * 4;
    // fp8_model1: the split weights (head and tail terms); fp8_v32: the group scales, [group][entry].
    s.scale_off = s.ph_off + (model1 ? 2 * static_cast<size_t>(kMmaHeads) * kMmaPRow * 2 : 0);
    s.stats_off = s.scale_off + (model1 ? 0 : static_cast<size_t>(kMmaChunk) * s.n_groups * 4);
    s.bytes = s.stats_off + 3 * kMmaHeads * 4;
    return s;
}

// Whether sparse_attention_mma_kernel takes these params: bf16 q; every present list fp8_model1, or every one
// fp8_v32; dims in whole mma steps (qk_dim, quant_dim and the group a multiple of 16, qk_dim ≤ 576); v_dim a
// multiple of 64 up to 512 whose per-warp share divides the group and quant_dim (a warp's output dims share
// one scale).
bool mma_attention_supported(const SparseAttentionParams& p) {
    if (p.q_type != DType::bf16) return false;
    const SparseKvList* lists[2] = {&p.main, &p.extra};
    CacheRecordFormat format = CacheRecordFormat::f32;
    bool any = false;
    for (const SparseKvList* l : lists) {
        if (l->width == 0) continue;
        if (l->format != CacheRecordFormat::fp8_model1 && l->format != CacheRecordFormat::fp8_v32) return false;
        if (any && l->format != format) return false;
        format = l->format;
        any = true;
    }
    if (!any) return false;
    const CacheRecordLayout layout{format, p.qk_dim, p.rope_dim};
    const int64_t quant = layout.quant_dim(), group = layout.group_size(), share = p.v_dim / kMmaWarps;
    return p.qk_dim % 16 == 0 && p.qk_dim <= kMmaMaxQkDim && quant % 16 == 0 && group % 16 == 0 && p.v_dim % 64 == 0 &&
           p.v_dim <= kMmaMaxVDim && group % share == 0 && quant % share == 0;
}

struct MmaAttentionArgs {
    SparseAttentionArgs base;
    MmaRecordNumbers rec;
    // Every entry's data part 16-byte aligned and (fp8_model1) its scales 8-byte aligned: the chunk is staged
    // with cp.async while the previous chunk is computed. Otherwise (views the contract allows but no cache
    // pool makes) it is staged with byte copies, synchronously.
    bool async_ok = false;
    bool q_vector_ok = false;  // q rows 16-byte aligned: 16-byte loads
};

// Stages the raw bytes of the chunk's n gathered entries (data part, then the fp8_model1 scales) into
// `stage`, warp w taking entries w, w + 8, …; with cp.async the bytes land by the next async_copy::wait_all and
// barrier.
__device__ __forceinline__ void mma_stage_chunk(const MmaAttentionArgs& ma, int stage_row, int n, const uint8_t* const* s_data,
                                                const uint8_t* const* s_scales, uint8_t* stage) {
    const MmaRecordNumbers& r = ma.rec;
    const int warp = threadIdx.x / kWarp, lane = threadIdx.x % kWarp;
    if (ma.async_ok) {
        for (int e = warp; e < n; e += kMmaWarps) {
            uint8_t* dst = stage + e * stage_row;
            const uint32_t to = mma::smem_address(dst);
            for (int k = lane; k < r.data_bytes / 16; k += kWarp) async_copy::copy<16>(to + 16 * k, s_data[e] + 16 * k);
            for (int k = lane; k < r.scale_bytes / 8; k += kWarp)
                async_copy::copy<8>(to + r.data_bytes + 8 * k, s_scales[e] + 8 * k);
        }
        async_copy::commit();
        return;
    }
    // Kept rolled: this path never runs for the cache pools' entries, and the kernel's size is time.
#pragma unroll 1
    for (int e = warp; e < n; e += kMmaWarps) {
#pragma unroll 1
        for (int k = lane; k < r.data_bytes; k += kWarp) stage[e * stage_row + k] = static_cast<uint8_t>(load_u8(s_data[e] + k));
#pragma unroll 1
        for (int k = lane; k < r.scale_bytes; k += kWarp)
            stage[e * stage_row + r.data_bytes + k] = static_cast<uint8_t>(load_u8(s_scales[e] + k));
    }
}

// Eight e4m3 values (the first in the low byte) as bf16 bits, two per 32-bit word: fp8_model1 values times
// their group's UE8M0 scale byte (fp8.cuh e4m3x8_scaled_to_bf16: exact wherever the product is a normal bf16),
// fp8_v32 values unscaled (exact; the scale unused).
template <bool kModel1>
__device__ __forceinline__ uint4 e4m3_octet_to_bf16(uint2 eight, uint32_t scale) {
    if constexpr (kModel1) {
        return e4m3x8_scaled_to_bf16(eight, scale);
    } else {
        const uint32_t pairs[4] = {eight.x & 0xffffu, eight.x >> 16, eight.y & 0xffffu, eight.y >> 16};
        uint32_t out[4];
#pragma unroll
        for (int k = 0; k < 4; ++k) out[k] = mma::e4m3x2_to_operand<false>(pairs[k]);
        return make_uint4(out[0], out[1], out[2], out[3]);
    }
}

// Eight consecutive e4m3 values [i, i + 8) of a staged entry as bf16 bits, two per 32-bit word (as
// e4m3_octet_to_bf16). Staged rows are 16-byte aligned; i is a multiple of 8 below quant_dim, so the eight
// share one scale group.
template <bool kModel1>
__device__ __forceinline__ uint4 mma_entry_octet(const uint8_t* staged, const MmaRecordNumbers& r, int i) {
    static_assert(kFp8Model1Tile == 64, "fp8_model1 groups are 64 values (ops/cache_record.h)");
    const uint32_t scale = kModel1 ? staged[r.scales_offset + (i >> 6)] : 0u;
    return e4m3_octet_to_bf16<kModel1>(*reinterpret_cast<const uint2*>(staged + i), scale);
}

// Row r of a chunk as bf16 values in `dst` (S.row values per row): the e4m3 part eight values per lane step,
// then the bf16 tail as stored (16-byte steps where the tail is 16-byte aligned in the record); zeros for
// a row past the chunk's n entries. quant_dim and qk_dim are multiples of 16 (mma_attention_supported).
template <bool kModel1>
__device__ __forceinline__ void mma_convert_row(const uint8_t* staged, const MmaRecordNumbers& R, int qk_dim,
                                                bool present, uint16_t* dst) {
    const int lane = threadIdx.x % kWarp;
    if (!present) {
        for (int i = 8 * lane; i < qk_dim; i += 8 * kWarp) *reinterpret_cast<uint4*>(dst + i) = make_uint4(0u, 0u, 0u, 0u);
        return;
    }
    for (int i = 8 * lane; i < R.quant_dim; i += 8 * kWarp)
        *reinterpret_cast<uint4*>(dst + i) = mma_entry_octet<kModel1>(staged, R, i);
    const uint8_t* tail = staged + R.tail_offset;
    uint16_t* const dst_tail = dst + R.quant_dim;
    const int tail_dim = qk_dim - R.quant_dim;
    if (R.tail_offset % 16 == 0) {
        for (int i = 8 * lane; i < tail_dim; i += 8 * kWarp)
            *reinterpret_cast<uint4*>(dst_tail + i) = *reinterpret_cast<const uint4*>(tail + 2 * i);
    } else {
        for (int i = 2 * lane; i < tail_dim; i += 2 * kWarp)
            *reinterpret_cast<uint32_t*>(dst_tail + i) = *reinterpret_cast<const uint32_t*>(tail + 2 * i);
    }
}

// The online-softmax update of one chunk of the tensor-core kernel (attention_step_softmax's arithmetic and
// non-finite cases, per head): eight consecutive threads per head, each taking four of the kMmaChunk
// logits, so that every thread of the block works and a head's reductions take three shuffles.
__device__ __forceinline__ void mma_step_softmax(float* sP, float* sM, float* sL, float* sAlpha, int n) {
    static_assert(kMmaThreads == 8 * kMmaHeads && kMmaChunk == 8 * 4, "eight threads per head, four logits each");
    const int tid = static_cast<int>(threadIdx.x), hh = tid / 8, k0 = 4 * (tid % 8);
    float4* const row = reinterpret_cast<float4*>(sP + hh * kMmaChunk + k0);
    const float4 l4 = *row;
    const float l[4] = {l4.x, l4.y, l4.z, l4.w};
    float mx = -INFINITY;
#pragma unroll
    for (int k = 0; k < 4; ++k) mx = fmaxf(mx, k0 + k < n ? l[k] : -INFINITY);
#pragma unroll
    for (int o = 4; o >= 1; o /= 2) mx = fmaxf(mx, __shfl_xor_sync(kFullMask, mx, o));
    const float m_old = sM[hh];
    const float m_new = fmaxf(m_old, mx);
    float p[4], sum = 0.0f;
#pragma unroll
    for (int k = 0; k < 4; ++k) {
        p[k] = k0 + k < n && l[k] != -INFINITY ? expf(l[k] - m_new) : 0.0f;
        sum += p[k];
    }
#pragma unroll
    for (int o = 4; o >= 1; o /= 2) sum += __shfl_xor_sync(kFullMask, sum, o);
    const float alpha = m_new == -INFINITY ? 1.0f : expf(m_old - m_new);
    *row = make_float4(p[0], p[1], p[2], p[3]);  // entries past n: 0, as the logits step left them
    __syncwarp();  // the head's eight threads have read sM[hh] before the first overwrites it
    if (tid % 8 == 0) {
        sL[hh] = sL[hh] * alpha + sum;
        sM[hh] = m_new;
        sAlpha[hh] = alpha;
    }
}

// Scale gi of a staged fp8_v32 entry. A scale so large that its group's largest e4m3 value (448) would
// dequantize to infinity counts as poisoned (NaN): the kernel multiplies scales into sums and weights
// instead of dequantizing each value, and so could not otherwise reproduce the infinity (a scale no
// quantizer writes: the scale of any finite amax stays far below).
__device__ __forceinline__ float mma_entry_scale(const uint8_t* staged, const MmaRecordNumbers& r, int gi) {
    const float s = *reinterpret_cast<const float*>(staged + r.scales_offset + 4 * gi);
    return isfinite(__fmul_rn(s, 448.0f)) ? s : __uint_as_float(0x7fc00000u);
}

// One block per (token, block of kMmaHeads heads, split). Semantics: ops/sparse_attention.h; kBf16P: math bf16.
template <bool kModel1, bool kBf16P>
__global__ void __launch_bounds__(kMmaThreads, 2) sparse_attention_mma_kernel(MmaAttentionArgs ma) {
    wait_for_previous_kernel();
    const SparseAttentionArgs& a = ma.base;
    extern __shared__ float4 attention_smem[];
    __shared__ const uint8_t* s_data[kMmaChunk];
    __shared__ const uint8_t* s_scales[kMmaChunk];
    __shared__ int s_list[kMmaChunk];
    __shared__ int s_count[2];  // the entries gathered for chunks of even and odd index
    const MmaRecordNumbers& R = ma.rec;
    const MmaAttentionShape S = mma_attention_shape(a.qk_dim, R, kModel1);
    uint8_t* smem = reinterpret_cast<uint8_t*>(attention_smem);
    uint16_t* const sQ = reinterpret_cast<uint16_t*>(smem + S.q_off);    // [kMmaHeads][row] bf16
    uint16_t* const sKV = reinterpret_cast<uint16_t*>(smem + S.kv_off);  // [kMmaChunk][row] bf16
    uint8_t* const stage = smem + S.stage_off;                           // [kMmaChunk][stage_row] raw entries
    float* const sP = reinterpret_cast<float*>(smem + S.p_off);          // [kMmaHeads][kMmaChunk] logits, then p
    uint16_t* const sPh = reinterpret_cast<uint16_t*>(smem + S.ph_off);  // fp8_model1: [kMmaHeads][kMmaPRow] head terms of p
    uint16_t* const sPt = sPh + kMmaHeads * kMmaPRow;                    //   and tail terms
    float* const sScale = reinterpret_cast<float*>(smem + S.scale_off);  // fp8_v32: [n_groups][kMmaChunk]
    float* const sM = reinterpret_cast<float*>(smem + S.stats_off);
    float* const sL = sM + kMmaHeads;
    float* const sAlpha = sL + kMmaHeads;

    const int64_t split = blockIdx.x % a.split.splits, item = blockIdx.x / a.split.splits;
    const int64_t t = item / a.head_blocks;
    const int64_t h0 = (item % a.head_blocks) * kMmaHeads;
    const int nh = static_cast<int>(min(static_cast<int64_t>(kMmaHeads), a.n_heads - h0));
    const int tid = static_cast<int>(threadIdx.x), warp = tid / kWarp, lane = tid % kWarp, g = lane / 4, tq = lane % 4;
    const int Dk = a.qk_dim, Dv = a.v_dim;
    const int64_t total = a.main.width + a.extra.width;
    const int64_t begin = total * split / a.split.splits, end = total * (split + 1) / a.split.splits;

    // q rows as bf16 (the heads past nh zero), warp w taking heads w, w + 8, …; the running state empty.
    for (int hh = warp; hh < kMmaHeads; hh += kMmaWarps) {
        uint16_t* dst = sQ + hh * S.row;
        const auto* q = static_cast<const uint16_t*>(a.q) + t * a.q_token_stride + (h0 + hh) * a.q_head_stride;
        if (hh >= nh) {
            for (int i = 8 * lane; i < Dk; i += 8 * kWarp) *reinterpret_cast<uint4*>(dst + i) = make_uint4(0u, 0u, 0u, 0u);
        } else if (ma.q_vector_ok) {
#pragma unroll 3
            for (int i = 8 * lane; i < Dk; i += 8 * kWarp) *reinterpret_cast<uint4*>(dst + i) = __ldg(reinterpret_cast<const uint4*>(q + i));
        } else {
            for (int i = lane; i < Dk; i += kWarp) dst[i] = q[i];
        }
    }
    if (tid < kMmaHeads) {
        sM[tid] = -INFINITY;
        sL[tid] = 0.0f;
    }

    // The warp's output dims; fp8_v32: the group whose scale they share (−1: the bf16 tail, weight p_j alone).
    const int share = Dv / kMmaWarps, tiles = share / 8, d0 = warp * share;
    const int own_group = !kModel1 && d0 < R.quant_dim ? d0 / R.group : -1;
    float acc[2][kMmaMaxTiles][4] = {};
    const int mt_logit = warp / 4, nt_logit = warp % 4;

    // Iteration −1 only gathers and stages chunk 0 (one copy of the gather and staging code: the kernel's
    // code is fetched cold by every block, and its size is time at small batches).
    int64_t cursor = begin, n_rows = 0;
    int n = 0;
    for (int chunk = -1;; ++chunk) {
        if (chunk >= 0) {
            async_copy::wait_all();
            __syncthreads();  // the chunk's bytes are staged; the previous chunk's readers are done
            n = s_count[chunk & 1];
            if (n == 0) break;
            n_rows += n;
        }
        // Warp 0 first gathers the next chunk; then the chunk's entries as bf16 rows (zero past n), warp w
        // converting rows w, w + 8, …, and (fp8_v32) their scales.
        if (warp == 0) {
            const int filled = sparse_attention_gather(a, t, cursor, end, kMmaChunk, s_data, s_scales, s_list);
            if (lane == 0) s_count[(chunk + 1) & 1] = filled;
        }
        for (int r = warp; chunk >= 0 && r < kMmaChunk; r += kMmaWarps)
            mma_convert_row<kModel1>(stage + r * S.stage_row, R, Dk, r < n, sKV + r * S.row);
        if constexpr (!kModel1)
            for (int idx = tid; chunk >= 0 && idx < kMmaChunk * S.n_groups; idx += kMmaThreads) {
                const int r = idx % kMmaChunk, gi = idx / kMmaChunk;
                sScale[idx] = r < n ? mma_entry_scale(stage + r * S.stage_row, R, gi) : 0.0f;
            }
        __syncthreads();
        mma_stage_chunk(ma, S.stage_row, s_count[(chunk + 1) & 1], s_data, s_scales, stage);
        if (chunk < 0) continue;

        // Logits of heads 16·mt_logit … and entries 8·nt_logit … (fp8_v32: per group, scaled as added).
        {
            float l[4] = {0.0f, 0.0f, 0.0f, 0.0f};
            const uint16_t* qa = sQ + (16 * mt_logit + (lane & 15)) * S.row + (lane >> 4) * 8;
            const uint16_t* kb = sKV + (8 * nt_logit + (lane & 7)) * S.row + ((lane >> 3) & 1) * 8;
            const int key0 = 8 * nt_logit + 2 * tq;
            int k_scaled_end = 0;
            if constexpr (!kModel1) {
                k_scaled_end = R.quant_dim;
                for (int gi = 0; gi < S.n_groups; ++gi) {
                    float part[4] = {0.0f, 0.0f, 0.0f, 0.0f};
                    const int k_end = min((gi + 1) * R.group, R.quant_dim);
#pragma unroll 4
                    for (int k0 = gi * R.group; k0 < k_end; k0 += 16) {
                        uint32_t af[4], bf[2];
                        mma::ldmatrix_x4(af, qa + k0);
                        mma::ldmatrix_x2(bf, kb + k0);
                        mma::mma_16816<false>(part, af, bf[0], bf[1]);
                    }
                    const float s0 = sScale[gi * kMmaChunk + key0], s1 = sScale[gi * kMmaChunk + key0 + 1];
                    l[0] = fmaf(part[0], s0, l[0]);
                    l[1] = fmaf(part[1], s1, l[1]);
                    l[2] = fmaf(part[2], s0, l[2]);
                    l[3] = fmaf(part[3], s1, l[3]);
                }
            }
            // Dims whose values are exact bf16 as they stand: fp8_model1's all, fp8_v32's tail. Two chains.
            float l2[4] = {0.0f, 0.0f, 0.0f, 0.0f};
#pragma unroll 4
            for (int k0 = k_scaled_end; k0 < Dk; k0 += 32) {
                uint32_t af[4], bf[2];
                mma::ldmatrix_x4(af, qa + k0);
                mma::ldmatrix_x2(bf, kb + k0);
                mma::mma_16816<false>(l, af, bf[0], bf[1]);
                if (k0 + 16 < Dk) {
                    mma::ldmatrix_x4(af, qa + k0 + 16);
                    mma::ldmatrix_x2(bf, kb + k0 + 16);
                    mma::mma_16816<false>(l2, af, bf[0], bf[1]);
                }
            }
            // Entries past n weigh exactly 0 in P·V (the softmax step writes p only for the first n).
            const int h1 = 16 * mt_logit + g;
#pragma unroll
            for (int c = 0; c < 4; ++c) {
                const int key = key0 + (c & 1), h = h1 + 8 * (c >> 1);
                sP[h * kMmaChunk + key] = key < n ? __fmul_rn(a.scale, l[c] + l2[c]) : 0.0f;
            }
        }
        __syncthreads();
        mma_step_softmax(sP, sM, sL, sAlpha, n);
        __syncthreads();
        if constexpr (kModel1) {  // the weights as bf16 (kBf16P) or their two bf16 terms, once for every warp
            for (int idx = tid; idx < kMmaHeads * kMmaChunk / 2; idx += kMmaThreads) {
                const int h = idx / (kMmaChunk / 2), key = 2 * (idx % (kMmaChunk / 2));
                const float2 p = *reinterpret_cast<const float2*>(sP + h * kMmaChunk + key);
                if constexpr (kBf16P) {
                    *reinterpret_cast<uint32_t*>(sPh + h * kMmaPRow + key) = mma::pack_bf16x2(p.x, p.y);
                } else {
                    const mma::Bf16Split s0 = mma::split_bf16(p.x), s1 = mma::split_bf16(p.y);
                    *reinterpret_cast<uint32_t*>(sPh + h * kMmaPRow + key) = mma::pack_bf16x2(s0.head, s1.head);
                    *reinterpret_cast<uint32_t*>(sPt + h * kMmaPRow + key) = mma::pack_bf16x2(s0.tail, s1.tail);
                }
            }
            __syncthreads();
        }

        // acc = acc · alpha + P·V over the warp's dims; entries past n have p = 0 and zero values.
#pragma unroll
        for (int mt = 0; mt < 2; ++mt) {
            const float al0 = sAlpha[16 * mt + g], al1 = sAlpha[16 * mt + g + 8];
#pragma unroll
            for (int nt = 0; nt < kMmaMaxTiles; ++nt) {
                acc[mt][nt][0] *= al0;
                acc[mt][nt][1] *= al0;
                acc[mt][nt][2] *= al1;
                acc[mt][nt][3] *= al1;
            }
        }
#pragma unroll
        for (int ks = 0; ks < kMmaChunk / 16; ++ks) {
            uint32_t a_head[2][4], a_tail[2][4];
#pragma unroll
            for (int mt = 0; mt < 2; ++mt) {
                if constexpr (kModel1) {
                    const int off = (16 * mt + (lane & 15)) * kMmaPRow + 16 * ks + (lane >> 4) * 8;
                    mma::ldmatrix_x4(a_head[mt], sPh + off);
                    if constexpr (!kBf16P) mma::ldmatrix_x4(a_tail[mt], sPt + off);
                } else {
#pragma unroll
                    for (int q = 0; q < 4; ++q) {
                        const int h = 16 * mt + g + 8 * (q & 1), key = 16 * ks + 2 * tq + 8 * (q >> 1);
                        const float2 w = *reinterpret_cast<const float2*>(sP + h * kMmaChunk + key);
                        const float2 sc = own_group >= 0 ? *reinterpret_cast<const float2*>(sScale + own_group * kMmaChunk + key)
                                                         : make_float2(1.0f, 1.0f);
                        if constexpr (kBf16P) {
                            a_head[mt][q] = mma::bf16_weights_x2(w.x, w.y, sc.x, sc.y);
                        } else {
                            // |w·s| ≤ 448⁻¹ · FLT_MAX (mma_entry_scale): the head term stays finite, no tail check needed.
                            mma::split_bf16x2(w.x * sc.x, w.y * sc.y, a_head[mt][q], a_tail[mt][q]);
                        }
                    }
                }
            }
#pragma unroll
            for (int np = 0; np < kMmaMaxTiles / 2; ++np) {
                if (2 * np >= tiles) break;
                uint32_t b[4];
                mma::ldmatrix_x4_trans(b, sKV + (16 * ks + (lane & 7) + ((lane >> 3) & 1) * 8) * S.row + d0 + 16 * np +
                                              (lane >> 4) * 8);
#pragma unroll
                for (int mt = 0; mt < 2; ++mt) {
                    mma::mma_16816<false>(acc[mt][2 * np], a_head[mt], b[0], b[1]);
                    if constexpr (!kBf16P) mma::mma_16816<false>(acc[mt][2 * np], a_tail[mt], b[0], b[1]);
                    if (2 * np + 1 < tiles) {
                        mma::mma_16816<false>(acc[mt][2 * np + 1], a_head[mt], b[2], b[3]);
                        if constexpr (!kBf16P) mma::mma_16816<false>(acc[mt][2 * np + 1], a_tail[mt], b[2], b[3]);
                    }
                }
            }
        }
    }
    // The loop ends right after a barrier: sM and sL are complete, and no chunk buffer is read or staged any
    // more. The accumulators pass through shared memory, over sQ and sKV (kMmaHeads · v_dim floats fit their
    // 4 · kMmaHeads · row bytes: v_dim ≤ qk_dim), so that one compact loop writes them out. Written per
    // register tile, the division and the stores of the output were unrolled 64 times: most of the kernel's
    // code, fetched cold by every block (an instruction-fetch-bound kernel at small batches).
    float* const sAcc = reinterpret_cast<float*>(smem);
#pragma unroll
    for (int mt = 0; mt < 2; ++mt)
#pragma unroll
        for (int nt = 0; nt < kMmaMaxTiles; ++nt) {
            if (nt >= tiles) break;
            float* row_g = sAcc + (16 * mt + g) * Dv + d0 + 8 * nt + 2 * tq;
            *reinterpret_cast<float2*>(row_g) = make_float2(acc[mt][nt][0], acc[mt][nt][1]);
            *reinterpret_cast<float2*>(row_g + 8 * Dv) = make_float2(acc[mt][nt][2], acc[mt][nt][3]);
        }
    __syncthreads();
    sparse_attention_write_block(a, split, t, h0, nh, sAcc, sM, sL, n_rows);
}

// ---- sparse_attention on warpgroup tensor cores (wgmma): fp8 records, bf16 q, 64 heads a block ----
//
// The same contract, split-K, combine and sink handling as the kernels above, for the real shapes of both
// formats (DeepSeek-V4: fp8_model1, qk_dim = v_dim = 512; DeepSeek-V3.2 / Hy4: fp8_v32, qk_dim 576, v_dim 512;
// rope tail 64) and more than 32 heads (wgmma_attention_supported). One block per (token, 64 heads, split) of
// four warpgroups, specialized so that the records' conversion overlaps the tensor cores:
//   the producer (warpgroups 2 and 3, few registers): its first warp gathers each step's kWgEntries entries'
//     addresses two steps ahead; its other warps stage the raw records with cp.async (a ring of two stage
//     buffers, each waited for on an mbarrier); all its threads convert them once into bf16 rows (exactly,
//     as mma_entry_octet does) of a ring of two K buffers, in the 128-byte swizzle wgmma reads (wgmma.cuh), and
//     announce each on a "full" mbarrier with the step's entry count (0: the list is done);
//   the math warpgroups 0 and 1 (most registers) take each full K buffer:
//     1. q·Kᵀ (m64n32, q and the entries from shared memory): warpgroup w sums half of the dims — fp8_model1
//        dims [256w, 256w + 256); fp8_v32 the scale groups 2w, 2w + 1 (each an exact chain scaled by its
//        per-entry fp32 scale as it is added) and 32 of the 64 tail dims — and the two halves are exchanged
//        through shared memory, so that both hold the same fp32 logits (a + b in both: fp32 addition
//        commutes) and take the same online-softmax steps (mma_step_softmax's arithmetic, per row in registers);
//     2. P·V (m64n128, P from registers, V = the converted entries read MN-major): warpgroup w owns output
//        dims [256w, 256w + 256) in two n128 halves. The weights enter as in the mma.sync kernel: p_j
//        (fp8_model1) or p_j · s_jg (fp8_v32, g the half's scale group) split into two bf16 terms, or with
//        math bf16 (kBf16P) one term;
//     and hand the buffer back on its "empty" mbarrier. The running state stays in registers until the
//     epilogue, which passes it through shared memory to sparse_attention_write_block.
constexpr int kWgHeads = 64;                           // the m of every wgmma
constexpr int kWgEntries = 32;                         // entries per step: the n of q·Kᵀ, the k of P·V
constexpr int kWgMathThreads = 256;                    // warpgroups 0 and 1
constexpr int kWgProducerThreads = 256;                // warpgroups 2 and 3: two warps a scheduler convert
constexpr int kWgThreads = kWgMathThreads + kWgProducerThreads;
constexpr int kWgMathRegisters = 192, kWgProducerRegisters = 64;  // 256·192 + 256·64 ≤ 65536
constexpr int kWgVDim = 512;                           // each math warpgroup owns 256 output dims, two n128 halves
constexpr int kWgRopeDim = 64;
constexpr int kWgQSlabBytes = kWgHeads * 128;          // a slab (64 values) of q's 64 rows
constexpr int kWgKSlabBytes = kWgEntries * 128;        // a slab of a step's 32 entries
constexpr int kWgLogits = kWgEntries / 2;              // fp32 logits a math thread holds (the m64n32 D fragment)
constexpr int kWgExchangeFloats = kWgLogits * 128;     // a warpgroup's partial logits, [value][thread]
constexpr int kWgMathBarrier = 1, kWgProducerBarrier = 2;  // named barriers (0 is __syncthreads')
// How far a step's row max may exceed the row's running reference max before the accumulators are rescaled to
// it (natural-log units): an online softmax over a max that lags by less than this is the same quotient in exact
// arithmetic (ops/sparse_attention.h: a chunk's weights exp(l_j − M_chunk)), with weights of at most e^8 ≈ 2981
// instead of 1, so that accumulated values overflow fp32 from |V| ≈ 10^32 on instead of 10^35.
constexpr float kWgMaxSlack = 8.0f;
constexpr float kLog2e = 1.44269504088896341f, kLn2 = 0.693147180559945309f;
// 2^x by the multi-function unit (relative error within 2 ulp; 2^−inf = 0, subnormal results flushed to 0).
__device__ __forceinline__ float ex2_approx(float x) {
    float y;
    asm("ex2.approx.ftz.f32 %0, %1;\n" : "=f"(y) : "f"(x));
    return y;
}
static_assert(kWgMathThreads == kAttnThreads, "the block epilogue strides by kAttnWarps");
static_assert(kWgMathRegisters % 8 == 0 && kWgProducerRegisters % 8 == 0 &&
                  kWgMathThreads * kWgMathRegisters + kWgProducerThreads * kWgProducerRegisters <= 65536,
              "the register file holds the warpgroups' shares");

template <bool kModel1>
struct WgFormat {
    static constexpr int qk_dim = kModel1 ? 512 : 576;
    static constexpr int quant_dim = qk_dim - kWgRopeDim;  // e4m3 values, then the bf16 tail
    // An entry's bytes (ops/cache_record.h): its data part, one bulk copy; fp8_model1's scales, kept apart.
    static constexpr int data_bytes = kModel1 ? 576 : 656;
    static constexpr int scale_bytes = kModel1 ? 8 : 0;
    // Where a staged entry's scales and bf16 tail begin (the launcher's MmaRecordNumbers, fixed for the shapes
    // wgmma_attention_supported takes): fp8_model1 data (e4m3, tail) then its UE8M0 bytes; fp8_v32 data
    // (e4m3, four fp32 group scales, tail).
    static constexpr int scales_offset = kModel1 ? data_bytes : quant_dim;
    static constexpr int tail_offset = kModel1 ? quant_dim : quant_dim + 16;
};

struct WgAttentionShape {
    int stage_row = 0;  // bytes per staged raw entry (mma_attention_shape's)
    // Offsets from the block's 1024-byte aligned base (two of each ring: k_off and stage_off the first, the
    // second k_bytes / stage_bytes on); `bytes` includes the 1024 bytes of alignment slack.
    size_t q_off = 0, k_off = 0, k_bytes = 0, stage_off = 0, stage_bytes = 0, x_off = 0, scale_off = 0, stats_off = 0,
           bytes = 0;
};
__host__ __device__ inline WgAttentionShape wgmma_attention_shape(int qk_dim, const MmaRecordNumbers& r) {
    WgAttentionShape s;
    const size_t slabs = static_cast<size_t>(qk_dim / wgmma::kSlabValues);
    s.stage_row = (r.data_bytes + r.scale_bytes + 15) / 16 * 16;
    s.q_off = 0;
    s.k_off = slabs * kWgQSlabBytes;
    s.k_bytes = slabs * kWgKSlabBytes;
    s.stage_off = s.k_off + 2 * s.k_bytes;
    s.stage_bytes = static_cast<size_t>(kWgEntries) * s.stage_row;
    s.x_off = s.stage_off + 2 * s.stage_bytes;
    s.scale_off = s.x_off + 2 * 2 * static_cast<size_t>(kWgExchangeFloats) * 4;  // [step parity][warpgroup]
    s.stats_off = s.scale_off + 2 * static_cast<size_t>(kWgEntries) * 4 * 4;       // fp8_v32: [buffer][group][entry]
    s.bytes = s.stats_off + 2 * kWgHeads * 4 + wgmma::kAtomBytes;
    return s;
}

// The wgmma kernel's (token, 64-head) items, and the steps of kWgEntries list positions of each item.
int64_t wgmma_items(const SparseAttentionParams& p) { return p.n_tokens * ((p.n_heads + kWgHeads - 1) / kWgHeads); }
int64_t wgmma_steps(const SparseAttentionParams& p) { return (p.main.width + p.extra.width + kWgEntries - 1) / kWgEntries; }
// Whether sparse_attention_wgmma_kernel takes these params: the tensor-core kernel's, at the two real shapes,
// with more heads than one of the mma.sync kernel's blocks holds. It takes them at any amount of work: timed
// on one H100 against the mma.sync kernel (medians of 30 calls, L2 flushed, two interleaved rounds), it was
// the faster from a single item on: DeepSeek-V4 (640 list positions an item) at 1 item 20.8 µs against 22.5,
// at 4 items 23.2 against 27.1, at 8 items 28.3 against 51.6; DeepSeek-V3.2 (2048 positions, two items a
// token) at 1 token 26.4 µs against 33.1.
bool wgmma_attention_supported(const SparseAttentionParams& p) {
    if (!mma_attention_supported(p) || p.n_heads <= kMmaHeads || p.v_dim != kWgVDim || p.rope_dim != kWgRopeDim) return false;
    const CacheRecordLayout layout = p.layout(p.main.width > 0 ? p.main : p.extra);
    auto fits = [&](auto format) {  // fp8_v32's scales lie inside its data part
        using F = decltype(format);
        const int64_t apart = layout.format == CacheRecordFormat::fp8_model1 ? layout.scale_bytes() : 0;
        return p.qk_dim == F::qk_dim && layout.data_bytes() == F::data_bytes && apart == F::scale_bytes;
    };
    return layout.format == CacheRecordFormat::fp8_model1 ? fits(WgFormat<true>{}) : fits(WgFormat<false>{});
}

// Splits of each token's lists for the wgmma kernel (one block per multiprocessor): enough (token, head
// block) items to fill the 132 multiprocessors once, each split a whole number of steps; the fewest splits
// that take as many steps as the most the GPU allows.
int64_t wgmma_attention_splits(const SparseAttentionParams& p) {
    const int64_t items = wgmma_items(p), steps = wgmma_steps(p);
    if (items <= 0 || steps <= 1) return 1;
    const int64_t fit = std::max<int64_t>(1, std::min<int64_t>(kTargetBlocks / 2 / items, kMaxSplits));
    const int64_t steps_per_split = (steps + fit - 1) / fit;
    return (steps + steps_per_split - 1) / steps_per_split;
}
// List positions of each split (the last may hold fewer).
int64_t wgmma_split_positions(const SparseAttentionParams& p, int64_t splits) {
    return (wgmma_steps(p) + splits - 1) / splits * kWgEntries;
}

// The producer converts a step's staged entries into bf16 rows of the swizzled slabs of sK (wg_stage_step
// zero-fills the rows past its n entries, so that they convert to zeros); fp8_v32: their group scales into
// sScale [group][entry]. Producer thread i converts octet column i % 64 of rows i / 64 + 4k, so that its source
// offset and scale byte are fixed across the step and its rows' swizzle takes two values: the 64 columns are
// the quant_dim / 8 e4m3 octets, and for fp8_model1 the tail's eight 16-byte pieces after them.
template <bool kModel1>
__device__ __forceinline__ void wg_convert_step(const uint8_t* stage, int stage_row, const MmaRecordNumbers& R, int n,
                                                uint8_t* sK, float* sScale) {
    using F = WgFormat<kModel1>;
    constexpr int kColumns = 64, kQuantOctets = F::quant_dim / 8, kRowsAtOnce = kWgProducerThreads / kColumns;
    static_assert(kQuantOctets + (kModel1 ? 8 : 0) == kColumns, "64 columns a row");
    static_assert(kRowsAtOnce == wgmma::kSwizzleRows / 2, "row r0 + 4k swizzles as r0 (k even) or r0 + 4 (k odd)");
    const int pt = static_cast<int>(threadIdx.x) - kWgMathThreads;
    const int c = pt % kColumns, r0 = pt / kColumns;
    const uint8_t* const src = stage + r0 * stage_row;
    uint8_t* const row0 = sK + (c / 8) * kWgKSlabBytes + wgmma::swizzle_chunk(r0, c % 8);
    uint8_t* const row4 = sK + (c / 8) * kWgKSlabBytes + wgmma::swizzle_chunk(r0 + kRowsAtOnce, c % 8) - kRowsAtOnce * 128;
    auto put = [&](int k, uint4 v) { *reinterpret_cast<uint4*>((k % 2 ? row4 : row0) + kRowsAtOnce * k * 128) = v; };
    if (c < kQuantOctets) {
#pragma unroll
        for (int k = 0; k < kWgEntries / kRowsAtOnce; ++k) {
            const uint8_t* const row = src + kRowsAtOnce * k * stage_row;
            const uint32_t scale = kModel1 ? row[F::scales_offset + c / 8] : 0u;
            put(k, e4m3_octet_to_bf16<kModel1>(*reinterpret_cast<const uint2*>(row + 8 * c), scale));
        }
    } else {
#pragma unroll
        for (int k = 0; k < kWgEntries / kRowsAtOnce; ++k)
            put(k, *reinterpret_cast<const uint4*>(src + kRowsAtOnce * k * stage_row + F::tail_offset + 16 * (c - kQuantOctets)));
    }
    if constexpr (!kModel1) {
        // The bf16 tail (slab quant_dim / 64) in 16-byte pieces, one a thread, and one group scale each of the
        // first kWgEntries * 4 threads.
        constexpr int kTailPieces = kWgRopeDim * 2 / 16;
        static_assert(kWgEntries * kTailPieces == kWgProducerThreads && kWgEntries * 4 <= kWgProducerThreads,
                      "one piece a thread, one scale a thread");
        uint8_t* const tail_slab = sK + (F::quant_dim / wgmma::kSlabValues) * kWgKSlabBytes;
        const int r = pt / kTailPieces, piece = pt % kTailPieces;
        *reinterpret_cast<uint4*>(tail_slab + wgmma::swizzle_chunk(r, piece)) =
            *reinterpret_cast<const uint4*>(stage + r * stage_row + F::tail_offset + 16 * piece);
        if (pt < kWgEntries * 4) {
            const int gi = pt / kWgEntries, e = pt % kWgEntries;
            sScale[pt] = e < n ? mma_entry_scale(stage + e * stage_row, R, gi) : 0.0f;
        }
    }
}

// The producer stages a step's n gathered entries (their addresses in s_data / s_scales, published by the
// gathering warp before the producer's last barrier) and zero-fills the kWgEntries − n rows after them (a step
// that has entries): copier thread c (the threads of the other producer warps) copies 16-byte piece c % P of
// entries c / P + kEntriesAtOnce·i (P pieces an entry's data part, kEntriesAtOnce = ⌊copiers / P⌋ entries at
// once: a fixed piece a thread, no division in the loop); then (fp8_model1) thread e the 8-byte scales of
// entry e. The gathering warp copies none, its gathering being its share. Every producer thread then arrives
// on the stage buffer's barrier once its copies have landed, so that the barrier's phase completes when the
// whole step is staged. Views the contract allows but no cache pool makes (not 16-byte aligned) are copied
// byte by byte before the arrival.
template <bool kModel1>
__device__ __forceinline__ void wg_stage_step(bool async_ok, int stage_row, int n, const uint8_t* const* s_data,
                                              const uint8_t* const* s_scales, uint8_t* stage, uint32_t bar) {
    using F = WgFormat<kModel1>;
    constexpr int kCopiers = kWgProducerThreads - kWarp, kPieces = F::data_bytes / 16, kEntriesAtOnce = kCopiers / kPieces;
    static_assert(F::data_bytes % 16 == 0 && kEntriesAtOnce >= 1 && kWgEntries <= kCopiers,
                  "16-byte pieces; a copier per entry's scales");
    const int c = static_cast<int>(threadIdx.x) - kWgMathThreads - kWarp;  // < 0: the gathering warp
    const int rows = n > 0 ? kWgEntries : 0;  // a step without entries is not converted
    if (c >= 0 && async_ok) {
        // A zero-filled piece reads nothing: its source is any gathered entry.
        if (c < kEntriesAtOnce * kPieces) {
            // Unrolled, so that the entries' addresses are read from shared memory before the first copy.
            constexpr int kRounds = (kWgEntries + kEntriesAtOnce - 1) / kEntriesAtOnce;
            const int k = c % kPieces, e0 = c / kPieces;
#pragma unroll
            for (int r = 0; r < kRounds; ++r) {
                const int e = e0 + r * kEntriesAtOnce;
                if (e < rows)
                    async_copy::copy_zfill<16>(mma::smem_address(stage + e * stage_row + 16 * k),
                                               s_data[e < n ? e : 0] + 16 * k, e < n ? 16 : 0);
            }
        }
        if constexpr (kModel1)
            if (c < rows)
                async_copy::copy_zfill<F::scale_bytes>(mma::smem_address(stage + c * stage_row + F::data_bytes),
                                                       s_scales[c < n ? c : 0], c < n ? F::scale_bytes : 0);
    } else if (c >= 0) {
#pragma unroll 1
        for (int i = c; i < rows * F::data_bytes; i += kCopiers) {
            const int e = i / F::data_bytes, k = i % F::data_bytes;
            stage[e * stage_row + k] = e < n ? static_cast<uint8_t>(load_u8(s_data[e] + k)) : uint8_t{0};
        }
        if constexpr (kModel1) {
#pragma unroll 1
            for (int i = c; i < rows * F::scale_bytes; i += kCopiers) {
                const int e = i / F::scale_bytes, k = i % F::scale_bytes;
                stage[e * stage_row + F::data_bytes + k] = e < n ? static_cast<uint8_t>(load_u8(s_scales[e] + k)) : uint8_t{0};
            }
        }
    }
    if (async_ok)
        async_copy::mbarrier_arrive_on_copies(bar);
    else
        async_copy::mbarrier_arrive(bar);  // release: the bytes are visible to the threads that wait on the phase
}

// The math warpgroups load the block's q rows as bf16 into the swizzled slabs of sQ (the heads past nh zero),
// each thread's loads all in flight before its first store.
template <bool kModel1>
__device__ __forceinline__ void wg_load_q(const MmaAttentionArgs& ma, int64_t t, int64_t h0, int nh, uint8_t* sQ) {
    constexpr int kOctets = WgFormat<kModel1>::qk_dim / 8, kPerThread = kWgHeads * kOctets / kWgMathThreads;
    static_assert(kWgHeads * kOctets % kWgMathThreads == 0, "whole octets a thread");
    const SparseAttentionArgs& a = ma.base;
    uint4 v[kPerThread];
#pragma unroll
    for (int k = 0; k < kPerThread; ++k) {
        const int idx = static_cast<int>(threadIdx.x) + k * kWgMathThreads, hh = idx / kOctets, c = idx % kOctets;
        v[k] = make_uint4(0u, 0u, 0u, 0u);
        if (hh < nh) {
            const auto* q = static_cast<const uint16_t*>(a.q) + t * a.q_token_stride + (h0 + hh) * a.q_head_stride + 8 * c;
            if (ma.q_vector_ok) {
                v[k] = __ldg(reinterpret_cast<const uint4*>(q));
            } else {
                uint32_t w[4];
#pragma unroll
                for (int j = 0; j < 4; ++j) w[j] = static_cast<uint32_t>(q[2 * j]) | (static_cast<uint32_t>(q[2 * j + 1]) << 16);
                v[k] = make_uint4(w[0], w[1], w[2], w[3]);
            }
        }
    }
#pragma unroll
    for (int k = 0; k < kPerThread; ++k) {
        const int idx = static_cast<int>(threadIdx.x) + k * kWgMathThreads, hh = idx / kOctets, c = idx % kOctets;
        *reinterpret_cast<uint4*>(sQ + (c / 8) * kWgQSlabBytes + wgmma::swizzle_chunk(hh, c % 8)) = v[k];
    }
}

// The gathering warp's look-ahead into a token's list: the slots at list positions [pos, pos + kWgEntries),
// lane l holding positions pos + 32w + l in slot[w] (−1 past `end`). It is loaded right after a step is
// gathered, for the step after it, so that the next gather reads registers, not global memory.
constexpr int kWgWindowSlots = kWgEntries / kWarp;
struct SlotWindow {
    int64_t pos = -1;
    int32_t slot[kWgWindowSlots];
};
__device__ __forceinline__ void slot_window_load(SlotWindow& w, const SparseAttentionArgs& a, int64_t t, int64_t pos, int64_t end) {
    const int lane = threadIdx.x % kWarp;
    w.pos = pos;
#pragma unroll
    for (int half = 0; half < kWgWindowSlots; ++half) {
        const int64_t c = pos + kWarp * half + lane;
        const bool main = c < a.main.width;
        const SparseListArgs& l = main ? a.main : a.extra;
        w.slot[half] = c < end ? l.slots[t * l.slots_stride + (main ? c : c - a.main.width)] : -1;
    }
}

// sparse_attention_gather for the wgmma kernel's steps of kWgEntries, from the look-ahead window where it
// starts at the cursor (it is loaded synchronously otherwise: after −1 holes, or at the first step).
__device__ __forceinline__ int wg_gather(const SparseAttentionArgs& a, int64_t t, int64_t& cursor, int64_t end, SlotWindow& w,
                                         const uint8_t** s_data, const uint8_t** s_scales) {
    const int lane = threadIdx.x % kWarp;
    int filled = 0;
    while (filled < kWgEntries && cursor < end) {
        if (w.pos != cursor) slot_window_load(w, a, t, cursor, end);
        w.pos = -1;  // consumed
#pragma unroll
        for (int half = 0; half < kWgWindowSlots; ++half) {
            if (filled == kWgEntries || cursor >= end) break;
            const int64_t c0 = cursor, c = c0 + lane;
            const bool main = c < a.main.width;
            const SparseListArgs& l = main ? a.main : a.extra;
            const int64_t slot = w.slot[half];
            const bool valid = c < end && slot >= 0 && slot < l.rec.n_slots;
            const unsigned ballot = __ballot_sync(kFullMask, valid);
            const int count = __popc(ballot), take = min(count, kWgEntries - filled);
            const int rank = __popc(ballot & ((1u << lane) - 1u));
            if (valid && rank < take) {
                const AttnBlockPos bp = attn_block_pos(slot, l.rec.block_size);
                s_data[filled + rank] = attn_record_data(l.rec, bp);
                s_scales[filled + rank] = attn_record_scales(l.rec, bp);
            }
            filled += take;
            if (take < count) {  // the step is full: resume at the first valid entry not taken
                unsigned rest = ballot;
                for (int k = 0; k < take; ++k) rest &= rest - 1u;
                cursor = c0 + __ffs(static_cast<int>(rest)) - 1;
            } else {
                cursor = min(c0 + kWarp, end);
            }
        }
    }
    return filled;
}

// The logits' operands: k-step k of 16 values lies (k / 4) slabs + (k % 4) · 32 bytes from a descriptor's base
// (q's slabs hold 64 rows, a step's 32).
__host__ __device__ constexpr uint32_t wg_q_offset(int k) { return static_cast<uint32_t>((k / 4) * kWgQSlabBytes + (k % 4) * 32); }
__host__ __device__ constexpr uint32_t wg_k_offset(int k) { return static_cast<uint32_t>((k / 4) * kWgKSlabBytes + (k % 4) * 32); }
__device__ __forceinline__ uint64_t wg_logit_descriptor(uint32_t address) {
    return wgmma::sw128_descriptor(address, 16, wgmma::kAtomBytes);
}

// fp8_model1: issues warpgroup wg's half of a step's logits (one chain over its 16 k-steps of 16 dims, every
// value an exact bf16) as one wgmma group, without waiting for it: l is written once the group completes.
__device__ __forceinline__ void wg_issue_partial_logits_model1(const uint8_t* sQ, const uint8_t* sK, int wg,
                                                               float (&l)[kWgLogits]) {
    const uint64_t qd = wg_logit_descriptor(mma::smem_address(sQ) + wg * 4 * kWgQSlabBytes),
                   kd = wg_logit_descriptor(mma::smem_address(sK) + wg * 4 * kWgKSlabBytes);
    wgmma::pin(l);
    wgmma::fence();
    wgmma::for_each_index<16>([&](auto k) {
        constexpr int K = decltype(k)::value;
        wgmma::mma_ss_m64n32k16<wg_q_offset(K), wg_k_offset(K)>(l, qd, kd, K > 0);
    });
    wgmma::commit();
}

// fp8_v32: warpgroup wg's half of the step's logits (the D fragment of its rows), per scale group:
// l += s_jg · Σ_group q·e (the unscaled e4m3 values, exact products, fp32 sums), then the tail unscaled.
__device__ __forceinline__ void wg_partial_logits_v32(const uint8_t* sQ, const uint8_t* sK, const float* sScale, int wg,
                                                      float (&l)[kWgLogits]) {
    const uint32_t q_base = mma::smem_address(sQ), k_base = mma::smem_address(sK);
    // The warpgroup's 256 dims: 16 k-steps from slab 4·wg.
    const uint64_t qd = wg_logit_descriptor(q_base + wg * 4 * kWgQSlabBytes),
                   kd = wg_logit_descriptor(k_base + wg * 4 * kWgKSlabBytes);
    const int tq = threadIdx.x % 4;
    // The tail's 4 k-steps (slab 8): k-steps 2·wg, 2·wg + 1 of them.
    const uint64_t qt = wg_logit_descriptor(q_base + 8 * kWgQSlabBytes + 64 * wg),
                   kt = wg_logit_descriptor(k_base + 8 * kWgKSlabBytes + 64 * wg);
    float acc[kWgLogits];
#pragma unroll
    for (int i = 0; i < kWgLogits; ++i) l[i] = 0.0f;
    wgmma::for_each_index<3>([&](auto part_c) {  // the groups 2·wg, 2·wg + 1, then the tail
        constexpr int part = decltype(part_c)::value;
        wgmma::pin(acc);
        wgmma::fence();
        if constexpr (part < 2) {
            wgmma::for_each_index<8>([&](auto k) {
                constexpr int K = decltype(k)::value;
                wgmma::mma_ss_m64n32k16<wg_q_offset(8 * part + K), wg_k_offset(8 * part + K)>(acc, qd, kd, K > 0);
            });
        } else {
            wgmma::mma_ss_m64n32k16<0, 0>(acc, qt, kt, 0);
            wgmma::mma_ss_m64n32k16<32, 32>(acc, qt, kt, 1);
        }
        wgmma::commit();
        wgmma::wait<0>();
        wgmma::pin(acc);
#pragma unroll
        for (int j = 0; j < kWgLogits / 4; ++j) {
            float s0 = 1.0f, s1 = 1.0f;
            if constexpr (part < 2) {
                const float2 s = *reinterpret_cast<const float2*>(sScale + (2 * wg + part) * kWgEntries + 8 * j + 2 * tq);
                s0 = s.x;
                s1 = s.y;
            }
            l[4 * j + 0] = fmaf(acc[4 * j + 0], s0, l[4 * j + 0]);
            l[4 * j + 1] = fmaf(acc[4 * j + 1], s1, l[4 * j + 1]);
            l[4 * j + 2] = fmaf(acc[4 * j + 2], s0, l[4 * j + 2]);
            l[4 * j + 3] = fmaf(acc[4 * j + 3], s1, l[4 * j + 3]);
        }
    });
}

// The math warpgroups' named barrier (the producer goes on meanwhile), and the producer's.
__device__ __forceinline__ void wg_math_sync() { asm volatile("bar.sync %0, %1;\n" ::"n"(kWgMathBarrier), "n"(kWgMathThreads) : "memory"); }
__device__ __forceinline__ void wg_producer_sync() {
    asm volatile("bar.sync %0, %1;\n" ::"n"(kWgProducerBarrier), "n"(kWgProducerThreads) : "memory");
}

// One block per (token, block of kWgHeads heads, split). Semantics: ops/sparse_attention.h; kBf16P: math bf16.
template <bool kModel1, bool kBf16P>
__global__ void __launch_bounds__(kWgThreads, 1) sparse_attention_wgmma_kernel(MmaAttentionArgs ma, int64_t split_positions) {
    wait_for_previous_kernel();
    using F = WgFormat<kModel1>;
    const SparseAttentionArgs& a = ma.base;
    extern __shared__ float4 attention_smem[];
    __shared__ const uint8_t* s_data[2][kWgEntries];    // each stage buffer's gathered addresses (the producer's)
    __shared__ const uint8_t* s_scales[2][kWgEntries];
    __shared__ int s_stage_count[2];                      // and their count
    __shared__ int s_k_count[2];      // the entries of each full K buffer (0: the list is done)
    // The rings' barriers: a stage buffer's bytes have landed; a K buffer is converted (the producer's 128
    // arrivals) or read by both math warpgroups (their 256 arrivals).
    __shared__ uint64_t s_stage_full[2], s_k_full[2], s_k_empty[2];
    const MmaRecordNumbers& R = ma.rec;
    const WgAttentionShape S = wgmma_attention_shape(F::qk_dim, R);
    // The 1024-byte aligned base, by pointer arithmetic on the shared array (an address made from an integer
    // would be generic: every access through it a generic load or store).
    uint8_t* const base = reinterpret_cast<uint8_t*>(attention_smem) +
                          ((wgmma::kAtomBytes - mma::smem_address(attention_smem) % wgmma::kAtomBytes) % wgmma::kAtomBytes);
    uint8_t* const sQ = base + S.q_off;  // [slab][head] swizzled bf16 rows
    auto sK = [&](int b) { return base + S.k_off + b * S.k_bytes; };              // [slab][entry] swizzled bf16 rows
    auto stage = [&](int b) { return base + S.stage_off + b * S.stage_bytes; };  // [kWgEntries][stage_row] raw entries
    auto sScale = [&](int b) { return reinterpret_cast<float*>(base + S.scale_off) + b * 4 * kWgEntries; };  // fp8_v32
    float* const sX = reinterpret_cast<float*>(base + S.x_off);  // [step parity][warpgroup][kWgLogits][128] partial logits
    float* const sM = reinterpret_cast<float*>(base + S.stats_off);
    float* const sL = sM + kWgHeads;
    auto bar = [](uint64_t& b) { return mma::smem_address(&b); };

    const int64_t split = blockIdx.x % a.split.splits, item = blockIdx.x / a.split.splits;
    const int64_t t = item / a.head_blocks;
    const int64_t h0 = (item % a.head_blocks) * kWgHeads;
    const int nh = static_cast<int>(min(static_cast<int64_t>(kWgHeads), a.n_heads - h0));
    const int tid = static_cast<int>(threadIdx.x), warp = tid / kWarp, lane = tid % kWarp;
    // The warpgroup index, broadcast from lane 0 so that the compiler knows it is warp-uniform: the wgmma
    // descriptors built from it then live in uniform registers instead of being moved there before every wgmma.
    const int wg = __shfl_sync(kFullMask, tid / 128, 0);
    const int64_t total = a.main.width + a.extra.width;
    const int64_t begin = min(total, split * split_positions), end = min(total, begin + split_positions);

    if (tid == 0) {
        for (int b = 0; b < 2; ++b) {
            async_copy::mbarrier_init(bar(s_stage_full[b]), kWgProducerThreads);
            async_copy::mbarrier_init(bar(s_k_full[b]), kWgProducerThreads);
            async_copy::mbarrier_init(bar(s_k_empty[b]), kWgMathThreads);
        }
        async_copy::mbarrier_init_fence();
    }
    __syncthreads();  // the barriers are initialized

    if (wg >= 2) {
        // ---- the producer: gather two steps ahead, stage, convert into the K ring ----
        wgmma::shrink_registers<kWgProducerRegisters>();
        const bool gathers = warp == kWgMathThreads / kWarp;  // the producer's first warp
        SlotWindow window;
        int64_t cursor = begin;
        // The gathering warp: step j's addresses and count, published by the producer's next barrier.
        auto gather = [&](int j) {
            const int filled = wg_gather(a, t, cursor, end, window, s_data[j & 1], s_scales[j & 1]);
            if (lane == 0) s_stage_count[j & 1] = filled;
            if (cursor < end) slot_window_load(window, a, t, cursor, end);  // the next step's slots, in flight
        };
        // Every producer thread: step j's copies into stage buffer j % 2; its count.
        auto stage_step = [&](int j) {
            const int n = s_stage_count[j & 1];
            wg_stage_step<kModel1>(ma.async_ok, S.stage_row, n, s_data[j & 1], s_scales[j & 1], stage(j & 1),
                                   bar(s_stage_full[j & 1]));
            return n;
        };
        if (gathers) {
            gather(0);
            gather(1);
        }
        wg_producer_sync();  // steps 0 and 1 are gathered
        // Two steps ahead: a step's bytes travel during the two steps converted before it. Step j's addresses
        // and count are rewritten (gather(j + 2)) only after the gathering warp has waited for step j's stage
        // barrier, which every thread arrives on after reading them.
        int n_now = stage_step(0), n_next = stage_step(1);
        for (int j = 0;; ++j) {
            const int b = j & 1, n = n_now;
            if (j >= 2) async_copy::mbarrier_wait_parity(bar(s_k_empty[b]), static_cast<uint32_t>((j - 2) >> 1) & 1u);
            if (n > 0) {
                async_copy::mbarrier_wait_parity(bar(s_stage_full[b]), static_cast<uint32_t>(j >> 1) & 1u);
                wg_convert_step<kModel1>(stage(b), S.stage_row, R, n, sK(b), sScale(b));
            }
            if (tid == kWgMathThreads) s_k_count[b] = n;
            wgmma::fence_operands();  // the converted entries are read by wgmma
            async_copy::mbarrier_arrive(bar(s_k_full[b]));
            if (n == 0) break;
            if (gathers) gather(j + 2);
            wg_producer_sync();  // stage buffer b is converted; step j + 2 is gathered
            n_now = n_next;
            n_next = stage_step(j + 2);
        }
        return;
    }

    // ---- the math warpgroups ----
    wgmma::grow_registers<kWgMathRegisters>();
    const int wt = tid % 128, g = lane / 4, tq = lane % 4;
    const int row0 = 16 * (warp % 4) + g;  // the thread's two rows (heads h0 + row0, h0 + row0 + 8)
    wg_load_q<kModel1>(ma, t, h0, nh, sQ);
    wgmma::fence_operands();  // q is read by wgmma
    wg_math_sync();

    float o[2][64];  // output dims [256·wg + 128·half, + 128) of rows row0, row0 + 8: two m64n128 D fragments
#pragma unroll
    for (int h = 0; h < 2; ++h)
#pragma unroll
        for (int i = 0; i < 64; ++i) o[h][i] = 0.0f;
    float m_run[2] = {-INFINITY, -INFINITY}, l_run[2] = {0.0f, 0.0f};  // l_run: this thread's columns only

    // Math bf16 takes its weights as exp2 of log2-scaled logits (one ex2.approx each, within 2 ulp: far below the
    // weights' bf16 rounding), so that m_run and the slack are in log2 units until the epilogue; math f32 takes
    // expf of natural ones.
    const float logit_scale = kBf16P ? a.scale * kLog2e : a.scale, slack = kBf16P ? kWgMaxSlack * kLog2e : kWgMaxSlack;
    auto weight = [](float x) {
        if constexpr (kBf16P) return ex2_approx(x);
        else return expf(x);
    };

    // Step j's K buffer is converted: its entry count (0: the list is done).
    auto wait_k_full = [&](int j) {
        async_copy::mbarrier_wait_parity(bar(s_k_full[j & 1]), static_cast<uint32_t>(j >> 1) & 1u);
        return s_k_count[j & 1];
    };
    // fp8_model1 issues step j + 1's logits right behind step j's P·V, so that the tensor cores run both in one
    // burst and the logits are ready when step j + 1 begins (one wgmma wait a step instead of two). l holds them
    // from their issue to that wait.
    float l[kWgLogits];
    int n = wait_k_full(0);
    if constexpr (kModel1)
        if (n > 0) wg_issue_partial_logits_model1(sQ, sK(0), wg, l);
    int64_t n_rows = 0;
    for (int j = 0; n > 0; ++j) {
        const int b = j & 1;
        n_rows += n;
        const uint8_t* const k_rows = sK(b);
        const float* const scales = sScale(b);

        // Logits: this warpgroup's half, exchanged, summed in the same order by both.
        if constexpr (kModel1) {
            wgmma::wait<0>();
            wgmma::pin(l);
        } else {
            wg_partial_logits_v32(sQ, k_rows, scales, wg, l);
        }
        float* const mine = sX + (2 * b + wg) * kWgExchangeFloats;
        const float* const other = sX + (2 * b + 1 - wg) * kWgExchangeFloats;
#pragma unroll
        for (int i = 0; i < kWgLogits; ++i) mine[i * 128 + wt] = l[i];
        wg_math_sync();  // (the other parity's halves, written two steps on, are read by then)
#pragma unroll
        for (int i = 0; i < kWgLogits; ++i) {
            const float x = other[i * 128 + wt];
            l[i] = wg == 0 ? l[i] + x : x + l[i];
        }

        // The online-softmax step of rows row0 (r = 0) and row0 + 8 (r = 1): their 32 logits lie in the four
        // threads of a quad, l[4j + 2r + e] at column 8j + 2·tq + e. Columns past n weigh exactly 0.
        float alpha[2];
#pragma unroll
        for (int r = 0; r < 2; ++r) {
            float mx = -INFINITY;
#pragma unroll
            for (int jj = 0; jj < kWgLogits / 4; ++jj)
#pragma unroll
                for (int e = 0; e < 2; ++e) {
                    float& x = l[4 * jj + 2 * r + e];
                    x = 8 * jj + 2 * tq + e < n ? __fmul_rn(logit_scale, x) : -INFINITY;
                    mx = fmaxf(mx, x);
                }
            mx = fmaxf(mx, __shfl_xor_sync(kFullMask, mx, 1));
            mx = fmaxf(mx, __shfl_xor_sync(kFullMask, mx, 2));
            // The weights' reference moves to the new max only when that exceeds it by more than
            // kWgMaxSlack (or it is still −inf); otherwise the weights exp(x − m_run) stay ≤ e^kWgMaxSlack and
            // the accumulators keep their scale, so most steps skip the rescale below.
            const float m_new = mx > m_run[r] + slack || m_run[r] == -INFINITY ? fmaxf(m_run[r], mx) : m_run[r];
            float sum = 0.0f;
#pragma unroll
            for (int jj = 0; jj < kWgLogits / 4; ++jj)
#pragma unroll
                for (int e = 0; e < 2; ++e) {
                    float& x = l[4 * jj + 2 * r + e];
                    const float p = weight(x - m_new);  // computed unconditionally: a select, not a branch
                    x = x != -INFINITY ? p : 0.0f;
                    sum += x;
                }
            alpha[r] = m_new == -INFINITY ? 1.0f : weight(m_run[r] - m_new);
            l_run[r] = l_run[r] * alpha[r] + sum;
            m_run[r] = m_new;
        }
        if (__any_sync(kFullMask, alpha[0] != 1.0f || alpha[1] != 1.0f)) {  // rarely past the first step
#pragma unroll
            for (int h = 0; h < 2; ++h)
#pragma unroll
                for (int jj = 0; jj < 16; ++jj) {
                    o[h][4 * jj + 0] *= alpha[0];
                    o[h][4 * jj + 1] *= alpha[0];
                    o[h][4 * jj + 2] *= alpha[1];
                    o[h][4 * jj + 3] *= alpha[1];
                }
        }

        // acc += P·V over the warpgroup's dims, 16 entries a k-step. The weights per k-step ks and half h
        // (fp8_model1: one set serves both halves) as bf16 (kBf16P) or as their two bf16 terms: the A fragment of
        // k-step ks is the logit registers of n-tiles 2ks, 2ks + 1. All are built before the first P·V
        // instruction, so that the instructions issue back to back.
        constexpr int kPairs = kModel1 ? 1 : 2, kTerms = kBf16P ? 1 : 2;
        uint32_t a_w[kTerms][kWgEntries / 16][kPairs][4];
#pragma unroll
        for (int ks = 0; ks < kWgEntries / 16; ++ks)
#pragma unroll
            for (int h = 0; h < kPairs; ++h) {
                float w[8], s[8];
#pragma unroll
                for (int i = 0; i < 8; ++i) w[i] = l[8 * ks + i], s[i] = 1.0f;
                if constexpr (!kModel1) {  // the scales of the half's group s_jg, for the weights p_j · s_jg
                    const float* sc = scales + (2 * wg + h) * kWgEntries + 16 * ks + 2 * tq;
                    const float2 s_lo = *reinterpret_cast<const float2*>(sc), s_hi = *reinterpret_cast<const float2*>(sc + 8);
                    s[0] = s_lo.x, s[1] = s_lo.y, s[2] = s_lo.x, s[3] = s_lo.y;
                    s[4] = s_hi.x, s[5] = s_hi.y, s[6] = s_hi.x, s[7] = s_hi.y;
                }
#pragma unroll
                for (int q = 0; q < 4; ++q) {
                    if constexpr (kBf16P)
                        a_w[0][ks][h][q] = mma::bf16_weights_x2(w[2 * q], w[2 * q + 1], s[2 * q], s[2 * q + 1]);
                    else
                        mma::split_bf16x2(w[2 * q] * s[2 * q], w[2 * q + 1] * s[2 * q + 1], a_w[0][ks][h][q],
                                          a_w[kTerms - 1][ks][h][q]);
                }
            }
        // V of the warpgroup's dims: half h at 2h slabs on, k-step ks 16 entries (two swizzle atoms) on.
        const uint64_t v_desc = wgmma::sw128_descriptor(mma::smem_address(k_rows + 4 * wg * kWgKSlabBytes), kWgKSlabBytes,
                                                        wgmma::kAtomBytes);
        wgmma::pin(o[0]);
        wgmma::pin(o[1]);
#pragma unroll
        for (int term = 0; term < kTerms; ++term)
#pragma unroll
            for (int ks = 0; ks < kWgEntries / 16; ++ks)
#pragma unroll
                for (int h = 0; h < kPairs; ++h) wgmma::pin(a_w[term][ks][h]);
        wgmma::fence();
        wgmma::for_each_index<kWgEntries / 16>([&](auto ks_c) {
            constexpr int ks = decltype(ks_c)::value;
            wgmma::for_each_index<2>([&](auto h_c) {
                constexpr int h = decltype(h_c)::value, f = kModel1 ? 0 : h;
                constexpr uint32_t off = 2 * h * kWgKSlabBytes + ks * 16 * 128;
                wgmma::for_each_index<kTerms>([&](auto term_c) {
                    wgmma::mma_rs_m64n128k16_bt<off>(o[h], a_w[decltype(term_c)::value][ks][f], v_desc, 1);
                });
            });
        });
        wgmma::commit();
        int n_next = 0;
        if constexpr (kModel1) {
            n_next = wait_k_full(j + 1);
            if (n_next > 0) wg_issue_partial_logits_model1(sQ, sK(b ^ 1), wg, l);
        }
        if (kModel1 && n_next > 0)
            wgmma::wait<1>();  // P·V is complete (the groups complete in order); the next logits may not be
        else
            wgmma::wait<0>();
        wgmma::pin(o[0]);
        wgmma::pin(o[1]);
        async_copy::mbarrier_arrive(bar(s_k_empty[b]));  // this thread's reads of the buffer are done
        if constexpr (!kModel1) n_next = wait_k_full(j + 1);
        n = n_next;
    }

    // Each row's sum from its quad; then the state through shared memory (over sQ and the K ring: every wgmma
    // of both math warpgroups is complete once they meet, and the producer has converted its last step) to
    // the block epilogue.
#pragma unroll
    for (int r = 0; r < 2; ++r) {
        l_run[r] += __shfl_xor_sync(kFullMask, l_run[r], 1);
        l_run[r] += __shfl_xor_sync(kFullMask, l_run[r], 2);
    }
    wg_math_sync();
    float* const sAcc = reinterpret_cast<float*>(base);  // [kWgHeads][kWgVDim]
    static_assert(kWgHeads * kWgVDim * 4 <= 8 * (kWgQSlabBytes + 2 * kWgKSlabBytes), "the accumulators fit over q and the K ring");
#pragma unroll
    for (int h = 0; h < 2; ++h)
#pragma unroll
        for (int jj = 0; jj < 16; ++jj) {
            float* dst = sAcc + row0 * kWgVDim + 256 * wg + 128 * h + 8 * jj + 2 * tq;
            *reinterpret_cast<float2*>(dst) = make_float2(o[h][4 * jj + 0], o[h][4 * jj + 1]);
            *reinterpret_cast<float2*>(dst + 8 * kWgVDim) = make_float2(o[h][4 * jj + 2], o[h][4 * jj + 3]);
        }
    if (wg == 0 && tq == 0) {
        // The epilogue's maxima in natural units: the weights exp2(x − m) are exp(x·ln2 − m·ln2).
        sM[row0] = kBf16P ? m_run[0] * kLn2 : m_run[0];
        sL[row0] = l_run[0];
        sM[row0 + 8] = kBf16P ? m_run[1] * kLn2 : m_run[1];
        sL[row0 + 8] = l_run[1];
    }
    wg_math_sync();
    sparse_attention_write_block(a, split, t, h0, nh, sAcc, sM, sL, n_rows);
}

struct SparseCombineArgs {
    const float* acc = nullptr;
    const float* stats = nullptr;
    const float* sink = nullptr;
    void* out = nullptr;
    int64_t splits = 1, n_heads = 0, out_token_stride = 0, out_head_stride = 0;
    int v_dim = 0;
    bool out_bf16 = false;
};

// The merge of the splits of each (token, head) row (attention_combine), then the cast (once).
template <int kSlabs>
__global__ void __launch_bounds__(combine_threads(kSlabs)) sparse_attention_combine_kernel(SparseCombineArgs c,
                                                                                               CombineShape shape) {
    wait_for_previous_kernel();  // the splits' states (launched after the attention kernel: dependent_launch.cuh)
    attention_combine<kSlabs>(shape, c.stats, c.acc, c.splits, c.v_dim, c.sink, c.n_heads,
                                  [&](int64_t row, int i, float o) {
                                      const int64_t t = row / c.n_heads, h = row % c.n_heads;
                                      store_act(c.out, c.out_bf16, t * c.out_token_stride + h * c.out_head_stride + i, o);
                                  });
}

SparseListArgs sparse_list_args(const SparseAttentionParams& p, const SparseKvList& l) {
    SparseListArgs s;
    s.width = l.width;
    if (l.width == 0) return s;  // absent: never read (the gather's positions exclude it)
    s.rec = make_attn_record(l.cache, p.layout(l), l.n_slots);
    s.slots = l.slots;
    s.slots_stride = l.slots_stride;
    return s;
}

// Splits of each token's lists: the fp32 kernel's (attention_splits), the wgmma kernel's
// (wgmma_attention_splits), or for the mma.sync kernel enough (token, head block) items to fill the GPU, each
// split at least one chunk.
int64_t sparse_attention_splits(const SparseAttentionParams& p) {
    const int64_t positions = p.main.width + p.extra.width;
    if (wgmma_attention_supported(p)) return wgmma_attention_splits(p);
    if (!mma_attention_supported(p)) return attention_splits(p.n_tokens, p.n_heads, positions);
    const int64_t base = p.n_tokens * ((p.n_heads + kMmaHeads - 1) / kMmaHeads);
    if (base <= 0 || base >= kTargetBlocks || positions <= kMmaMinSplitPositions) return 1;
    const int64_t s = std::min((kTargetBlocks + base - 1) / base, (positions + kMmaMinSplitPositions - 1) / kMmaMinSplitPositions);
    return std::max<int64_t>(1, std::min(s, kMaxSplits));
}

// ======================================= qsa_sparse_gqa =======================================

struct QsaGqaArgs {
    const void* q = nullptr;
    const void* gate = nullptr;
    void* out = nullptr;
    const uint8_t* kv_base = nullptr;
    int64_t kv_block_bytes = 0, kv_block_size = 1, kv_entry_bytes = 0;
    const int32_t* block_table = nullptr;
    const int32_t* token_request = nullptr;
    int64_t n_requests = 0, block_table_stride = 0;
    const int32_t* indices = nullptr;
    int64_t n_indices = 0, index_row_stride = 0;
    int64_t n_heads = 0, n_kv_heads = 1, group = 1;  // group: query heads per KV head
    int64_t q_token_stride = 0, q_head_stride = 0, gate_token_stride = 0, gate_head_stride = 0;
    int64_t out_token_stride = 0, out_head_stride = 0;
    int64_t head_blocks = 1;  // per KV head
    SplitOut split;
    float scale = 1.0f;
    int head_dim = 0, heads_per_block = 1, chunk = kMaxChunk;
    bool kv_ok = false;  // the kv view's geometry is usable (validate_paged_view's conditions)
    bool q_bf16 = false, kv_bf16 = false, gate_bf16 = false, out_bf16 = false, p_bf16 = false;
    bool q_vector_ok = false, gate_vector_ok = false;  // the rows 16-byte aligned (the tensor-core kernel's loads)
};

// The address of a listed position, in two steps (the tensor-core kernel issues them rounds apart):
// qsa_gqa_block_id reads the position's block-table entry, −1 for a position that is not addressable (any
// negative one, a block past the table row: block_table_stride); qsa_gqa_entry then gives the entry's
// bytes, nullptr for a block id < 0 (released). req must lie in [0, n_requests) and the view be usable
// (kv_ok): the callers check both. A block id beyond the cache cannot be detected here (neither
// BlockTables nor the view carries the cache's block count).
__device__ __forceinline__ int32_t qsa_gqa_block_id(const QsaGqaArgs& a, int64_t req, int64_t pos) {
    if (pos < 0) return -1;
    const AttnBlockPos bp = attn_block_pos(pos, a.kv_block_size);
    return bp.block < a.block_table_stride ? a.block_table[req * a.block_table_stride + bp.block] : -1;
}
__device__ __forceinline__ const uint8_t* qsa_gqa_entry(const QsaGqaArgs& a, int64_t pos, int32_t id) {
    if (id < 0) return nullptr;
    return a.kv_base + id * a.kv_block_bytes + attn_block_pos(pos, a.kv_block_size).entry * a.kv_entry_bytes;
}
// Whether token t's request may be addressed at all: a token_request outside [0, n_requests) (which
// check_indices would have refused) or an unusable kv view gives a row with no entry (0).
__device__ __forceinline__ bool qsa_gqa_request_ok(const QsaGqaArgs& a, int64_t req) {
    return a.kv_ok && req >= 0 && req < a.n_requests;
}

// Warp 0 gathers the next up to `chunk` valid entries of token t's index row in positions [cursor, end): the
// addresses of their kv entries. Returns the rows gathered (0: exhausted). A position of −1 is skipped (the
// contract), and so is every position qsa_gqa_block_id and qsa_gqa_entry refuse.
__device__ __forceinline__ int qsa_gqa_gather(const QsaGqaArgs& a, int64_t t, int64_t req, int64_t& cursor, int64_t end,
                                              int chunk, const uint8_t** s_rows) {
    const int lane = threadIdx.x % kWarp;
    if (!qsa_gqa_request_ok(a, req)) return 0;
    int filled = 0;
    while (filled < chunk && cursor < end) {
        const int64_t c = cursor + lane;
        const uint8_t* row = nullptr;
        if (c < end) {
            const int64_t pos = a.indices[t * a.index_row_stride + c];
            row = qsa_gqa_entry(a, pos, qsa_gqa_block_id(a, req, pos));
        }
        const bool valid = row != nullptr;
        const unsigned ballot = __ballot_sync(kFullMask, valid);
        const int count = __popc(ballot);
        const int take = min(count, chunk - filled);
        const int rank = __popc(ballot & ((1u << lane) - 1u));
        if (valid && rank < take) s_rows[filled + rank] = row;
        if (take < count) {
            unsigned rest = ballot;
            for (int k = 0; k < take; ++k) rest &= rest - 1u;
            cursor += __ffs(static_cast<int>(rest)) - 1;
        } else {
            cursor += kWarp;
        }
        filled += take;
    }
    return filled;
}

// y from o and the gate value gv (qsa_sparse_gqa.h §4.8, §9 item 6; a.gate == nullptr: no gate, gv unused):
//   math f32:  y = o / (1 + exp(−gv))         (ref: o · σ(gate) as one quotient)
//   math bf16: y = bf16(bf16(o) · bf16(σ(gv))), σ in fp32 (ref: double, then rounded: within a bf16 ulp)
// An empty row (o = 0) goes through the gate too (0 · σ), as in ref: a NaN gate still gives NaN there.
__device__ __forceinline__ float qsa_gqa_gated(const QsaGqaArgs& a, float o, float gv) {
    if (a.p_bf16) {
        const float ob = round_bf16(o);
        if (!a.gate) return ob;
        const float s = round_bf16(__fdiv_rn(1.0f, __fadd_rn(1.0f, expf(-gv))));
        return round_bf16(__fmul_rn(ob, s));  // the product of two bf16 values is exact in fp32
    }
    return a.gate ? __fdiv_rn(o, __fadd_rn(1.0f, expf(-gv))) : o;
}
// Output (t, h, i) from o, its gate value read from a.gate.
__device__ __forceinline__ void qsa_gqa_store(const QsaGqaArgs& a, int64_t t, int64_t h, int i, float o) {
    const float gv = a.gate ? load_act(a.gate, a.gate_bf16, t * a.gate_token_stride + h * a.gate_head_stride + i) : 0.0f;
    store_act(a.out, a.out_bf16, t * a.out_token_stride + h * a.out_head_stride + i, qsa_gqa_gated(a, o, gv));
}

// One block per (token, KV head, block of that KV head's query heads, split). Semantics: ops/qsa_sparse_gqa.h.
__global__ void __launch_bounds__(kAttnThreads) qsa_sparse_gqa_kernel(QsaGqaArgs a) {
    wait_for_previous_kernel();
    extern __shared__ float4 attention_smem[];
    __shared__ const uint8_t* s_rows[kMaxChunk];
    __shared__ int s_count;
    const int HB = a.heads_per_block, C = a.chunk, D = a.head_dim;
    float* sQ = reinterpret_cast<float*>(attention_smem);
    float* sK = sQ + HB * D;
    float* sV = sK + C * D;
    float* sAcc = sV + C * D;
    float* sP = sAcc + HB * D;
    float* sM = sP + HB * C;
    float* sL = sM + HB;
    float* sAlpha = sL + HB;

    const int64_t split = blockIdx.x % a.split.splits, block = blockIdx.x / a.split.splits;
    const int64_t item = block / a.head_blocks;  // t · n_kv_heads + g
    const int64_t t = item / a.n_kv_heads, g = item % a.n_kv_heads;
    const int64_t first = (block % a.head_blocks) * HB;  // within the group
    const int64_t h0 = g * a.group + first;               // consecutive query heads share KV head g (§4.7)
    const int nh = static_cast<int>(min(static_cast<int64_t>(HB), a.group - first));
    const int warp = threadIdx.x / kWarp, lane = threadIdx.x % kWarp;
    const int64_t req = a.token_request[t];
    const int64_t begin = a.n_indices * split / a.split.splits, end = a.n_indices * (split + 1) / a.split.splits;

    for (int hh = 0; hh < nh; ++hh) {
        const int64_t qo = t * a.q_token_stride + (h0 + hh) * a.q_head_stride;
        for (int i = threadIdx.x; i < D; i += kAttnThreads) sQ[hh * D + i] = load_act(a.q, a.q_bf16, qo + i);
    }
    for (int idx = threadIdx.x; idx < nh * D; idx += kAttnThreads) sAcc[idx] = 0.0f;
    if (static_cast<int>(threadIdx.x) < nh) {
        sM[threadIdx.x] = -INFINITY;  // no sink (§4.7)
        sL[threadIdx.x] = 0.0f;
    }

    // KV head g's K and V inside an entry [n_kv_heads, 2, head_dim] (qsa_sparse_gqa.h "KV entry layout").
    const int64_t elem = a.kv_bf16 ? 2 : 4;
    const int64_t k_off = 2 * g * D * elem, v_off = (2 * g + 1) * D * elem;
    int64_t cursor = begin, n_rows = 0;
    for (;;) {
        __syncthreads();
        if (warp == 0) {
            const int filled = qsa_gqa_gather(a, t, req, cursor, end, C, s_rows);
            if (lane == 0) s_count = filled;
        }
        __syncthreads();
        const int n = s_count;
        if (n == 0) break;
        n_rows += n;
        for (int r = warp; r < n; r += kAttnWarps) {
            const uint8_t* row = s_rows[r];
#pragma unroll 4
            for (int i = lane; i < D; i += kWarp) {
                sK[r * D + i] = load_plain_le(row + k_off, a.kv_bf16, i);
                sV[r * D + i] = load_plain_le(row + v_off, a.kv_bf16, i);
            }
        }
        __syncthreads();
        attention_step_logits(sQ, sK, D, D, nh, n, C, a.scale, sP);
        __syncthreads();
        attention_step_softmax(sP, sM, sL, sAlpha, nh, n, C, a.p_bf16);
        __syncthreads();
        attention_step_accumulate(sAcc, sP, sAlpha, sV, D, D, nh, n, C);
    }

    if (a.split.splits > 1) {
        attention_write_split(a.split, split, t * a.n_heads + h0, nh, D, sAcc, sM, sL, n_rows);
        return;
    }
    // o = acc / Σp (0 for a row with no valid entry, §4.6, and only there), then the gate.
    for (int idx = threadIdx.x; idx < nh * D; idx += kAttnThreads) {
        const int hh = idx / D, i = idx - hh * D;
        // With no sink the merge of one state is acc / L (M = the running max): when every logit was −inf,
        // L = 0 and acc = 0 and the quotient is NaN, as in ref.
        const float o = n_rows > 0 ? __fdiv_rn(sAcc[idx], sL[hh]) : 0.0f;
        qsa_gqa_store(a, t, h0 + hh, i, o);
    }
}

// The merge of the splits of each (token, query head) row (attention_combine, no sink), then the gate.
template <int kSlabs>
__global__ void __launch_bounds__(combine_threads(kSlabs)) qsa_sparse_gqa_combine_kernel(QsaGqaArgs a,
                                                                                             CombineShape shape) {
    wait_for_previous_kernel();  // the splits' states (launched after the attention kernel: dependent_launch.cuh)
    attention_combine<kSlabs>(shape, a.split.stats, a.split.acc, a.split.splits, a.head_dim, nullptr, a.n_heads,
                      [&](int64_t row, int i, float o) { qsa_gqa_store(a, row / a.n_heads, row % a.n_heads, i, o); });
}

// ------------------------------- tensor-core sparse GQA -------------------------------
//
// qsa_sparse_gqa_mma_kernel takes bf16 q and KV with bf16 math (the deployed profile), head_dim 32, 64, 128
// or 256 (qsa_gqa_mma_shapes), views whose entries are 16-byte aligned and a bf16 gate or none
// (qsa_gqa_mma_operands); other params run qsa_sparse_gqa_kernel with the same splits. One block per (token,
// KV head, block of up to 16 of its query heads, split), as qsa_sparse_gqa_kernel, but its four warp pairs
// stream disjoint parts of the split on their own, each pair with its own online softmax, and merge only at
// the end (split-K inside the block: the same quotient in exact arithmetic, ops/qsa_sparse_gqa.h):
//   * in round r pair p takes list positions begin + 64·r + 16·p + [0, 16): one k-step of P·V. A position
//     that is −1 (or out of contract, qsa_gqa_block_id) is a zero row that weighs exactly 0: no compaction,
//     QSA's rows are dense (ops/qsa_expand.h puts the −1 at the end);
//   * each entry's K and V of the KV head (contiguous: 2 · head_dim bf16 values) go by one bulk copy into a
//     three-slot ring of the pair's own, each slot with its own mbarrier: no block barrier inside the loop;
//   * the two warps of a pair split the head dim: each computes the logits' partial dot over its half,
//     they add the halves through shared memory (the same sum, in the same order, in both), both run the
//     same softmax, and each owns its half of the output dims. Two warps per scheduler hide each other's
//     latencies, where one warp with the whole dim would wait on its own dependent instructions;
//   * the addresses are pipelined in registers: round r + 3's block-table entry and round r + 4's position
//     are loaded while round r computes, so no dependent global load stands between two stages' copies;
//   * S = Q·Kᵀ for 16 heads × 16 entries on tensor cores (exact bf16 products, fp32 sums), the online
//     softmax on the accumulator registers, P = bf16(p) straight from them as the A operand of P·V (the
//     sum L takes p unrounded: math bf16), fp32 accumulators for 16 heads × head_dim / 2 per warp.
// The smem holds q (and, without splits, the gate), [16][head_dim + pad] bf16 each, and the pairs' rings,
// [4][3][16][2·head_dim + pad] bf16, whose space the final merge reuses for the pairs' fp32 accumulators.
constexpr int kGqaPairs = 4;
constexpr int kGqaWarps = 2 * kGqaPairs;
constexpr int kGqaThreads = kGqaWarps * kWarp;
constexpr int kGqaHeads = 16;    // query heads per block: one m-tile
constexpr int kGqaEntries = 16;  // entries per pair and round: one k-step of P·V
constexpr int kGqaStages = 3;
constexpr int64_t kGqaRound = kGqaPairs * kGqaEntries;  // list positions per round of a block
// Split-K: one block per multiprocessor of an H100 / H200 SXM (its shared memory allows one), a constant so
// that the workspace size is a function of the shapes alone.
constexpr int64_t kGqaTargetBlocks = 132;

__host__ __device__ constexpr int gqa_q_row(int head_dim) { return head_dim + kMmaPad; }
__host__ __device__ constexpr int gqa_kv_row(int head_dim) { return 2 * head_dim + kMmaPad; }
__host__ __device__ constexpr size_t gqa_mma_smem_bytes(int head_dim) {
    return 2 * (2 * static_cast<size_t>(kGqaHeads) * gqa_q_row(head_dim) +
                static_cast<size_t>(kGqaPairs) * kGqaStages * kGqaEntries * gqa_kv_row(head_dim));
}

// The shapes and numerics the tensor-core kernel takes (its splits follow from them alone).
bool qsa_gqa_mma_shapes(const QsaSparseGqaParams& p) {
    const bool dim = p.head_dim == 32 || p.head_dim == 64 || p.head_dim == 128 || p.head_dim == 256;
    return p.q_type == DType::bf16 && p.kv_type == DType::bf16 && p.math == AttentionMath::bf16 && dim &&
           p.n_kv_heads >= 1 && p.n_heads % p.n_kv_heads == 0;
}
// And the operands it reads as it does: every kv entry 16-byte aligned for the bulk copies (K of KV head g
// starts 4·g·head_dim bytes in: aligned too), a bf16 gate or none.
bool qsa_gqa_mma_operands(const QsaSparseGqaParams& p) {
    return reinterpret_cast<uintptr_t>(p.kv.base) % 16 == 0 && p.kv.block_bytes % 16 == 0 && p.kv.entry_bytes % 16 == 0 &&
           (p.gate == nullptr || p.gate_type == DType::bf16);
}
int64_t qsa_gqa_mma_head_blocks(const QsaSparseGqaParams& p) {
    return (p.n_heads / p.n_kv_heads + kGqaHeads - 1) / kGqaHeads;
}
// Enough blocks to fill the GPU once (never a second, partial wave), each split at least one round.
int64_t qsa_gqa_mma_splits(const QsaSparseGqaParams& p) {
    const int64_t items = p.n_tokens * p.n_kv_heads * qsa_gqa_mma_head_blocks(p);
    if (items <= 0 || items >= kGqaTargetBlocks) return 1;
    const int64_t s = std::min(kGqaTargetBlocks / items, (p.n_indices + kGqaRound - 1) / kGqaRound);
    return std::max<int64_t>(1, std::min(s, kMaxSplits));
}

// Rows hh < nh of a [t, h, i] bf16 tensor (q or the gate) as shared rows of gqa_q_row(kD), the rest zero:
// warp w takes heads w, w + 8, …, its lanes 16-byte pieces where every row is 16-byte aligned (vector),
// else single values.
template <int kD>
__device__ __forceinline__ void gqa_load_rows(const void* src, int64_t row0, int64_t head_stride, int nh, bool vector,
                                              uint16_t* dst) {
    const int warp = threadIdx.x / kWarp, lane = threadIdx.x % kWarp;
    const auto* base = static_cast<const uint16_t*>(src) + row0;
    for (int hh = warp; hh < kGqaHeads; hh += kGqaWarps) {
        uint16_t* d = dst + hh * gqa_q_row(kD);
        const uint16_t* s = base + hh * head_stride;
        if (hh >= nh) {  // never read: such a head may lie past the tensor
#pragma unroll
            for (int i = 8 * lane; i < kD; i += 8 * kWarp) *reinterpret_cast<uint4*>(d + i) = make_uint4(0u, 0u, 0u, 0u);
        } else if (vector) {
#pragma unroll
            for (int i = 8 * lane; i < kD; i += 8 * kWarp) *reinterpret_cast<uint4*>(d + i) = __ldg(reinterpret_cast<const uint4*>(s + i));
        } else {
#pragma unroll
            for (int i = lane; i < kD; i += kWarp) d[i] = s[i];
        }
    }
}

// Stages this warp's half of a round's 16 entries (entries 8·half … 8·half + 7) into a ring slot whose
// barrier is `bar` (two arrivals: one per warp of the pair): lane e < 16 holds entry e's K address (its V
// follows: 4·kD contiguous bytes) or nullptr for a zero row, and valid the round's entry mask. Lane 0
// announces its half's valid bytes, each valid entry's lane moves them with one bulk copy, and the warp
// stores its half's zero rows as zeros (a stale value times p = 0 could be NaN). The caller has ordered both
// warps' earlier reads of the slot before these writes (fence_proxy_async_shared, then a pair barrier).
template <int kD>
__device__ __forceinline__ void gqa_stage_round(const uint8_t* row, unsigned valid, int half, int lane, uint16_t* stage,
                                                uint32_t bar) {
    constexpr uint32_t kBytes = 4 * kD;
    constexpr int kHalf = kGqaEntries / 2;
    const unsigned mine = ((1u << kHalf) - 1u) << (kHalf * half);
    if (lane == 0) async_copy::mbarrier_arrive_expect_tx(bar, static_cast<uint32_t>(__popc(valid & mine)) * kBytes);
    __syncwarp();  // the bytes are announced before any lands
    if (row != nullptr && lane / kHalf == half)
        async_copy::bulk_copy(mma::smem_address(stage + lane * gqa_kv_row(kD)), row, kBytes, bar);
    for (unsigned zeros = ~valid & mine; zeros != 0; zeros &= zeros - 1u) {
        uint4* dst = reinterpret_cast<uint4*>(stage + (__ffs(static_cast<int>(zeros)) - 1) * gqa_kv_row(kD));
        for (int k = lane; k < kD / 4; k += kWarp) dst[k] = make_uint4(0u, 0u, 0u, 0u);
    }
}

// The two warps of pair `pair` meet (named barrier 1 + pair; 0 is __syncthreads').
__device__ __forceinline__ void gqa_pair_sync(int pair) {
    asm volatile("bar.sync %0, %1;\n" ::"r"(1 + pair), "n"(2 * kWarp) : "memory");
}

template <int kD>
__global__ void __launch_bounds__(kGqaThreads, 1) qsa_sparse_gqa_mma_kernel(QsaGqaArgs a) {
    wait_for_previous_kernel();
    constexpr int kQRow = gqa_q_row(kD), kKvRow = gqa_kv_row(kD), kHalfDim = kD / 2, kTiles = kHalfDim / 8;
    extern __shared__ float4 attention_smem[];
    __shared__ uint64_t s_bar[kGqaPairs][kGqaStages];           // each ring slot's barrier
    __shared__ float4 s_part[kGqaPairs][2][kWarp][2];           // each warp's partial logits, fragment order
    __shared__ float s_m[kGqaPairs][kGqaHeads], s_l[kGqaPairs][kGqaHeads];
    __shared__ float s_f[kGqaPairs][kGqaHeads], s_den[kGqaHeads], s_max[kGqaHeads];
    __shared__ int s_n[kGqaPairs];
    uint16_t* const sQ = reinterpret_cast<uint16_t*>(attention_smem);
    uint16_t* const sGate = sQ + kGqaHeads * kQRow;
    uint16_t* const ring = sGate + kGqaHeads * kQRow;
    const int tid = static_cast<int>(threadIdx.x), warp = tid / kWarp, lane = tid % kWarp, g = lane / 4, tq = lane % 4;
    const int pair = warp / 2, half = warp % 2;  // half: this warp's dims [half·kD/2, (half + 1)·kD/2)

    const int64_t split = blockIdx.x % a.split.splits, block = blockIdx.x / a.split.splits;
    const int64_t item = block / a.head_blocks;  // t · n_kv_heads + kv head
    const int64_t t = item / a.n_kv_heads, kvh = item % a.n_kv_heads;
    const int64_t first = (block % a.head_blocks) * kGqaHeads;  // within the group
    const int64_t h0 = kvh * a.group + first;                    // consecutive query heads share a KV head (§4.7)
    const int nh = static_cast<int>(min(static_cast<int64_t>(kGqaHeads), a.group - first));
    const int64_t req = a.token_request[t];
    const bool listed = qsa_gqa_request_ok(a, req);
    const int64_t begin = a.n_indices * split / a.split.splits, end = a.n_indices * (split + 1) / a.split.splits;
    const int rounds = static_cast<int>((end - begin + kGqaRound - 1) / kGqaRound);  // ≤ 2^31 / 64 (launcher)
    const int64_t k_off = 2 * kvh * kD * 2;  // KV head kvh's K, then its V (qsa_sparse_gqa.h "KV entry layout")

    // Lane e < 16's list position in round r of this pair (−1: none), and its block id (both warps of the
    // pair compute all 16: each needs the entry mask). The index row is read without waiting for
    // token_request: only block_id needs the request. Positions stay 32-bit until used, so that no
    // conversion waits on a load issued for a later round.
    auto position = [&](int r) -> int32_t {
        const int64_t c = begin + static_cast<int64_t>(r) * kGqaRound + pair * kGqaEntries + lane;
        return lane < kGqaEntries && r < rounds && c < end ? a.indices[t * a.index_row_stride + c] : -1;
    };
    auto block_id = [&](int32_t pos) -> int32_t { return listed ? qsa_gqa_block_id(a, req, pos) : -1; };
    uint16_t* const my_ring = ring + pair * kGqaStages * kGqaEntries * kKvRow;
    auto stage = [&](int32_t pos, int32_t id, int slot, bool live) -> unsigned {
        const uint8_t* entry = qsa_gqa_entry(a, pos, id);
        const uint8_t* row = entry != nullptr ? entry + k_off : nullptr;
        const unsigned valid = __ballot_sync(kFullMask, row != nullptr);
        if (live)
            gqa_stage_round<kD>(row, valid, half, lane, my_ring + slot * kGqaEntries * kKvRow,
                                mma::smem_address(&s_bar[pair][slot]));
        return valid;
    };

    if (half == 0 && lane < kGqaStages) {
        async_copy::mbarrier_init(mma::smem_address(&s_bar[pair][lane]), 2);
        async_copy::mbarrier_init_fence();
    }
    // The address pipeline: rounds 0 and 1 are staged before the loop; pos2 / id2 are round r + 2's position
    // and block id, pos3 round r + 3's position; valid0 / valid1 rounds r and r + 1's entry masks.
    const int32_t pos0 = position(0), pos1 = position(1);
    int32_t pos2 = position(2), pos3 = position(3);
    const int32_t id0 = block_id(pos0), id1 = block_id(pos1);
    gqa_load_rows<kD>(a.q, t * a.q_token_stride + h0 * a.q_head_stride, a.q_head_stride, nh, a.q_vector_ok, sQ);
    if (a.split.splits == 1 && a.gate)
        gqa_load_rows<kD>(a.gate, t * a.gate_token_stride + h0 * a.gate_head_stride, a.gate_head_stride, nh,
                          a.gate_vector_ok, sGate);
    __syncthreads();  // the barriers are initialized; sQ (and sGate) are complete
    unsigned valid0 = stage(pos0, id0, 0, rounds > 0);
    unsigned valid1 = stage(pos1, id1, 1, rounds > 1);
    int32_t id2 = block_id(pos2);

    float acc[kTiles][4] = {};
    float m[2] = {-INFINITY, -INFINITY}, l[2] = {0.0f, 0.0f};  // rows g and g + 8: running max, this lane's Σ p
    int n_valid = 0;
    int slot = 0;           // round r's ring slot, r % 3
    unsigned parities = 0;  // bit k: the parity of slot k's next phase
    for (int r = 0; r < rounds; ++r) {
        async_copy::mbarrier_wait_parity(mma::smem_address(&s_bar[pair][slot]), (parities >> slot) & 1u);
        parities ^= 1u << slot;
        __syncwarp();  // this warp's zero rows too (the other warp's: the pair barrier below)
        const uint16_t* st = my_ring + slot * kGqaEntries * kKvRow;
        const unsigned vmask = valid0 & 0xffffu;
        n_valid += __popc(vmask);

        // This warp's half of S: rows = heads (A = q), columns = entries 0–7 and 8–15 (B = K rows).
        float s[2][4] = {};
        {
            const uint16_t* qa = sQ + (lane & 15) * kQRow + half * kHalfDim + (lane >> 4) * 8;
            const uint16_t* kb = st + ((lane & 7) + ((lane >> 4) << 3)) * kKvRow + half * kHalfDim + ((lane >> 3) & 1) * 8;
#pragma unroll
            for (int k0 = 0; k0 < kHalfDim; k0 += 16) {
                uint32_t af[4], bf[4];
                mma::ldmatrix_x4(af, qa + k0);
                mma::ldmatrix_x4(bf, kb + k0);
                mma::mma_16816<false>(s[0], af, bf[0], bf[1]);
                mma::mma_16816<false>(s[1], af, bf[2], bf[3]);
            }
        }
        // The whole dot: the lower half's partial plus the upper half's, in this order in both warps.
        s_part[pair][half][lane][0] = make_float4(s[0][0], s[0][1], s[0][2], s[0][3]);
        s_part[pair][half][lane][1] = make_float4(s[1][0], s[1][1], s[1][2], s[1][3]);
        gqa_pair_sync(pair);  // both halves are written; both warps are done with round r − 1's slot
#pragma unroll
        for (int nt = 0; nt < 2; ++nt) {
            const float4 lo = s_part[pair][0][lane][nt], hi = s_part[pair][1][lane][nt];
            s[nt][0] = lo.x + hi.x;
            s[nt][1] = lo.y + hi.y;
            s[nt][2] = lo.z + hi.z;
            s[nt][3] = lo.w + hi.w;
        }
        // Round r + 2: its copies start now, into the slot round r − 1 read (the barrier above ordered both
        // warps' reads, fenced at the end of that round, before these writes).
        const int slot2 = slot == 0 ? 2 : slot - 1;
        const unsigned valid2 = stage(pos2, id2, slot2, r + 2 < rounds);
        // Round r + 3's block id and round r + 4's position, used one round from now.
        const int32_t id3 = block_id(pos3);
        const int32_t pos4 = position(r + 4);

        // The online softmax (attention_step_softmax's rules): a listed row's logit is scale · dot; a zero
        // row, like a −inf logit, weighs exactly 0; fmaxf ignores a NaN logit, whose p is NaN.
        float alpha[2];
#pragma unroll
        for (int hr = 0; hr < 2; ++hr) {  // row g (hr 0: c = 0, 1) and g + 8 (hr 1: c = 2, 3)
            float mx = -INFINITY;
#pragma unroll
            for (int nt = 0; nt < 2; ++nt)
#pragma unroll
                for (int c = 2 * hr; c < 2 * hr + 2; ++c) {
                    const int e = 8 * nt + 2 * tq + (c & 1);
                    s[nt][c] = (vmask >> e) & 1u ? __fmul_rn(a.scale, s[nt][c]) : -INFINITY;
                    mx = fmaxf(mx, s[nt][c]);
                }
            mx = fmaxf(mx, __shfl_xor_sync(kFullMask, mx, 1));
            mx = fmaxf(mx, __shfl_xor_sync(kFullMask, mx, 2));
            const float m_new = fmaxf(m[hr], mx);
            alpha[hr] = m_new == -INFINITY ? 1.0f : expf(m[hr] - m_new);
            float sum = 0.0f;
#pragma unroll
            for (int nt = 0; nt < 2; ++nt)
#pragma unroll
                for (int c = 2 * hr; c < 2 * hr + 2; ++c) {
                    const float p = s[nt][c] != -INFINITY ? expf(s[nt][c] - m_new) : 0.0f;
                    s[nt][c] = p;
                    sum += p;
                }
            l[hr] = l[hr] * alpha[hr] + sum;
            m[hr] = m_new;
        }
        // P = bf16(p) as the A fragment (16 heads × 16 entries): the accumulator layout of the two n-tiles.
        const uint32_t pa[4] = {mma::pack_bf16x2(s[0][0], s[0][1]), mma::pack_bf16x2(s[0][2], s[0][3]),
                                mma::pack_bf16x2(s[1][0], s[1][1]), mma::pack_bf16x2(s[1][2], s[1][3])};
        // acc = acc · alpha + P·V over this warp's dims (B = V rows, transposed by ldmatrix). Once the maxima
        // settle, alpha is exactly 1 for every row of the warp and the rescale is skipped (the same values).
        if (__any_sync(kFullMask, alpha[0] != 1.0f || alpha[1] != 1.0f)) {
#pragma unroll
            for (int nt = 0; nt < kTiles; ++nt) {
                acc[nt][0] *= alpha[0];
                acc[nt][1] *= alpha[0];
                acc[nt][2] *= alpha[1];
                acc[nt][3] *= alpha[1];
            }
        }
        const uint16_t* vb = st + ((lane & 7) + ((lane >> 3) & 1) * 8) * kKvRow + kD + half * kHalfDim + (lane >> 4) * 8;
#pragma unroll
        for (int np = 0; np < kTiles / 2; ++np) {
            uint32_t b[4];
            mma::ldmatrix_x4_trans(b, vb + 16 * np);
            mma::mma_16816<false>(acc[2 * np], pa, b[0], b[1]);
            mma::mma_16816<false>(acc[2 * np + 1], pa, b[2], b[3]);
        }
        async_copy::fence_proxy_async_shared();  // this lane's reads of the slot precede its refill (next round)
        gqa_pair_sync(pair);  // both warps have read s_part before either writes it again
        valid0 = valid1;
        valid1 = valid2;
        id2 = id3;
        pos2 = pos3;
        pos3 = pos4;
        slot = slot == 2 ? 0 : slot + 1;
    }
    // Every staged round was waited for: no copy is in flight.
#pragma unroll
    for (int hr = 0; hr < 2; ++hr) {
        l[hr] += __shfl_xor_sync(kFullMask, l[hr], 1);
        l[hr] += __shfl_xor_sync(kFullMask, l[hr], 2);
    }
    __syncthreads();  // every pair is done with its ring: the merge reuses the space

    // The pairs' states: accumulators [pair][16][kD] fp32 (each warp its half of the dims), statistics per
    // (pair, head) from the lower warp (the upper one's are the same).
    float* const sAcc = reinterpret_cast<float*>(ring);
#pragma unroll
    for (int nt = 0; nt < kTiles; ++nt) {
        float* row_g = sAcc + (pair * kGqaHeads + g) * kD + half * kHalfDim + 8 * nt + 2 * tq;
        *reinterpret_cast<float2*>(row_g) = make_float2(acc[nt][0], acc[nt][1]);
        *reinterpret_cast<float2*>(row_g + 8 * kD) = make_float2(acc[nt][2], acc[nt][3]);
    }
    if (half == 0 && tq == 0) {
        s_m[pair][g] = m[0];
        s_m[pair][g + 8] = m[1];
        s_l[pair][g] = l[0];
        s_l[pair][g + 8] = l[1];
    }
    if (half == 0 && lane == 0) s_n[pair] = n_valid;
    __syncthreads();
    // Per head: M = max_p m_p, f_p = exp(m_p − M) (attention_split_weight), den = Σ_p f_p · L_p.
    if (tid < kGqaHeads) {
        float M = -INFINITY;
        for (int q = 0; q < kGqaPairs; ++q) M = fmaxf(M, s_m[q][tid]);
        float den = 0.0f;
        for (int q = 0; q < kGqaPairs; ++q) {
            s_f[q][tid] = attention_split_weight(s_m[q][tid], M);
            den += s_f[q][tid] * s_l[q][tid];
        }
        s_max[tid] = M;
        s_den[tid] = den;
    }
    __syncthreads();
    int n_rows = 0;
    for (int q = 0; q < kGqaPairs; ++q) n_rows += s_n[q];
    for (int idx = tid; idx < nh * kD; idx += kGqaThreads) {
        const int hh = idx / kD, i = idx % kD;
        float v = 0.0f;
#pragma unroll
        for (int q = 0; q < kGqaPairs; ++q) v = fmaf(s_f[q][hh], sAcc[(q * kGqaHeads + hh) * kD + i], v);
        if (a.split.splits > 1) {
            a.split.acc[((t * a.n_heads + h0 + hh) * a.split.splits + split) * kD + i] = v;
            continue;
        }
        // o = acc / Σp, 0 for a row with no valid entry (§4.6) and only there; all −inf logits: 0 / 0 = NaN.
        const float o = n_rows > 0 ? __fdiv_rn(v, s_den[hh]) : 0.0f;
        const float gate = a.gate ? __uint_as_float(static_cast<uint32_t>(sGate[hh * kQRow + i]) << 16) : 0.0f;
        store_act(a.out, a.out_bf16, t * a.out_token_stride + (h0 + hh) * a.out_head_stride + i,
                  qsa_gqa_gated(a, o, gate));
    }
    if (a.split.splits > 1) attention_write_split_stats(a.split, split, t * a.n_heads + h0, nh, s_max, s_den, n_rows);
}

int64_t qsa_sparse_gqa_splits(const QsaSparseGqaParams& p) {
    if (p.n_kv_heads < 1 || p.n_heads % p.n_kv_heads != 0) return 1;
    if (qsa_gqa_mma_shapes(p)) return qsa_gqa_mma_splits(p);
    return attention_splits(p.n_tokens * p.n_kv_heads, p.n_heads / p.n_kv_heads, p.n_indices);
}

// ========================================== qsa_pool ==========================================

constexpr int kPoolThreads = 128;

// One block per group. sum = Σ_j key_j[i] in fp32, member order, then one fp32 division by ratio and one
// cast (ops/qsa_pool.h): the same operations in the same order as ref, so the same bits.
// A negative member slot (check_indices would refuse it) is skipped: it adds nothing and is never addressed.
// A slot beyond the cache cannot be detected (QsaPoolParams carries no slot count).
__global__ void __launch_bounds__(kPoolThreads) qsa_pool_kernel(QsaPoolParams p) {
    wait_for_previous_kernel();
    const int64_t g = blockIdx.x;
    const bool key_bf16 = p.key_type == DType::bf16, out_bf16 = p.out_type == DType::bf16;
    const int64_t* members = p.member_slots + g * p.ratio;
    for (int64_t i = threadIdx.x; i < p.head_dim; i += kPoolThreads) {
        float sum = 0.0f;
        for (int64_t j = 0; j < p.ratio; ++j) {
            const int64_t slot = members[j];
            if (slot < 0) continue;
            // CacheView::row(slot)
            const uint8_t* row = p.keys.base + (slot / p.keys.block_size) * p.keys.block_bytes +
                                 (slot % p.keys.block_size) * p.keys.entry_bytes;
            sum = __fadd_rn(sum, load_plain_le(row, key_bf16, i));
        }
        store_act(p.out, out_bf16, g * p.out_row_stride + i, __fdiv_rn(sum, static_cast<float>(p.ratio)));
    }
}

// ========================================= qsa_expand =========================================

constexpr int kExpandThreads = 128;
constexpr int kExpandWarps = kExpandThreads / kWarp;

// One block per token (ops/qsa_expand.h). Every write is to out[t, c] with c ∈ [0, out_width), whatever the
// inputs hold; any produced value < 0, ≥ L or beyond int32 is written as −1 (§4.6).
__global__ void __launch_bounds__(kExpandThreads) qsa_expand_kernel(QsaExpandParams p) {
    wait_for_previous_kernel();
    __shared__ int s_warp[kExpandWarps];
    __shared__ int s_valid[kExpandWarps];
    const int64_t t = blockIdx.x;
    const int warp = threadIdx.x / kWarp, lane = threadIdx.x % kWarp;
    const int64_t pos = p.positions[t], len = p.seq_lens[t], r = p.ratio, k = p.block_topk;
    const int64_t visible = min((pos + 1) / r, len / r);  // §4.5, C++ division as in ref
    int32_t* out = p.out + t * p.out_row_stride;
    int valid = 0;  // this thread's valid entries
    auto emit = [&](int64_t c, int64_t v) {
        const bool ok = v >= 0 && v < len && v <= INT32_MAX;
        out[c] = ok ? static_cast<int32_t>(v) : -1;
        valid += ok ? 1 : 0;
    };
    int64_t nb = 0;  // whole groups written: out[0, nb·r)
    if (visible <= k) {
        // Dense: groups 0 … visible − 1, so out[c] = (c / r)·r + c % r = c; sel is not read.
        nb = visible > 0 ? visible : 0;
        for (int64_t c = threadIdx.x; c < nb * r; c += kExpandThreads) emit(c, c);
    } else if (p.sel != nullptr) {
        // The row's entries ≥ 0 in row order, left-compacted: entry e of rank m fills out[m·r, m·r + r).
        // (A null sel with a selecting token is refused by check_indices; here it selects no group.)
        const int32_t* sel = p.sel + t * p.sel_row_stride;
        for (int64_t j0 = 0; j0 < k; j0 += kExpandThreads) {
            const int64_t j = j0 + threadIdx.x;
            const int32_t e = j < k ? sel[j] : -1;
            const unsigned ballot = __ballot_sync(kFullMask, e >= 0);
            if (lane == 0) s_warp[warp] = __popc(ballot);
            __syncthreads();
            int64_t before = 0, in_chunk = 0;
            for (int w = 0; w < kExpandWarps; ++w) {
                before += w < warp ? s_warp[w] : 0;
                in_chunk += s_warp[w];
            }
            __syncthreads();  // s_warp is rewritten by the next chunk
            if (e >= 0) {
                const int64_t m = nb + before + __popc(ballot & ((1u << lane) - 1u));
                for (int64_t u = 0; u < r; ++u)
                    if (m * r + u < p.out_width) emit(m * r + u, static_cast<int64_t>(e) * r + u);
            }
            nb += in_chunk;
        }
    }
    // The open tail: tail_start + j for j < (p + 1) − tail_start, then −1 up to out_width.
    const int64_t tail_start = ((pos + 1) / r) * r, n_tail = (pos + 1) - tail_start;
    for (int64_t c = nb * r + threadIdx.x; c < p.out_width; c += kExpandThreads) {
        const int64_t j = c - nb * r;
        emit(c, j < n_tail ? tail_start + j : -1);
    }
    if (p.out_count == nullptr) return;  // uniform over the block
    const int w_valid = warp_sum_int(valid);
    if (lane == 0) s_valid[warp] = w_valid;
    __syncthreads();
    if (threadIdx.x == 0) {
        int total = 0;
        for (int w = 0; w < kExpandWarps; ++w) total += s_valid[w];
        p.out_count[t] = total;
    }
}

// ====================================== dsa_output_gate ======================================

constexpr int kGateThreads = 128;

// One block per (token, head) row: y = x · σ(g) as one IEEE quotient x / (1 + exp(−g)) in fp32 (ref: the same
// quotient in double), cast once. In place (y = x, same view) is safe: each element is read, then written, by
// one thread.
__global__ void __launch_bounds__(kGateThreads) dsa_output_gate_kernel(DsaOutputGateParams p) {
    wait_for_previous_kernel();
    const int64_t t = blockIdx.x / p.n_heads, h = blockIdx.x % p.n_heads;
    const bool x_bf16 = p.x_type == DType::bf16, g_bf16 = p.gate_type == DType::bf16, y_bf16 = p.y_type == DType::bf16;
    const bool elementwise = p.mode == DsaGateMode::elementwise;
    const int64_t xo = t * p.x_token_stride + h * p.x_head_stride, yo = t * p.y_token_stride + h * p.y_head_stride;
    const int64_t go = t * p.gate_row_stride + (elementwise ? h * p.head_dim : h);
    for (int64_t i = threadIdx.x; i < p.head_dim; i += kGateThreads) {
        const float g = load_act(p.gate, g_bf16, elementwise ? go + i : go);
        const float x = load_act(p.x, x_bf16, xo + i);
        store_act(p.y, y_bf16, yo + i, __fdiv_rn(x, __fadd_rn(1.0f, expf(-g))));
    }
}

// ======================================= mla_head_proj =======================================

constexpr int kProjThreads = 256;
constexpr int kProjTileT = 32;  // tokens per block
constexpr int kProjTileO = 64;  // outputs per block
constexpr int kProjTileK = 32;  // in_features per step

// y[t, h, o] = Σ_i X(x[t, h, i]) · W[h, i, o] (ops/mla_head_proj.h): a 32 × 64 output tile of one head per
// block; thread (tx, ty) of 16 × 16 owns tokens 2ty, 2ty + 1 and outputs tx + 16u (u < 4). fp32 FMA
// accumulation over i in order (the contract leaves the order open). math bf16: X = round_bf16(x) and w is
// bf16, so every product is exact in fp32 (ops/linear.h's rule); math f32 widens both.
__global__ void __launch_bounds__(kProjThreads) mla_head_proj_kernel(MlaHeadProjParams p) {
    wait_for_previous_kernel();
    __shared__ float sX[kProjTileT][kProjTileK + 1];
    __shared__ float sW[kProjTileK][kProjTileO];
    const int64_t t0 = static_cast<int64_t>(blockIdx.x) * kProjTileT, o0 = static_cast<int64_t>(blockIdx.y) * kProjTileO;
    const int64_t h = blockIdx.z;
    const int tx = threadIdx.x % 16, ty = threadIdx.x / 16;
    const bool x_bf16 = p.x_type == DType::bf16, w_bf16 = p.w_type == DType::bf16, y_bf16 = p.y_type == DType::bf16;
    const bool round_x = p.math == LinearMath::bf16;
    const int64_t w0 = h * p.in_features * p.out_features;
    float acc[2][4] = {};
    for (int64_t k0 = 0; k0 < p.in_features; k0 += kProjTileK) {
        for (int e = threadIdx.x; e < kProjTileT * kProjTileK; e += kProjThreads) {
            const int row = e / kProjTileK, col = e % kProjTileK;
            const int64_t tk = t0 + row, i = k0 + col;
            float v = 0.0f;  // outside the matrix: 0 (those outputs are not stored; padded i meets a padded w)
            if (tk < p.n_tokens && i < p.in_features) {
                v = load_act(p.x, x_bf16, tk * p.x_token_stride + h * p.x_head_stride + i);
                if (round_x) v = round_bf16(v);
            }
            sX[row][col] = v;
        }
        for (int e = threadIdx.x; e < kProjTileK * kProjTileO; e += kProjThreads) {
            const int row = e / kProjTileO, col = e % kProjTileO;
            const int64_t i = k0 + row, o = o0 + col;
            sW[row][col] = i < p.in_features && o < p.out_features ? load_act(p.w, w_bf16, w0 + i * p.out_features + o)
                                                                   : 0.0f;
        }
        __syncthreads();
#pragma unroll 8
        for (int kk = 0; kk < kProjTileK; ++kk) {
            const float a0 = sX[2 * ty][kk], a1 = sX[2 * ty + 1][kk];
#pragma unroll
            for (int u = 0; u < 4; ++u) {
                const float b = sW[kk][tx + 16 * u];
                acc[0][u] = fmaf(a0, b, acc[0][u]);
                acc[1][u] = fmaf(a1, b, acc[1][u]);
            }
        }
        __syncthreads();
    }
#pragma unroll
    for (int m = 0; m < 2; ++m) {
        const int64_t tk = t0 + 2 * ty + m;
        if (tk >= p.n_tokens) continue;
#pragma unroll
        for (int u = 0; u < 4; ++u) {
            const int64_t o = o0 + tx + 16 * u;
            if (o < p.out_features) store_act(p.y, y_bf16, tk * p.y_token_stride + h * p.y_head_stride + o, acc[m][u]);
        }
    }
}

// One block per row: rows beyond the grid's x limit (2^31 − 1) are not expected of a step.
Status launch_rows(int64_t rows, const char* op) {
    if (rows > INT_MAX) return unsupported_error("cuda: {} over {} rows (at most 2^31 − 1)", op, rows);
    return Status::ok();
}

// A kernel's dynamic shared memory allowance, set once per kernel (every launch stays under it).
template <auto kKernel>
cudaError_t shared_memory_allowance(int bytes) {
    static const cudaError_t set = cudaFuncSetAttribute(kKernel, cudaFuncAttributeMaxDynamicSharedMemorySize, bytes);
    return set;
}

// Launches the tensor-core sparse attention of the format (kModel1) and the weights' math (kBf16P): the
// wgmma kernel (wg) or the mma.sync kernel, with the device's whole per-block allowance of shared memory.
template <bool kModel1, bool kBf16P>
Status launch_tensor_core_attention(bool wg, const MmaAttentionArgs& ma, unsigned blocks, size_t smem_bytes, int allowance,
                                    int64_t split_positions, cudaStream_t stream) {
    constexpr auto wgmma_kernel = sparse_attention_wgmma_kernel<kModel1, kBf16P>;
    constexpr auto mma_kernel = sparse_attention_mma_kernel<kModel1, kBf16P>;
    const cudaError_t allowed =
        wg ? shared_memory_allowance<wgmma_kernel>(allowance) : shared_memory_allowance<mma_kernel>(allowance);
    SIEVE_RETURN_IF_ERROR(launch_check(allowed, "sparse_attention", "shared memory of the tensor-core kernel"));
    if (wg)
        launch_after_previous(wgmma_kernel, blocks, kWgThreads, smem_bytes, stream, ma, split_positions);
    else
        launch_after_previous(mma_kernel, blocks, kMmaThreads, smem_bytes, stream, ma);
    return Status::ok();
}

}  // namespace

// ---- sparse_attention ----

size_t sparse_attention_workspace_size(const SparseAttentionParams& p) {
    return split_workspace(p.n_tokens * p.n_heads, sparse_attention_splits(p), p.v_dim).total;
}

SparseAttentionPath sparse_attention_path(const SparseAttentionParams& p) {
    if (wgmma_attention_supported(p)) return SparseAttentionPath::wgmma;
    return mma_attention_supported(p) ? SparseAttentionPath::mma_sync : SparseAttentionPath::generic;
}

Status sparse_attention(const SparseAttentionParams& p, Workspace ws, cudaStream_t stream) {
    if (p.n_tokens == 0) return Status::ok();
    const int64_t splits = sparse_attention_splits(p);
    const SparseAttentionPath path = sparse_attention_path(p);
    const bool mma = path != SparseAttentionPath::generic, wg = path == SparseAttentionPath::wgmma;
    AttentionShape shape;
    if (mma) {
        const int heads = wg ? kWgHeads : kMmaHeads;
        shape.head_blocks = (p.n_heads + heads - 1) / heads;
        shape.heads_per_block = heads;
        shape.chunk = wg ? kWgEntries : kMmaChunk;
        shape.splits = splits;
        if (p.n_tokens > INT_MAX / shape.head_blocks / splits)
            return unsupported_error("cuda: sparse_attention: {} tokens × {} head blocks × {} splits exceed the grid's 2^31 − 1 blocks",
                                     p.n_tokens, shape.head_blocks, splits);
    } else {
        SIEVE_RETURN_IF_ERROR(attention_shape("sparse_attention", p.n_tokens, p.n_heads, splits, p.qk_dim, p.qk_dim, 0,
                                              p.v_dim, reinterpret_cast<const void*>(&sparse_attention_kernel), &shape));
    }
    SparseAttentionArgs a;
    a.q = p.q;
    a.out = p.out;
    a.sink = p.sink;
    a.main = sparse_list_args(p, p.main);
    a.extra = sparse_list_args(p, p.extra);
    a.scale = p.scale;
    a.n_heads = p.n_heads;
    a.q_token_stride = p.q_token_stride;
    a.q_head_stride = p.q_head_stride;
    a.out_token_stride = p.out_token_stride;
    a.out_head_stride = p.out_head_stride;
    a.head_blocks = shape.head_blocks;
    a.qk_dim = static_cast<int>(p.qk_dim);  // attention_shape bounded the dims by the shared memory
    a.v_dim = static_cast<int>(p.v_dim);
    a.heads_per_block = shape.heads_per_block;
    a.chunk = shape.chunk;
    a.q_bf16 = p.q_type == DType::bf16;
    a.out_bf16 = p.out_type == DType::bf16;
    a.p_bf16 = p.math == AttentionMath::bf16;
    const int64_t rows = p.n_tokens * p.n_heads;
    a.split.splits = splits;
    if (splits > 1) {  // the backend checked ws against sparse_attention_workspace_size
        if (rows > INT_MAX) return unsupported_error("cuda: sparse_attention over {} rows (at most 2^31 − 1)", rows);
        const SplitWorkspace w = split_workspace(rows, splits, p.v_dim);
        a.split.acc = static_cast<float*>(ws.data);
        a.split.stats = reinterpret_cast<float*>(static_cast<uint8_t*>(ws.data) + w.acc_bytes);
    }
    const int64_t blocks = p.n_tokens * shape.head_blocks * splits;
    if (mma) {
        MmaAttentionArgs ma;
        ma.base = a;
        const CacheRecordLayout layout = p.layout(p.main.width > 0 ? p.main : p.extra);
        const bool model1 = layout.format == CacheRecordFormat::fp8_model1;
        MmaRecordNumbers& r = ma.rec;
        r.quant_dim = static_cast<int>(layout.quant_dim());
        r.group = static_cast<int>(layout.group_size());
        r.data_bytes = static_cast<int>(layout.data_bytes());
        r.scale_bytes = model1 ? static_cast<int>(layout.scale_bytes()) : 0;
        r.tail_offset = static_cast<int>(model1 ? r.quant_dim : r.quant_dim + layout.scale_bytes());
        r.scales_offset = model1 ? r.data_bytes : r.quant_dim;
        ma.async_ok = r.data_bytes % 16 == 0 && r.scale_bytes % 8 == 0;
        for (const SparseListArgs* l : {&a.main, &a.extra})
            if (l->width > 0)
                ma.async_ok = ma.async_ok && reinterpret_cast<uintptr_t>(l->rec.base) % 16 == 0 && l->rec.block_bytes % 16 == 0;
        ma.q_vector_ok = reinterpret_cast<uintptr_t>(p.q) % 16 == 0 && p.q_token_stride % 8 == 0 && p.q_head_stride % 8 == 0;
        const size_t smem_bytes = wg ? wgmma_attention_shape(a.qk_dim, r).bytes : mma_attention_shape(a.qk_dim, r, model1).bytes;
        int device = 0, optin = 0;
        SIEVE_RETURN_IF_ERROR(launch_check(cudaGetDevice(&device), "sparse_attention", "cudaGetDevice"));
        SIEVE_RETURN_IF_ERROR(launch_check(cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, device),
                                           "sparse_attention", "shared memory limit"));
        // The kernels' static shared memory (the gathered addresses) stays below 2 KiB.
        if (smem_bytes + 2048 > static_cast<size_t>(optin))
            return unsupported_error("cuda: sparse_attention: the tensor-core kernel's {} bytes of shared memory exceed the {} a block may use",
                                     smem_bytes, optin);
        const unsigned grid = static_cast<unsigned>(blocks);
        const int64_t positions = wg ? wgmma_split_positions(p, splits) : 0;
        const int allowance = optin - 2048;
        SIEVE_RETURN_IF_ERROR(
            model1 ? (a.p_bf16 ? launch_tensor_core_attention<true, true>(wg, ma, grid, smem_bytes, allowance, positions, stream)
                               : launch_tensor_core_attention<true, false>(wg, ma, grid, smem_bytes, allowance, positions, stream))
                   : (a.p_bf16 ? launch_tensor_core_attention<false, true>(wg, ma, grid, smem_bytes, allowance, positions, stream)
                               : launch_tensor_core_attention<false, false>(wg, ma, grid, smem_bytes, allowance, positions, stream)));
    } else {
        launch_after_previous(sparse_attention_kernel, static_cast<unsigned>(blocks), kAttnThreads, shape.smem_bytes,
                              stream, a);
    }
    SIEVE_RETURN_IF_ERROR(cuda_status(cudaGetLastError(), "sparse_attention launch"));
    if (splits == 1) return Status::ok();
    SparseCombineArgs c;
    c.acc = a.split.acc;
    c.stats = a.split.stats;
    c.sink = p.sink;
    c.out = p.out;
    c.splits = splits;
    c.n_heads = p.n_heads;
    c.out_token_stride = p.out_token_stride;
    c.out_head_stride = p.out_head_stride;
    c.v_dim = a.v_dim;
    c.out_bf16 = a.out_bf16;
    const CombineShape combine = combine_shape(rows, c.v_dim);
    const auto kernel = combine_instance(combine, sparse_attention_combine_kernel<0>, sparse_attention_combine_kernel<1>,
                                         sparse_attention_combine_kernel<2>, sparse_attention_combine_kernel<4>);
    return cuda_status(launch_after_previous(kernel, combine.blocks, combine.threads, 0, stream, c, combine),
                       "sparse_attention combine launch");
}

// ---- qsa ----

Status qsa_pool(const QsaPoolParams& p, cudaStream_t stream) {
    if (p.n_groups == 0) return Status::ok();
    SIEVE_RETURN_IF_ERROR(launch_rows(p.n_groups, "qsa_pool"));
    launch_after_previous(qsa_pool_kernel, static_cast<unsigned>(p.n_groups), kPoolThreads, 0, stream, p);
    return cuda_status(cudaGetLastError(), "qsa_pool launch");
}

Status qsa_expand(const QsaExpandParams& p, cudaStream_t stream) {
    if (p.n_tokens == 0) return Status::ok();
    SIEVE_RETURN_IF_ERROR(launch_rows(p.n_tokens, "qsa_expand"));
    launch_after_previous(qsa_expand_kernel, static_cast<unsigned>(p.n_tokens), kExpandThreads, 0, stream, p);
    return cuda_status(cudaGetLastError(), "qsa_expand launch");
}

size_t qsa_sparse_gqa_workspace_size(const QsaSparseGqaParams& p) {
    return split_workspace(p.n_tokens * p.n_heads, qsa_sparse_gqa_splits(p), p.head_dim).total;
}

Status qsa_sparse_gqa(const QsaSparseGqaParams& p, Workspace ws, cudaStream_t stream) {
    if (p.n_tokens == 0) return Status::ok();
    const int64_t group = p.n_heads / p.n_kv_heads;  // validate: n_heads is a multiple of n_kv_heads
    const int64_t splits = qsa_sparse_gqa_splits(p);
    const bool mma = qsa_gqa_mma_shapes(p) && qsa_gqa_mma_operands(p);
    void (*mma_kernel)(QsaGqaArgs) = nullptr;
    AttentionShape shape;
    if (mma) {
        shape.head_blocks = qsa_gqa_mma_head_blocks(p);
        shape.heads_per_block = kGqaHeads;
        shape.splits = splits;
        shape.smem_bytes = gqa_mma_smem_bytes(static_cast<int>(p.head_dim));
        if (p.n_indices / kGqaRound >= INT_MAX)
            return unsupported_error("cuda: qsa_sparse_gqa: index rows of {} positions (at most 2^37)", p.n_indices);
        int device = 0, optin = 0;
        SIEVE_RETURN_IF_ERROR(launch_check(cudaGetDevice(&device), "qsa_sparse_gqa", "cudaGetDevice"));
        SIEVE_RETURN_IF_ERROR(launch_check(cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, device),
                                           "qsa_sparse_gqa", "shared memory limit"));
        // The kernel's static shared memory (barriers, partial logits, statistics) stays below 10 KiB.
        if (shape.smem_bytes + 10 * 1024 > static_cast<size_t>(optin))
            return unsupported_error("cuda: qsa_sparse_gqa: the tensor-core kernel's {} bytes of shared memory exceed the {} a "
                                     "block may use", shape.smem_bytes, optin);
        // Each instantiation's dynamic shared memory is a constant: raised once per kernel.
        auto allow = [](void (*kernel)(QsaGqaArgs), size_t bytes) {
            return cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(bytes));
        };
        static const cudaError_t attribute[4] = {
            allow(qsa_sparse_gqa_mma_kernel<32>, gqa_mma_smem_bytes(32)), allow(qsa_sparse_gqa_mma_kernel<64>, gqa_mma_smem_bytes(64)),
            allow(qsa_sparse_gqa_mma_kernel<128>, gqa_mma_smem_bytes(128)), allow(qsa_sparse_gqa_mma_kernel<256>, gqa_mma_smem_bytes(256))};
        const int which = p.head_dim == 32 ? 0 : p.head_dim == 64 ? 1 : p.head_dim == 128 ? 2 : 3;
        SIEVE_RETURN_IF_ERROR(launch_check(attribute[which], "qsa_sparse_gqa", "shared memory of the tensor-core kernel"));
        void (*const kernels[4])(QsaGqaArgs) = {qsa_sparse_gqa_mma_kernel<32>, qsa_sparse_gqa_mma_kernel<64>,
                                                qsa_sparse_gqa_mma_kernel<128>, qsa_sparse_gqa_mma_kernel<256>};
        mma_kernel = kernels[which];
    } else {
        SIEVE_RETURN_IF_ERROR(attention_shape("qsa_sparse_gqa", p.n_tokens * p.n_kv_heads, group, splits, p.head_dim,
                                              p.head_dim, p.head_dim, p.head_dim,
                                              reinterpret_cast<const void*>(&qsa_sparse_gqa_kernel), &shape));
    }
    QsaGqaArgs a;
    a.q = p.q;
    a.gate = p.gate;
    a.out = p.out;
    // The view is only checked (check_indices) when some index is valid; validate_paged_view's conditions
    // here decide whether any entry may be addressed at all.
    const int64_t entry = 2 * p.n_kv_heads * p.head_dim * static_cast<int64_t>(dtype_size(p.kv_type));
    a.kv_ok = p.kv.base != nullptr && p.kv.block_size >= 1 && p.kv.entry_bytes >= entry &&
              p.kv.block_bytes / p.kv.block_size >= p.kv.entry_bytes;
    a.kv_base = p.kv.base;
    a.kv_block_bytes = p.kv.block_bytes;
    a.kv_block_size = a.kv_ok ? p.kv.block_size : 1;
    a.kv_entry_bytes = p.kv.entry_bytes;
    a.block_table = p.tables.block_table;
    a.token_request = p.tables.token_request;
    a.n_requests = p.tables.n_requests;
    a.block_table_stride = p.tables.block_table_stride;
    a.indices = p.indices;
    a.n_indices = p.indices != nullptr ? p.n_indices : 0;
    a.index_row_stride = p.index_row_stride;
    a.n_heads = p.n_heads;
    a.n_kv_heads = p.n_kv_heads;
    a.group = group;
    a.q_token_stride = p.q_token_stride;
    a.q_head_stride = p.q_head_stride;
    a.gate_token_stride = p.gate_token_stride;
    a.gate_head_stride = p.gate_head_stride;
    a.out_token_stride = p.out_token_stride;
    a.out_head_stride = p.out_head_stride;
    a.head_blocks = shape.head_blocks;
    a.scale = p.scale;
    a.head_dim = static_cast<int>(p.head_dim);  // bounded by attention_shape or qsa_gqa_mma_shapes
    a.heads_per_block = shape.heads_per_block;
    a.chunk = shape.chunk;
    a.q_bf16 = p.q_type == DType::bf16;
    a.kv_bf16 = p.kv_type == DType::bf16;
    a.gate_bf16 = p.gate_type == DType::bf16;
    a.out_bf16 = p.out_type == DType::bf16;
    a.p_bf16 = p.math == AttentionMath::bf16;
    auto rows_aligned = [](const void* x, int64_t token_stride, int64_t head_stride) {
        return reinterpret_cast<uintptr_t>(x) % 16 == 0 && token_stride % 8 == 0 && head_stride % 8 == 0;
    };
    a.q_vector_ok = rows_aligned(p.q, p.q_token_stride, p.q_head_stride);
    a.gate_vector_ok = rows_aligned(p.gate, p.gate_token_stride, p.gate_head_stride);
    const int64_t rows = p.n_tokens * p.n_heads;
    a.split.splits = splits;
    if (splits > 1) {  // the backend checked ws against qsa_sparse_gqa_workspace_size
        if (rows > INT_MAX) return unsupported_error("cuda: qsa_sparse_gqa over {} rows (at most 2^31 − 1)", rows);
        const SplitWorkspace w = split_workspace(rows, splits, p.head_dim);
        a.split.acc = static_cast<float*>(ws.data);
        a.split.stats = reinterpret_cast<float*>(static_cast<uint8_t*>(ws.data) + w.acc_bytes);
    }
    const int64_t blocks = p.n_tokens * p.n_kv_heads * shape.head_blocks * splits;
    if (blocks > INT_MAX)
        return unsupported_error("cuda: qsa_sparse_gqa over {} blocks (at most 2^31 − 1)", blocks);
    if (mma)
        launch_after_previous(mma_kernel, static_cast<unsigned>(blocks), kGqaThreads, shape.smem_bytes, stream, a);
    else
        launch_after_previous(qsa_sparse_gqa_kernel, static_cast<unsigned>(blocks), kAttnThreads, shape.smem_bytes,
                              stream, a);
    SIEVE_RETURN_IF_ERROR(cuda_status(cudaGetLastError(), "qsa_sparse_gqa launch"));
    if (splits == 1) return Status::ok();
    const CombineShape combine = combine_shape(rows, a.head_dim);
    const auto kernel = combine_instance(combine, qsa_sparse_gqa_combine_kernel<0>, qsa_sparse_gqa_combine_kernel<1>,
                                         qsa_sparse_gqa_combine_kernel<2>, qsa_sparse_gqa_combine_kernel<4>);
    return cuda_status(launch_after_previous(kernel, combine.blocks, combine.threads, 0, stream, a, combine),
                       "qsa_sparse_gqa combine launch");
}

// ---- dsa ----

Status dsa_output_gate(const DsaOutputGateParams& p, cudaStream_t stream) {
    const int64_t rows = p.n_tokens * p.n_heads;
    if (rows == 0) return Status::ok();
    SIEVE_RETURN_IF_ERROR(launch_rows(rows, "dsa_output_gate"));
    launch_after_previous(dsa_output_gate_kernel, static_cast<unsigned>(rows), kGateThreads, 0, stream, p);
    return cuda_status(cudaGetLastError(), "dsa_output_gate launch");
}

size_t mla_head_proj_workspace_size(const MlaHeadProjParams&) { return 0; }

Status mla_head_proj(const MlaHeadProjParams& p, Workspace, cudaStream_t stream) {
    if (p.n_tokens == 0) return Status::ok();
    const int64_t tiles_t = (p.n_tokens + kProjTileT - 1) / kProjTileT;
    const int64_t tiles_o = (p.out_features + kProjTileO - 1) / kProjTileO;
    if (tiles_t > INT_MAX || tiles_o > 65535 || p.n_heads > 65535)
        return unsupported_error("cuda: mla_head_proj grid of {} token tiles × {} output tiles × {} heads exceeds the "
                                 "grid limits (2^31 − 1 × 65535 × 65535)",
                                 tiles_t, tiles_o, p.n_heads);
    const dim3 grid(static_cast<unsigned>(tiles_t), static_cast<unsigned>(tiles_o), static_cast<unsigned>(p.n_heads));
    launch_after_previous(mla_head_proj_kernel, grid, kProjThreads, 0, stream, p);
    return cuda_status(cudaGetLastError(), "mla_head_proj launch");
}

}  // namespace sieve::cuda
