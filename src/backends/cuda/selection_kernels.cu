// Selection: the Lightning Indexer's scores with the optional fused top-k (ops/indexer_scores.h), top-k (ops/topk.h) and top-k → cache slots (ops/selected_slots.h).
//
// indexer_scores: tensor cores where q and the keys are bf16 / e4m3 (indexer_scores_mma.cu: every deployed
// family); otherwise (f32 operands, more than 128 heads or dims) the fp32 kernel here: one thread block per
// (token, tile of keys). The block's q[t] (a chunk of heads × a
// chunk of dims at a time) and its keys (the same dims, converted to fp32 once) are staged in shared
// memory; each thread keeps a 4 heads × 4 keys register tile of dot products (fp32, fmaf, dims in
// ascending order), then adds w_h·ReLU(d) for its heads, and the head groups' partial sums are added in a
// fixed order. The key scale s_j multiplies that sum once. The result is a function of the inputs and
// the head count alone (the thread layout is chosen from n_heads), so two runs give the same bytes.
//
// topk: one thread block per row. A radix select over 32-bit rank keys (higher key = ranked first; NaN
// lowest; −0.0 = +0.0) finds the key T of the k-th pick and how many candidates m with key T are picked;
// the "ties to the lower index" rule then picks exactly the m lowest indices with key T. One in-order
// stream compaction (block prefix sums) writes {key > T} ∪ {first m of key = T} in ascending index
// order, as the contract wants the output, without any sort. Exact: integer keys only.
//
// The fused selection of indexer_scores writes the score rows (to `scores`, or to the workspace when
// the caller wants none) and runs the same top-k kernel over them with valid_len = n_keys.
//
// selected_slots: one thread per (token, entry), integer math only.
//
// Index arrays live on the device and are not range-checked by the backend (check_indices cannot run
// here). The kernels never touch memory because of a bad index; what they do instead is stated at each
// place (n_keys / valid_len clamped to [0, n_cols]; a key that cannot be located scores NaN; a slot that
// cannot be located is −1).
#include <algorithm>
#include <cstdint>

#include <cooperative_groups.h>
#include <cuda_bf16.h>

#include "backends/cuda/selection_kernels.h"
#include "backends/cuda/cuda_status.h"
#include "backends/cuda/fp8.cuh"
#include "backends/cuda/indexer_scores_args.cuh"
#include "backends/cuda/indexer_scores_mma.h"
#include "backends/cuda/selection_key_cache.cuh"
#include "sieve/ops/cache_record.h"

namespace sieve::cuda {
namespace {

namespace cg = cooperative_groups;

constexpr int64_t kMaxGridX = 0x7fffffff;  // grid x limit (2^31 − 1)
constexpr int64_t kMaxGridY = 65535;       // grid y limit

// ============================== indexer scores ==================================================

// HG head groups × KG key groups of threads (HG·KG = 256); each thread holds heads ty + HG·b and keys
// tx + KG·c (b, c < 4): a block covers HC = 4·HG heads per pass over the dims and KT = 4·KG keys. DC dims
// are staged per step (rows padded to DC + 1 floats: the threads of a warp read distinct banks).
template <int HG, int KG, int DC>
__global__ void __launch_bounds__(HG * KG) indexer_scores_kernel(ScoresArgs a) {
    constexpr int kThreads = HG * KG, HC = 4 * HG, KT = 4 * KG, P = DC + 1;
    static_assert(kThreads == 256, "indexer_scores_kernel: 256 threads");
    static_assert(HG * KT <= KT * P, "the head-group partial sums reuse the key tile");
    __shared__ float q_s[HC * P];   // q[t, hc0 + hl, d0 + dl] at hl·P + dl (0 past n_heads / head_dim)
    __shared__ float k_s[KT * P];   // key j0 + jl, value d0 + dl at jl·P + dl; at the end: red[g·KT + jl]
    __shared__ int64_t loc_s[KT];   // byte offset of key j0 + jl's values, or kNoCandidate / kUnlocatable
    float* const red = k_s;

    const int tid = static_cast<int>(threadIdx.x), tx = tid % KG, ty = tid / KG;
    const int64_t j0 = static_cast<int64_t>(blockIdx.x) * KT;
    const int64_t H = a.n_heads, D = a.head_dim;
    for (int64_t t = blockIdx.y; t < a.n_tokens; t += gridDim.y) {
        // n_keys[t] is promised in [0, n_cols]; clamped so that a bad count never writes past a score row.
        const int64_t n = min(max(static_cast<int64_t>(a.n_keys[t]), int64_t{0}), a.n_cols);
        if (j0 >= n) continue;  // uniform over the block
        __syncthreads();        // the previous token's readers of loc_s and red are done
        const int64_t req = a.token_request[t];
        const bool req_ok = a.inputs_ok && req >= 0 && req < a.n_requests;
        const int32_t* row = a.block_table + (req_ok ? req : 0) * a.block_table_stride;
        for (int jl = tid; jl < KT; jl += kThreads) loc_s[jl] = indexer_key_location(a, row, req_ok, j0 + jl, n);
        __syncthreads();

        // Without q or a valid key view (inputs_ok false) every candidate is kUnlocatable: nothing to compute.
        float part[4] = {0.0f, 0.0f, 0.0f, 0.0f};  // Σ over this thread's heads of w_h·ReLU(d) for keys tx + KG·c
        for (int64_t hc0 = 0; a.inputs_ok && hc0 < H; hc0 += HC) {
            float acc[4][4];
#pragma unroll
            for (int b = 0; b < 4; ++b)
#pragma unroll
                for (int c = 0; c < 4; ++c) acc[b][c] = 0.0f;
            for (int64_t d0 = 0; d0 < D; d0 += DC) {
                const int64_t q_base = t * a.q_token_stride;
                for (int idx = tid; idx < HC * DC; idx += kThreads) {
                    const int hl = idx / DC, dl = idx % DC;
                    const int64_t h = hc0 + hl, d = d0 + dl;
                    q_s[hl * P + dl] = h < H && d < D ? indexer_q_value(a, q_base + h * a.q_head_stride + d) : 0.0f;
                }
                for (int idx = tid; idx < KT * DC; idx += kThreads) {
                    const int jl = idx / DC, dl = idx % DC;
                    const int64_t d = d0 + dl, loc = loc_s[jl];
                    k_s[jl * P + dl] = loc >= 0 && d < D ? indexer_key_value(a.keys, loc, d) : 0.0f;
                }
                __syncthreads();
                // d[t, h, j] = Σ_i q·v in fp32, the dims in ascending order (the contract allows any order
                // and FMA; the test's bound is γ_{D+1}·Σ|q_i·v_i| per head).
#pragma unroll
                for (int dl = 0; dl < DC; ++dl) {
                    float qv[4], kv[4];
#pragma unroll
                    for (int b = 0; b < 4; ++b) qv[b] = q_s[(ty + HG * b) * P + dl];
#pragma unroll
                    for (int c = 0; c < 4; ++c) kv[c] = k_s[(tx + KG * c) * P + dl];
#pragma unroll
                    for (int b = 0; b < 4; ++b)
#pragma unroll
                        for (int c = 0; c < 4; ++c) acc[b][c] = fmaf(qv[b], kv[c], acc[b][c]);
                }
                __syncthreads();
            }
#pragma unroll
            for (int b = 0; b < 4; ++b) {
                const int64_t h = hc0 + ty + HG * b;
                if (h >= H) continue;
                const float w = indexer_head_weight(a, t, h);
#pragma unroll
                for (int c = 0; c < 4; ++c) {
                    const float d = acc[b][c];
                    // ReLU(x) = x > 0 ? x : 0: a NaN dot counts 0 (ops/indexer_scores.h).
                    part[c] = fmaf(w, d > 0.0f ? d : 0.0f, part[c]);
                }
            }
        }
        // The head groups' partial sums, added in group order (k_s is free: the dim loop ended with a
        // barrier; without inputs_ok red is written but never read).
#pragma unroll
        for (int c = 0; c < 4; ++c) red[ty * KT + tx + KG * c] = part[c];
        __syncthreads();
        float* const out_row = a.out + t * a.out_row_stride;
        for (int jl = tid; jl < KT; jl += kThreads) {
            const int64_t loc = loc_s[jl];
            if (loc == kNoCandidate) continue;  // columns j ≥ n_keys[t] are not written
            const int64_t j = j0 + jl;
            float v = __uint_as_float(0x7fc00000u);  // kUnlocatable: NaN
            if (loc >= 0) {
                float sum = 0.0f;
                for (int g = 0; g < HG; ++g) sum = __fadd_rn(sum, red[g * KT + jl]);
                // s_j applied once to the sum (the contract lets a factor common to every term go on the sum).
                sum = __fmul_rn(indexer_key_scale_of(a, row, j), sum);
                v = sum;
            }
            out_row[j] = v;
        }
    }
}

template <int HG, int KG, int DC>
Status launch_indexer_scores(const ScoresArgs& a, cudaStream_t stream) {
    constexpr int64_t KT = 4 * KG;
    const int64_t tiles = (a.n_cols + KT - 1) / KT;  // n_cols ≤ INT32_MAX (validate): far below the grid limit
    if (tiles > kMaxGridX) return unsupported_error("cuda: indexer_scores over {} key tiles (at most 2^31 − 1)", tiles);
    const dim3 grid(static_cast<unsigned>(tiles), static_cast<unsigned>(std::min(a.n_tokens, kMaxGridY)));
    indexer_scores_kernel<HG, KG, DC><<<grid, HG * KG, 0, stream>>>(a);
    return cuda_status(cudaGetLastError(), "indexer_scores launch");
}

// ============================== top-k ===========================================================

constexpr int kTopkThreads = 512;
constexpr int kTopkWarps = kTopkThreads / 32;
constexpr int kTopkItems = 4;  // consecutive candidates per thread in one compaction step
constexpr int kTopkBins = 256;  // 8-bit digits: 4 radix passes over the 32-bit keys

struct TopkArgs {
    const float* scores = nullptr;       // [n_rows, n_cols], row r at scores + r·scores_row_stride
    const int32_t* valid_len = nullptr;  // [n_rows] or nullptr
    int32_t* out = nullptr;              // [n_rows, k], row r at out + r·out_row_stride
    int32_t* out_count = nullptr;        // [n_rows] or nullptr
    int64_t n_rows = 0, n_cols = 0, k = 0, scores_row_stride = 0, out_row_stride = 0;
};

// The ranking of ops/topk.h as an unsigned key, larger = ranked first: the order-preserving map of the
// float bits (negative: all bits flipped; positive: sign bit set), with −0.0 made +0.0 (equal scores)
// and every NaN mapped to 0, below −inf (0x007fffff) and every number (sieve's choice: NaN last). Equal
// keys are exactly equal ranks; their order is the index (lower first), applied by the selection.
__device__ __forceinline__ uint32_t topk_rank_key(float f) {
    uint32_t u = __float_as_uint(f);
    const uint32_t mag = u & 0x7fffffffu;
    if (mag > 0x7f800000u) return 0u;  // NaN, either sign
    if (mag == 0u) u = 0u;             // −0.0 → +0.0
    return (u & 0x80000000u) != 0u ? ~u : (u | 0x80000000u);
}

// Exclusive prefix sum of v over the block (thread order) and the block's total; every thread must call
// it. `warp_sums` is [kTopkWarps] shared scratch, free again on return.
__device__ uint32_t topk_block_exclusive_scan(uint32_t v, uint32_t* warp_sums, uint32_t& total) {
    const int lane = static_cast<int>(threadIdx.x) % 32, warp = static_cast<int>(threadIdx.x) / 32;
    uint32_t x = v;
#pragma unroll
    for (int o = 1; o < 32; o *= 2) {
        const uint32_t y = __shfl_up_sync(0xffffffffu, x, o);
        if (lane >= o) x += y;
    }
    if (lane == 31) warp_sums[warp] = x;
    __syncthreads();
    if (warp == 0) {
        uint32_t w = lane < kTopkWarps ? warp_sums[lane] : 0u;
#pragma unroll
        for (int o = 1; o < 32; o *= 2) {
            const uint32_t y = __shfl_up_sync(0xffffffffu, w, o);
            if (lane >= o) w += y;
        }
        if (lane < kTopkWarps) warp_sums[lane] = w;  // inclusive over warps
    }
    __syncthreads();
    const uint32_t before = warp == 0 ? 0u : warp_sums[warp - 1];
    total = warp_sums[kTopkWarps - 1];
    __syncthreads();  // warp_sums may be reused at once
    return before + x - v;
}

// One histogram step of a warp: the lanes that take their candidate add 1 to bin `digit`. When every taker
// has the same digit (heavy ties: constant rows, ReLU zeros) one lane adds them all, so that they do not
// serialize on one shared-memory counter; otherwise each taker adds its own 1 (distinct digits rarely
// collide). Every lane of the warp must call it.
__device__ __forceinline__ void topk_histogram_add(uint32_t* hist, bool take, uint32_t digit, int lane) {
    const uint32_t takers = __ballot_sync(0xffffffffu, take);
    if (takers == 0u) return;
    const int leader = __ffs(static_cast<int>(takers)) - 1;
    const uint32_t leader_digit = __shfl_sync(0xffffffffu, digit, leader);
    const bool same = __all_sync(0xffffffffu, !take || digit == leader_digit);
    if (same) {
        if (lane == leader) atomicAdd(&hist[leader_digit], static_cast<uint32_t>(__popc(takers)));
    } else if (take) {
        atomicAdd(&hist[digit], 1u);
    }
}

// One radix pass's choice, by warp 0 over a complete histogram of the matching candidates: the digit of the
// `remaining`-th best candidate and how many of its bin are still to pick (both into shared memory). Lane l
// owns bins 255 − 8l down to 248 − 8l (the best digits first); a warp scan of the lanes' counts finds the one
// lane whose bins hold that candidate.
__device__ __forceinline__ void topk_choose_digit(const uint32_t* hist, uint32_t remaining, int lane, uint32_t* s_digit,
                                                  uint32_t* s_remaining) {
    uint32_t c[8], local = 0u;
#pragma unroll
    for (int q = 0; q < 8; ++q) {
        c[q] = hist[kTopkBins - 1 - 8 * lane - q];
        local += c[q];
    }
    uint32_t incl = local;
#pragma unroll
    for (int off = 1; off < 32; off *= 2) {
        const uint32_t y = __shfl_up_sync(0xffffffffu, incl, off);
        if (lane >= off) incl += y;
    }
    const uint32_t above = incl - local;  // matching keys in better bins than this lane's
    if (above < remaining && remaining <= incl) {  // exactly one lane
        uint32_t acc = above;
#pragma unroll
        for (int q = 0; q < 8; ++q) {
            if (acc + c[q] >= remaining) {
                *s_digit = static_cast<uint32_t>(kTopkBins - 1 - 8 * lane - q);
                *s_remaining = remaining - acc;
                break;
            }
            acc += c[q];
        }
    }
}

// Row r of the selection (blockIdx.x = r): ops/topk.h exactly.
__global__ void __launch_bounds__(kTopkThreads) topk_f32_kernel(TopkArgs a) {
    __shared__ uint32_t hist[kTopkBins];
    __shared__ uint32_t warp_sums[kTopkWarps];
    __shared__ uint32_t s_digit, s_remaining;

    const int tid = static_cast<int>(threadIdx.x), lane = tid % 32;
    const int64_t r = blockIdx.x;
    const float* s = a.scores + r * a.scores_row_stride;
    int32_t* o = a.out + r * a.out_row_stride;
    // valid_len[r] is promised in [0, n_cols]; clamped so that a bad length never reads past the row.
    const int64_t n =
        a.valid_len != nullptr ? min(max(static_cast<int64_t>(a.valid_len[r]), int64_t{0}), a.n_cols) : a.n_cols;
    const int64_t picks = min(a.k, n);

    if (picks == n) {
        // Every candidate is picked: the picks in ascending index order are 0 … n − 1.
        for (int64_t i = tid; i < n; i += kTopkThreads) o[i] = static_cast<int32_t>(i);
    } else {
        // 1 ≤ picks < n ≤ INT32_MAX. Radix select, most significant digit first: among the candidates whose
        // key matches `prefix` on the bits of `mask`, `remaining` are still to be picked; the digit whose
        // bucket holds the remaining-th best such key is fixed next.
        uint32_t prefix = 0u, mask = 0u, remaining = static_cast<uint32_t>(picks);
        for (int shift = 24; shift >= 0; shift -= 8) {
            for (int i = tid; i < kTopkBins; i += kTopkThreads) hist[i] = 0u;
            __syncthreads();
            for (int64_t i0 = 0; i0 < n; i0 += kTopkThreads) {  // every thread runs every step: full warps
                const int64_t i = i0 + tid;
                uint32_t key = 0u;
                bool take = false;
                if (i < n) {
                    key = topk_rank_key(s[i]);
                    take = (key & mask) == prefix;
                }
                const uint32_t digit = (key >> shift) & 0xffu;
                topk_histogram_add(hist, take, digit, lane);
            }
            __syncthreads();
            if (tid < 32) topk_choose_digit(hist, remaining, lane, &s_digit, &s_remaining);
            __syncthreads();
            prefix |= s_digit << shift;
            mask |= 0xffu << shift;
            remaining = s_remaining;
        }
        // T = prefix is the key of the last pick; `remaining` of the candidates with key T are picked: by
        // the tie rule, the lowest indices among them. Every key > T is picked. One in-order compaction
        // writes the picks ascending.
        const uint32_t threshold = prefix, take_equal = remaining;
        uint32_t equal_before = 0u, picked_before = 0u;
        for (int64_t c0 = 0; c0 < n && picked_before < static_cast<uint32_t>(picks);
             c0 += int64_t{kTopkThreads} * kTopkItems) {
            const int64_t i0 = c0 + int64_t{tid} * kTopkItems;
            uint32_t above = 0u, equal = 0u;  // bit q: candidate i0 + q
#pragma unroll
            for (int q = 0; q < kTopkItems; ++q) {
                if (i0 + q >= n) break;
                const uint32_t key = topk_rank_key(s[i0 + q]);
                if (key > threshold) above |= 1u << q;
                if (key == threshold) equal |= 1u << q;
            }
            uint32_t equal_total = 0u, picked_total = 0u;
            uint32_t equal_rank = equal_before + topk_block_exclusive_scan(static_cast<uint32_t>(__popc(equal)), warp_sums, equal_total);
            uint32_t pick = above;
#pragma unroll
            for (int q = 0; q < kTopkItems; ++q) {
                if ((equal >> q) & 1u) {
                    if (equal_rank < take_equal) pick |= 1u << q;
                    ++equal_rank;
                }
            }
            uint32_t pos = picked_before + topk_block_exclusive_scan(static_cast<uint32_t>(__popc(pick)), warp_sums, picked_total);
#pragma unroll
            for (int q = 0; q < kTopkItems; ++q) {
                if ((pick >> q) & 1u) {
                    if (pos < static_cast<uint32_t>(picks)) o[pos] = static_cast<int32_t>(i0 + q);
                    ++pos;
                }
            }
            equal_before += equal_total;
            picked_before += picked_total;
        }
    }
    for (int64_t i = picks + tid; i < a.k; i += kTopkThreads) o[i] = -1;  // −1 up to width k
    if (a.out_count != nullptr && tid == 0) a.out_count[r] = static_cast<int32_t>(picks);
}

// ---- top-k over a cluster of blocks (sm_90 thread-block clusters) ----
//
// The same selection with a row spread over the kClusterBlocks blocks of one cluster: each block turns its
// segment of the row into rank keys in its own shared memory ONCE, and every radix pass then histograms
// shared memory only; the blocks add each other's histograms through distributed shared memory and so
// take the same digit. At the end each block counts its picks, learns the counts of the blocks before it
// (so the output stays in ascending index order and the ties go to the lowest indices of the whole row),
// and compacts its own segment. One read of the row from global memory instead of five.
constexpr int kClusterBlocks = 8;
constexpr int64_t kClusterMaxSegment = 24576;  // keys per block (96 KiB of shared memory): rows up to 196 608

__global__ void __cluster_dims__(kClusterBlocks, 1, 1) __launch_bounds__(kTopkThreads)
    topk_cluster_kernel(TopkArgs a, int64_t segment) {
    extern __shared__ uint32_t keys_s[];  // [segment] rank keys of this block's part of the row
    __shared__ uint32_t hist[kTopkBins];
    __shared__ uint32_t total_s[kTopkBins];
    __shared__ uint32_t warp_sums[kTopkWarps];
    __shared__ uint32_t s_digit, s_remaining, s_counts[2];  // s_counts: keys > T, keys = T in this segment

    cg::cluster_group cluster = cg::this_cluster();
    const int tid = static_cast<int>(threadIdx.x), lane = tid % 32;
    const int rank = static_cast<int>(cluster.block_rank());
    for (int64_t r = blockIdx.y; r < a.n_rows; r += gridDim.y) {  // uniform over the cluster
        const float* s = a.scores + r * a.scores_row_stride;
        int32_t* o = a.out + r * a.out_row_stride;
        const int64_t n =
            a.valid_len != nullptr ? min(max(static_cast<int64_t>(a.valid_len[r]), int64_t{0}), a.n_cols) : a.n_cols;
        const int64_t picks = min(a.k, n);
        const int64_t begin = min(rank * segment, n), len = min(segment, n - begin);
        if (picks == n) {
            for (int64_t i = tid; i < len; i += kTopkThreads) o[begin + i] = static_cast<int32_t>(begin + i);
        } else {
            for (int64_t i = tid; i < len; i += kTopkThreads) keys_s[i] = topk_rank_key(s[begin + i]);
            uint32_t prefix = 0u, mask = 0u, remaining = static_cast<uint32_t>(picks);
            for (int shift = 24; shift >= 0; shift -= 8) {
                for (int i = tid; i < kTopkBins; i += kTopkThreads) hist[i] = 0u;
                __syncthreads();
                for (int64_t i0 = 0; i0 < len; i0 += kTopkThreads) {
                    const int64_t i = i0 + tid;
                    uint32_t key = 0u;
                    bool take = false;
                    if (i < len) {
                        key = keys_s[i];
                        take = (key & mask) == prefix;
                    }
                    const uint32_t digit = (key >> shift) & 0xffu;
                    topk_histogram_add(hist, take, digit, lane);
                }
                cluster.sync();  // every block's histogram is complete
                for (int d = tid; d < kTopkBins; d += kTopkThreads) {
                    uint32_t sum = 0u;
                    for (int b = 0; b < kClusterBlocks; ++b) sum += cluster.map_shared_rank(hist, b)[d];
                    total_s[d] = sum;
                }
                cluster.sync();  // nobody reads a histogram any more: the next pass may clear them
                if (tid < 32) topk_choose_digit(total_s, remaining, lane, &s_digit, &s_remaining);
                __syncthreads();
                prefix |= s_digit << shift;
                mask |= 0xffu << shift;
                remaining = s_remaining;
            }
            const uint32_t threshold = prefix, take_equal = remaining;
            // This segment's keys above and equal to T, then the same of the blocks before it.
            uint32_t above = 0u, equal = 0u;
            for (int64_t i = tid; i < len; i += kTopkThreads) {
                above += keys_s[i] > threshold ? 1u : 0u;
                equal += keys_s[i] == threshold ? 1u : 0u;
            }
            uint32_t above_total = 0u, equal_total = 0u;
            topk_block_exclusive_scan(above, warp_sums, above_total);
            topk_block_exclusive_scan(equal, warp_sums, equal_total);
            if (tid == 0) s_counts[0] = above_total, s_counts[1] = equal_total;
            cluster.sync();
            uint32_t picked_before = 0u, equal_before = 0u;
            for (int b = 0; b < rank; ++b) {
                const uint32_t* other = cluster.map_shared_rank(s_counts, b);
                const uint32_t eq = other[1];
                const uint32_t eq_taken = equal_before >= take_equal ? 0u : min(eq, take_equal - equal_before);
                picked_before += other[0] + eq_taken;
                equal_before += eq;
            }
            // In-order compaction of this segment (as topk_f32_kernel's, over shared memory).
            for (int64_t c0 = 0; c0 < len; c0 += int64_t{kTopkThreads} * kTopkItems) {
                const int64_t i0 = c0 + int64_t{tid} * kTopkItems;
                uint32_t ab = 0u, eq = 0u;
#pragma unroll
                for (int q = 0; q < kTopkItems; ++q) {
                    if (i0 + q >= len) break;
                    const uint32_t key = keys_s[i0 + q];
                    if (key > threshold) ab |= 1u << q;
                    if (key == threshold) eq |= 1u << q;
                }
                uint32_t eq_step = 0u, picked_step = 0u;
                uint32_t equal_rank = equal_before + topk_block_exclusive_scan(static_cast<uint32_t>(__popc(eq)), warp_sums, eq_step);
                uint32_t pick = ab;
#pragma unroll
                for (int q = 0; q < kTopkItems; ++q) {
                    if ((eq >> q) & 1u) {
                        if (equal_rank < take_equal) pick |= 1u << q;
                        ++equal_rank;
                    }
                }
                uint32_t pos = picked_before + topk_block_exclusive_scan(static_cast<uint32_t>(__popc(pick)), warp_sums, picked_step);
#pragma unroll
                for (int q = 0; q < kTopkItems; ++q) {
                    if ((pick >> q) & 1u) {
                        if (pos < static_cast<uint32_t>(picks)) o[pos] = static_cast<int32_t>(begin + i0 + q);
                        ++pos;
                    }
                }
                equal_before += eq_step;
                picked_before += picked_step;
            }
        }
        if (rank == 0) {
            for (int64_t i = picks + tid; i < a.k; i += kTopkThreads) o[i] = -1;  // −1 up to width k
            if (a.out_count != nullptr && tid == 0) a.out_count[r] = static_cast<int32_t>(picks);
        }
        cluster.sync();  // no block leaves (or reuses its shared memory) while another still reads it
    }
}

Status launch_topk(const TopkArgs& a, cudaStream_t stream) {
    if (a.n_rows == 0) return Status::ok();
    const int64_t segment = (a.n_cols + kClusterBlocks - 1) / kClusterBlocks;
    if (segment <= kClusterMaxSegment) {
        static const cudaError_t attribute =
            cudaFuncSetAttribute(topk_cluster_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                 static_cast<int>(kClusterMaxSegment * sizeof(uint32_t)));
        SIEVE_RETURN_IF_ERROR(cuda_status(attribute, "topk: shared memory of the cluster kernel"));
        const dim3 grid(kClusterBlocks, static_cast<unsigned>(std::min(a.n_rows, kMaxGridY)));
        topk_cluster_kernel<<<grid, kTopkThreads, static_cast<size_t>(std::max<int64_t>(segment, 1)) * sizeof(uint32_t), stream>>>(
            a, std::max<int64_t>(segment, 1));
        return cuda_status(cudaGetLastError(), "topk launch (cluster)");
    }
    if (a.n_rows > kMaxGridX) return unsupported_error("cuda: topk over {} rows (at most 2^31 − 1)", a.n_rows);
    topk_f32_kernel<<<static_cast<unsigned>(a.n_rows), kTopkThreads, 0, stream>>>(a);
    return cuda_status(cudaGetLastError(), "topk launch");
}

// ============================== selected slots ==================================================

constexpr int kSlotsThreads = 256;
constexpr int64_t kSlotsMaxBlocks = int64_t{1} << 16;  // a grid-stride loop covers the rest

__global__ void __launch_bounds__(kSlotsThreads) selected_slots_kernel(SelectedSlotsParams p) {
    const int64_t total = p.n_tokens * p.width;
    for (int64_t i = static_cast<int64_t>(blockIdx.x) * kSlotsThreads + threadIdx.x; i < total;
         i += static_cast<int64_t>(gridDim.x) * kSlotsThreads) {
        const int64_t t = i / p.width, j = i - t * p.width;
        const int64_t visible = (p.positions[t] + 1) / p.ratio;  // causal: entries whose `ratio` tokens exist
        const bool every = p.selected == nullptr || (p.n_scored != nullptr && p.n_scored[t] == 0);
        const int64_t e = every ? j : static_cast<int64_t>(p.selected[t * p.selected_row_stride + j]);
        int32_t slot = -1;  // −1, or a non-causal entry: none
        if (e >= 0 && e < visible) {
            // paged_slot (ops/block_tables.h). The backend cannot run check_indices: a request row out of
            // [0, n_requests), a block past the table row, a released block (id < 0) or a slot ≥ n_slots
            // gives −1 (none) instead of reading outside the table or naming a slot outside the cache.
            const int64_t q = p.tables.token_request[t];
            if (q >= 0 && q < p.tables.n_requests) {
                const int64_t b = e / p.block_size;
                if (b < p.tables.block_table_stride) {
                    const int64_t id = p.tables.block_table[q * p.tables.block_table_stride + b];
                    if (id >= 0 && id <= p.n_slots / p.block_size) {  // id · block_size ≤ n_slots: no overflow
                        const int64_t s = id * p.block_size + (e - b * p.block_size);
                        if (s < p.n_slots) slot = static_cast<int32_t>(s);  // n_slots ≤ 2^31 (validate)
                    }
                }
            }
        }
        p.slots[t * p.slots_row_stride + j] = slot;
    }
}

}  // namespace

size_t indexer_scores_workspace_size(const IndexerScoresParams& p) {
    // A fused selection without score rows keeps the full [n_tokens, n_cols] fp32 rows here (row stride
    // n_cols) and runs the top-k over them: n_tokens · n_cols · 4 bytes (a streaming fused top-k that
    // keeps no rows is later work, performance_facts.md §5).
    if (p.selected == nullptr || p.scores != nullptr || p.n_tokens <= 0 || p.n_cols <= 0) return 0;
    return workspace_round_up(static_cast<size_t>(p.n_tokens) * static_cast<size_t>(p.n_cols) * sizeof(float));
}

Status indexer_scores(const IndexerScoresParams& p, Workspace ws, cudaStream_t stream) {
    if (p.n_tokens == 0) return Status::ok();
    const bool fused = p.selected != nullptr;
    float* rows = p.scores;
    int64_t row_stride = p.scores_row_stride;
    if (fused && rows == nullptr && p.n_cols > 0) {
        rows = static_cast<float*>(ws.data);  // indexer_scores_workspace_size; the backend checked size and alignment
        row_stride = p.n_cols;
    }
    if (rows != nullptr && p.n_cols > 0) {
        const CacheRecordLayout layout = p.key_layout();
        ScoresArgs a;
        a.q = p.q;
        a.q_format = p.q_type == DType::f8_e4m3 ? kIndexerQE4m3 : p.q_type == DType::bf16 ? kIndexerQBf16 : kIndexerQF32;
        a.q_scale = p.q_scale;
        a.weights = p.weights;
        a.weight_scale = p.weight_scale;
        a.keys.base = p.keys.base;
        a.keys.block_bytes = p.keys.block_bytes;
        a.keys.block_size = p.keys.block_size;
        a.keys.data_bytes = layout.data_bytes();
        a.keys.format = p.key_format == CacheRecordFormat::fp8_row_scale ? kIndexerKeyFp8RowScale
                        : p.key_format == CacheRecordFormat::bf16        ? kIndexerKeyBf16
                                                                         : kIndexerKeyF32;
        // check_indices' view check (it reads no memory): a view it would refuse is never read.
        const bool view_ok = validate_cache_view("indexer_scores", "keys", p.keys, layout, p.n_slots).is_ok();
        if (view_ok) {  // block_size ≥ 1 and the block's byte extent fits int64 (validate_cache_view)
            a.keys.scales_offset = p.keys.block_size * layout.data_bytes();
            a.keys.n_blocks = p.n_slots / p.keys.block_size;
        }
        a.inputs_ok = view_ok && p.q != nullptr && (p.q_type != DType::f8_e4m3 || p.q_scale != nullptr);
        if (view_ok) {
            // Plain f32 / bf16 keys are read as elements: their blocks must be element-aligned on the device.
            const int64_t elem = p.key_format == CacheRecordFormat::f32 ? 4 : p.key_format == CacheRecordFormat::bf16 ? 2 : 1;
            if (reinterpret_cast<uintptr_t>(p.keys.base) % static_cast<uintptr_t>(elem) != 0 || p.keys.block_bytes % elem != 0)
                return unsupported_error("cuda: indexer_scores {} keys at {} with block_bytes {}: blocks must be {}-byte aligned",
                                         cache_record_format_name(p.key_format), static_cast<const void*>(p.keys.base),
                                         p.keys.block_bytes, elem);
        }
        a.block_table = p.tables.block_table;
        a.token_request = p.tables.token_request;
        a.n_requests = p.tables.n_requests;
        a.block_table_stride = p.tables.block_table_stride;
        a.n_keys = p.n_keys;
        a.out = rows;
        a.out_row_stride = row_stride;
        a.n_tokens = p.n_tokens;
        a.n_heads = p.n_heads;
        a.head_dim = p.head_dim;
        a.n_cols = p.n_cols;
        a.q_token_stride = p.q_token_stride;
        a.q_head_stride = p.q_head_stride;
        a.q_scale_token_stride = p.q_scale_token_stride;
        a.weights_token_stride = p.weights_token_stride;
        // Tensor cores where the operands allow (indexer_scores_mma.h). Otherwise the fp32 kernel, whose
        // thread layout follows the head count (QSA: 4 heads, V4 / DSA: 64), so that few heads do not leave
        // most threads idle.
        if (indexer_scores_mma_supported(a)) {
            SIEVE_RETURN_IF_ERROR(launch_indexer_scores_mma(a, stream));
        } else if (p.n_heads <= 4) {
            SIEVE_RETURN_IF_ERROR((launch_indexer_scores<1, 256, 8>(a, stream)));  // 4 heads × 1024 keys per block
        } else if (p.n_heads <= 16) {
            SIEVE_RETURN_IF_ERROR((launch_indexer_scores<4, 64, 16>(a, stream)));  // 16 heads × 256 keys per pass
        } else {
            SIEVE_RETURN_IF_ERROR((launch_indexer_scores<16, 16, 32>(a, stream)));  // 64 heads × 64 keys per pass
        }
    }
    if (!fused) return Status::ok();
    // The fused selection: ops/topk.h over this backend's own score rows, valid_len = n_keys.
    TopkArgs t;
    t.scores = rows;
    t.valid_len = p.n_keys;
    t.out = p.selected;
    t.n_rows = p.n_tokens;
    t.n_cols = p.n_cols;
    t.k = p.k;
    t.scores_row_stride = row_stride;
    t.out_row_stride = p.selected_row_stride;
    return launch_topk(t, stream);
}

size_t topk_workspace_size(const TopkParams&) { return 0; }  // the selection keeps its state in shared memory

Status topk(const TopkParams& p, Workspace, cudaStream_t stream) {
    TopkArgs a;
    a.scores = p.scores;
    a.valid_len = p.valid_len;
    a.out = p.out;
    a.out_count = p.out_count;
    a.n_rows = p.n_rows;
    a.n_cols = p.n_cols;
    a.k = p.k;
    a.scores_row_stride = p.scores_row_stride;
    a.out_row_stride = p.out_row_stride;
    return launch_topk(a, stream);
}

Status selected_slots(const SelectedSlotsParams& p, cudaStream_t stream) {
    const int64_t total = p.n_tokens * p.width;  // validate bounds both extents
    if (total == 0) return Status::ok();
    const int64_t blocks = std::min((total + kSlotsThreads - 1) / kSlotsThreads, kSlotsMaxBlocks);
    selected_slots_kernel<<<static_cast<unsigned>(blocks), kSlotsThreads, 0, stream>>>(p);
    return cuda_status(cudaGetLastError(), "selected_slots launch");
}

}  // namespace sieve::cuda
