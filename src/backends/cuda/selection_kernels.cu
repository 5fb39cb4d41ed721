// Selection: the Lightning Indexer's scores with the optional fused top-k (ops/indexer_scores.h), top-k (ops/topk.h) and top-k → cache slots (ops/selected_slots.h).
//
// indexer_scores: tensor cores where q and the keys are bf16 / e4m3 (indexer_scores_wgmma.cu: the deployed
// e4m3 q against fp8 keys of every family; indexer_scores_mma.cu: the other cases); otherwise (f32
// operands, more than 128 heads or dims) the fp32 kernel here: one thread block per (token, tile of keys).
// The block's q[t] (a chunk of heads × a chunk of dims at a time) and its keys (the same dims, converted
// to fp32 once) are staged in shared memory; each thread keeps a 4 heads × 4 keys register tile of dot
// products (fp32, fmaf, dims in ascending order), then adds w_h·ReLU(d) for its heads, and the head
// groups' partial sums are added in a fixed order. The key scale s_j multiplies that sum once. The result
// is a function of the inputs and the head count alone (the thread layout is chosen from n_heads), so two
// runs give the same bytes.
//
// topk: a radix select over 32-bit rank keys in three passes, then one in-order write of the picks, no sort
// (the "top-k" section below): a few rows spread over a cluster of 8 blocks each, more rows 2 blocks each.
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
#include "backends/cuda/dependent_launch.cuh"
#include "backends/cuda/fp8.cuh"
#include "backends/cuda/indexer_scores_args.cuh"
#include "backends/cuda/indexer_scores_mma.h"
#include "backends/cuda/indexer_scores_wgmma.h"
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
    wait_for_previous_kernel();
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
    launch_after_previous(indexer_scores_kernel<HG, KG, DC>, grid, HG * KG, 0, stream, a);
    return cuda_status(cudaGetLastError(), "indexer_scores launch");
}

// ============================== top-k ===========================================================
//
// Both kernels run the same radix select over 32-bit rank keys (higher key = ranked first; NaN lowest;
// −0.0 = +0.0): three passes of 11, 11 and 10 bits, most significant first, each a histogram of the keys
// that match the digits fixed so far and the choice of the digit whose bin holds the remaining-th best
// such key. That gives the key T of the k-th pick and how many m of the keys equal to T are picked; the
// tie rule ("ties to the lower index") then picks exactly the m lowest indices with key T. Each warp owns
// a contiguous part of the row, counts its keys > T and = T, learns the counts of the parts before it,
// and writes its picks {key > T} ∪ {first m of key = T} at their places in ascending index order by
// ballots and warp scans: no sort, integer keys only, exact.
//
// - topk_cluster_kernel (rows of at most kClusterBlocks · kClusterMaxSegment, few rows): a row spread
//   over the blocks of one cluster, its keys read once into their shared memory.
// - topk_row_kernel (every other case): two blocks (a cluster) per row, each streaming its half of the
//   row from global memory (the L2 cache after the first read) once per pass.

constexpr int kTopkThreads = 1024;  // one block fills a multiprocessor's warps
constexpr int kTopkWarps = kTopkThreads / 32;
constexpr int kTopkBins = 2048;     // 11-bit digits
constexpr int kTopkBinsPerThread = kTopkBins / kTopkThreads;
constexpr int kTopkCandidates = 8192;  // keys of the first digit's chosen bin kept in shared memory
static_assert(kTopkBinsPerThread == 2, "topk_choose_digit takes two bins per thread");
static_assert(kTopkWarps == 32, "one warp scans or sums the warps' values");

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

// Row r's candidates: valid_len[r] is promised in [0, n_cols]; clamped so that a bad length never reads
// past the row. At most INT32_MAX (validate).
__device__ __forceinline__ int topk_row_length(const TopkArgs& a, int64_t r) {
    return static_cast<int>(
        a.valid_len != nullptr ? min(max(static_cast<int64_t>(a.valid_len[r]), int64_t{0}), a.n_cols) : a.n_cols);
}

// The digits, most significant first: bits 31–21, 20–10 and 9–0 of the rank key.
__device__ __forceinline__ int topk_digit_shift(int pass) { return pass == 0 ? 21 : pass == 1 ? 10 : 0; }
__device__ __forceinline__ uint32_t topk_digit_mask(int pass) { return pass == 2 ? 0x3ffu : 0x7ffu; }
// The bits fixed before pass `pass` (> 0).
__device__ __forceinline__ uint32_t topk_fixed_mask(int pass) { return ~0u << topk_digit_shift(pass - 1); }

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
        uint32_t w = warp_sums[lane];
#pragma unroll
        for (int o = 1; o < 32; o *= 2) {
            const uint32_t y = __shfl_up_sync(0xffffffffu, w, o);
            if (lane >= o) w += y;
        }
        warp_sums[lane] = w;  // inclusive over warps
    }
    __syncthreads();
    const uint32_t before = warp == 0 ? 0u : warp_sums[warp - 1];
    total = warp_sums[kTopkWarps - 1];
    __syncthreads();  // warp_sums may be reused at once
    return before + x - v;
}

// Inclusive prefix sum of v over the warp's lanes.
__device__ __forceinline__ uint32_t topk_warp_inclusive_scan(uint32_t v, int lane) {
#pragma unroll
    for (int o = 1; o < 32; o *= 2) {
        const uint32_t y = __shfl_up_sync(0xffffffffu, v, o);
        if (lane >= o) v += y;
    }
    return v;
}

// The bins of thread t: kTopkBins − 2(t + 1) + 1 (better) and kTopkBins − 2(t + 1), the best digits first.
__device__ __forceinline__ int topk_low_bin() { return kTopkBins - kTopkBinsPerThread * (static_cast<int>(threadIdx.x) + 1); }

// One pass's choice, by the whole block, from each thread's counts of its two bins (counts.y: the better
// one): the digit of the `remaining`-th best matching key and how many of its bin are still to pick (into
// shared memory; every thread reads them after the barrier at the end). A block scan of the threads'
// counts finds the one thread whose bins hold that key.
__device__ void topk_choose_digit(uint2 counts, uint32_t remaining, uint32_t* warp_sums, uint32_t* s_digit,
                                  uint32_t* s_remaining) {
    const int low = topk_low_bin();
    uint32_t total = 0u;
    const uint32_t above = topk_block_exclusive_scan(counts.x + counts.y, warp_sums, total);  // in better bins
    if (above < remaining && remaining <= above + counts.y) {
        *s_digit = static_cast<uint32_t>(low + 1);
        *s_remaining = remaining - above;
    } else if (above + counts.y < remaining && remaining <= above + counts.y + counts.x) {
        *s_digit = static_cast<uint32_t>(low);
        *s_remaining = remaining - above - counts.y;
    }
    __syncthreads();
}

// One histogram step: each thread that takes its key adds 1 to bin `digit`. Plain shared-memory atomics:
// measured on the H200, warp aggregation (__match_any_sync, or one add when every taker has the same
// digit) cost more than the hardware's own handling of lanes that hit one counter, on a first digit where
// half the row shares a handful of bins (the cluster kernel's first pass over 128K keys: 2.3 µs plain,
// 3.8 µs with the same-digit check, 11.7 µs with __match_any_sync).
__device__ __forceinline__ void topk_histogram_add(uint32_t* hist, bool take, uint32_t digit) {
    if (take) atomicAdd(&hist[digit], 1u);
}

// Appends the keys of the lanes that take theirs to `list` (capacity kTopkCandidates; the count goes on
// past it, so that the caller sees the overflow) in any order. Every lane of the warp must call it.
__device__ __forceinline__ void topk_append(uint32_t* list, uint32_t* count, bool take, uint32_t key, int lane) {
    const uint32_t takers = __ballot_sync(0xffffffffu, take);
    if (takers == 0u) return;
    const int leader = __ffs(static_cast<int>(takers)) - 1;
    uint32_t base = 0u;
    if (lane == leader) base = atomicAdd(count, static_cast<uint32_t>(__popc(takers)));
    base = __shfl_sync(0xffffffffu, base, leader);
    const uint32_t at = base + static_cast<uint32_t>(__popc(takers & ((1u << lane) - 1u)));
    if (take && at < static_cast<uint32_t>(kTopkCandidates)) list[at] = key;
}

// The picks of this thread's `items` consecutive keys (bit q: key q) that are > T or = T (`above`,
// `equal`), written at out[pos …] for the warp, lane order then bit order: equal keys are picked while
// their rank among the equal keys (from `equal_rank`) is below `take_equal`. `pos` and `equal_rank` advance
// by the warp's picks and equal keys. Every lane of the warp must call it.
__device__ __forceinline__ void topk_write_picks(int32_t* out, int32_t first_index, uint32_t above, uint32_t equal,
                                                 uint32_t take_equal, uint32_t& pos, uint32_t& equal_rank, int lane) {
    uint32_t pick = above;
    if (__any_sync(0xffffffffu, equal != 0u)) {  // rare: only keys equal to T
        const uint32_t incl = topk_warp_inclusive_scan(static_cast<uint32_t>(__popc(equal)), lane);
        uint32_t rank = equal_rank + incl - static_cast<uint32_t>(__popc(equal));
        for (uint32_t bits = equal; bits != 0u; bits &= bits - 1u, ++rank)
            if (rank < take_equal) pick |= bits & (~bits + 1u);
        equal_rank += __shfl_sync(0xffffffffu, incl, 31);
    }
    const uint32_t incl = topk_warp_inclusive_scan(static_cast<uint32_t>(__popc(pick)), lane);
    uint32_t at = pos + incl - static_cast<uint32_t>(__popc(pick));
    for (uint32_t bits = pick; bits != 0u; bits &= bits - 1u)
        out[at++] = first_index + static_cast<int32_t>(__ffs(static_cast<int>(bits)) - 1);
    pos += __shfl_sync(0xffffffffu, incl, 31);
}

// The picks before warp `warp`'s part: the keys > T of the parts before it plus the first `take_equal` of
// their keys = T (`before_above`, `before_equal`: the same of the blocks before this one).
__device__ __forceinline__ void topk_part_start(const uint32_t* part_above, const uint32_t* part_equal, int warp,
                                                uint32_t before_above, uint32_t before_equal, uint32_t take_equal,
                                                uint32_t& pos, uint32_t& equal_rank) {
    for (int w = 0; w < warp; ++w) before_above += part_above[w], before_equal += part_equal[w];
    pos = before_above + min(before_equal, take_equal);
    equal_rank = before_equal;
}

// The picks before warp `warp`'s part when a row's parts run over the blocks of a cluster in rank order:
// this lane's counts of keys > T and = T (`above`, `equal`) summed over the warp and published per warp and
// per block (part_above, part_equal, s_counts), then the blocks before this one read through distributed
// shared memory. Every thread of every block of the cluster must call it.
__device__ void topk_cluster_part_start(const cg::cluster_group& cluster, uint32_t above, uint32_t equal, uint32_t* part_above,
                                        uint32_t* part_equal, uint32_t* s_counts, uint32_t take_equal, uint32_t& pos,
                                        uint32_t& equal_rank) {
    const int lane = static_cast<int>(threadIdx.x) % 32, warp = static_cast<int>(threadIdx.x) / 32;
    above = __reduce_add_sync(0xffffffffu, above);
    equal = __reduce_add_sync(0xffffffffu, equal);
    if (lane == 0) part_above[warp] = above, part_equal[warp] = equal;
    __syncthreads();
    if (warp == 0) {
        const uint32_t ab = __reduce_add_sync(0xffffffffu, part_above[lane]);
        const uint32_t eq = __reduce_add_sync(0xffffffffu, part_equal[lane]);
        if (lane == 0) s_counts[0] = ab, s_counts[1] = eq;
    }
    cluster.sync();  // every block's counts are in its s_counts
    uint32_t before_above = 0u, before_equal = 0u;
    for (unsigned b = 0; b < cluster.block_rank(); ++b) {
        const uint32_t* const other = cluster.map_shared_rank(s_counts, b);
        before_above += other[0];
        before_equal += other[1];
    }
    topk_part_start(part_above, part_equal, warp, before_above, before_equal, take_equal, pos, equal_rank);
}

// ---- top-k, two blocks per row, streaming ----
//
// The row is read as 16-byte units: unit j holds the keys 4j − off … 4j − off + 3, where off places the
// row's first key in its 16-byte granule (a unit that reaches outside the row, the first or last, is read
// key by key). Warp w of block b owns the units [p·units_per_warp, (p + 1)·units_per_warp) with
// p = b·kTopkWarps + w, a lane one unit per step, so each warp's part is a contiguous range of the row
// and block 0's parts come first. Four reads of the row: the first digit's
// histogram (from global memory), the second's, which also keeps the keys of the first digit's bin in
// shared memory (when they fit: the third histograms those; otherwise it reads the row again), the
// counts per part, and the writes.
constexpr int kRowLoadUnroll = 4;  // units in flight per lane
constexpr int kRowBlocks = 2;      // blocks (one cluster) per row: 64 rows fill 128 multiprocessors

struct TopkRowUnits {
    const float* row = nullptr;
    const float4* granules = nullptr;  // the row's 16-byte granules, from the one holding its first key
    int off = 0, n = 0;                // n: the row's length
    int begin = 0, end = 0;            // this warp's units
};

// Unit j's rank keys and which of them are in the row (bit q: key 4j − off + q). `in`: j is this warp's.
__device__ __forceinline__ uint32_t topk_load_unit(const TopkRowUnits& u, int j, bool in, uint32_t (&key)[4]) {
    float v[4] = {0.0f, 0.0f, 0.0f, 0.0f};
    uint32_t valid = 0u;
    const int e0 = 4 * j - u.off;
    if (in && e0 >= 0 && e0 + 4 <= u.n) {
        const float4 g = __ldg(u.granules + j);
        v[0] = g.x, v[1] = g.y, v[2] = g.z, v[3] = g.w;
        valid = 0xfu;
    } else if (in) {
#pragma unroll
        for (int q = 0; q < 4; ++q)
            if (e0 + q >= 0 && e0 + q < u.n) v[q] = u.row[e0 + q], valid |= 1u << q;
    }
#pragma unroll
    for (int q = 0; q < 4; ++q) key[q] = topk_rank_key(v[q]);
    return valid;
}

// Calls visit(j, keys, valid) for every unit of this warp, kRowLoadUnroll units per lane in flight; every
// lane of the warp calls it for every step (j past the warp's units: valid 0).
template <class Visit>
__device__ __forceinline__ void topk_stream_units(const TopkRowUnits& u, int lane, Visit&& visit) {
    for (int j0 = u.begin; j0 < u.end; j0 += 32 * kRowLoadUnroll) {
        uint32_t key[kRowLoadUnroll][4], valid[kRowLoadUnroll];
#pragma unroll
        for (int s = 0; s < kRowLoadUnroll; ++s) {
            const int j = j0 + 32 * s + lane;
            valid[s] = topk_load_unit(u, j, j < u.end, key[s]);
        }
#pragma unroll
        for (int s = 0; s < kRowLoadUnroll; ++s) visit(j0 + 32 * s + lane, key[s], valid[s]);
    }
}

// Row r of the selection over the kRowBlocks blocks of one cluster (blockIdx.y = r, rows past the grid in
// strides of gridDim.y): ops/topk.h exactly. Block b streams the b-th part of the row's units; each pass's
// histogram is this block's plus the other's, read through distributed shared memory, so both take the
// same digits. Each keeps its own candidates (the second pass's keys of the first digit's bin) when they
// fit. Block 1's picks start after block 0's counts.
__global__ void __cluster_dims__(kRowBlocks, 1, 1) __launch_bounds__(kTopkThreads, 1) topk_row_kernel(TopkArgs a) {
    wait_for_previous_kernel();
    extern __shared__ uint32_t cand_s[];  // [kTopkCandidates]
    __shared__ __align__(8) uint32_t hist[2][kTopkBins];  // pass p uses hist[p % 2]: its zeroing needs no cluster barrier
    __shared__ uint32_t warp_sums[kTopkWarps], part_above[kTopkWarps], part_equal[kTopkWarps];
    __shared__ uint32_t s_digit, s_remaining, s_n_cand, s_counts[2];  // s_counts: keys > T, keys = T in this block's part

    cg::cluster_group cluster = cg::this_cluster();
    const int tid = static_cast<int>(threadIdx.x), lane = tid % 32, warp = tid / 32;
    const int rank = static_cast<int>(cluster.block_rank());
    for (int64_t r = blockIdx.y; r < a.n_rows; r += gridDim.y) {  // uniform over the cluster
        int32_t* o = a.out + r * a.out_row_stride;
        const int n = topk_row_length(a, r);
        const int picks = static_cast<int>(min(a.k, static_cast<int64_t>(n)));
        if (picks == n) {
            // Every candidate is picked: the picks in ascending index order are 0 … n − 1.
            for (int i = tid + rank * kTopkThreads; i < n; i += kRowBlocks * kTopkThreads) o[i] = i;
        } else {
            // 1 ≤ picks < n ≤ INT32_MAX. Warp w of block b owns part b·kTopkWarps + w of the units.
            TopkRowUnits u;
            u.row = a.scores + r * a.scores_row_stride;
            u.off = static_cast<int>((reinterpret_cast<uintptr_t>(u.row) & 15u) / 4u);  // f32 rows: 4-byte aligned
            u.granules = reinterpret_cast<const float4*>(u.row - u.off);
            u.n = n;
            const int units = static_cast<int>((static_cast<int64_t>(n) + u.off + 3) / 4);
            const int parts = kRowBlocks * kTopkWarps;
            const int per_warp = ((units + parts - 1) / parts + 31) / 32 * 32;
            u.begin = static_cast<int>(min(static_cast<int64_t>(units), static_cast<int64_t>(rank * kTopkWarps + warp) * per_warp));
            u.end = min(units, u.begin + per_warp);

            for (int i = tid; i < kTopkBins; i += kTopkThreads) hist[0][i] = 0u;
            if (tid == 0) s_n_cand = 0u;
            __syncthreads();
            uint32_t prefix = 0u, remaining = static_cast<uint32_t>(picks);
            bool from_candidates = false;
            for (int pass = 0; pass < 3; ++pass) {
                uint32_t* const h = hist[pass % 2];
                const int shift = topk_digit_shift(pass);
                const uint32_t digit_mask = topk_digit_mask(pass), fixed = pass == 0 ? 0u : topk_fixed_mask(pass);
                if (from_candidates) {
                    const int count = static_cast<int>(s_n_cand);
                    for (int i = tid; i < count; i += kTopkThreads) {
                        const uint32_t key = cand_s[i];
                        topk_histogram_add(h, (key & fixed) == prefix, (key >> shift) & digit_mask);
                    }
                } else {
                    topk_stream_units(u, lane, [&](int, const uint32_t (&key)[4], uint32_t valid) {
#pragma unroll
                        for (int q = 0; q < 4; ++q) {
                            const bool take = ((valid >> q) & 1u) != 0u && (key[q] & fixed) == prefix;
                            topk_histogram_add(h, take, (key[q] >> shift) & digit_mask);
                            if (pass == 1) topk_append(cand_s, &s_n_cand, take, key[q], lane);
                        }
                    });
                }
                cluster.sync();  // both blocks' histograms of this pass are complete (and cand_s with them)
                // The other buffer was last read in the previous pass, before this barrier: clear it for the next.
                if (pass < 2)
                    for (int i = tid; i < kTopkBins; i += kTopkThreads) hist[(pass + 1) % 2][i] = 0u;
                const int low = topk_low_bin();
                const uint2 mine = *reinterpret_cast<const uint2*>(h + low);
                const uint2 other = *reinterpret_cast<const uint2*>(cluster.map_shared_rank(h, rank ^ 1) + low);
                topk_choose_digit(make_uint2(mine.x + other.x, mine.y + other.y), remaining, warp_sums, &s_digit, &s_remaining);
                prefix |= s_digit << shift;
                remaining = s_remaining;
                if (pass == 1) from_candidates = s_n_cand <= static_cast<uint32_t>(kTopkCandidates);  // after the barrier
            }

            // T = prefix is the key of the last pick; `remaining` of the keys equal to T are picked.
            const uint32_t threshold = prefix, take_equal = remaining;
            uint32_t above = 0u, equal = 0u;
            topk_stream_units(u, lane, [&](int, const uint32_t (&key)[4], uint32_t valid) {
#pragma unroll
                for (int q = 0; q < 4; ++q) {
                    const bool in = ((valid >> q) & 1u) != 0u;
                    above += in && key[q] > threshold ? 1u : 0u;
                    equal += in && key[q] == threshold ? 1u : 0u;
                }
            });
            uint32_t pos = 0u, equal_rank = 0u;
            topk_cluster_part_start(cluster, above, equal, part_above, part_equal, s_counts, take_equal, pos, equal_rank);
            topk_stream_units(u, lane, [&](int j, const uint32_t (&key)[4], uint32_t valid) {
                uint32_t ab = 0u, eq = 0u;
#pragma unroll
                for (int q = 0; q < 4; ++q) {
                    const bool in = ((valid >> q) & 1u) != 0u;
                    ab |= (in && key[q] > threshold ? 1u : 0u) << q;
                    eq |= (in && key[q] == threshold ? 1u : 0u) << q;
                }
                topk_write_picks(o, 4 * j - u.off, ab, eq, take_equal, pos, equal_rank, lane);
            });
        }
        if (rank == 0) {
            for (int64_t i = picks + tid; i < a.k; i += kTopkThreads) o[i] = -1;  // −1 up to width k
            if (a.out_count != nullptr && tid == 0) a.out_count[r] = picks;
        }
        cluster.sync();  // no block reuses its shared memory while the other still reads it
    }
}

// ---- top-k over a cluster of blocks (sm_90 thread-block clusters) ----
//
// A row spread over the kClusterBlocks blocks of one cluster. Each block reads its segment of the row once
// (16-byte loads, kClusterLoadUnroll of them in flight per thread) into rank keys in its own shared memory
// and histograms the first digit as they arrive. The blocks read each other's histograms through
// distributed shared memory and so take the same digits. The second pass keeps this block's keys of the
// first digit's bin apart (when they fit), so that the third histograms only those. Warp w's part is a
// contiguous range of its block's segment; the counts of the blocks before it come from their shared
// memory. One read of the row from global memory.
constexpr int kClusterBlocks = 8;
constexpr int kClusterMaxSegment = 24576;  // keys per block (96 KiB of shared memory): rows up to 196 608
constexpr int kClusterLoadUnroll = 4;      // 16-byte loads in flight per thread
constexpr int64_t kClusterMaxRows = 16;    // one wave of clusters on 132 multiprocessors; more rows: topk_row_kernel
constexpr int kClusterSlice = kTopkBins / kClusterBlocks;  // bins whose cluster sums a block keeps
static_assert(kClusterSlice % kTopkBinsPerThread == 0, "a thread's two bins lie in one block's slice");

// Dynamic shared memory: [kTopkCandidates] candidate keys, then [3 + segment] words for this block's rank
// keys, placed so that the ones written by 16-byte stores land on 16-byte boundaries.
__host__ __device__ constexpr size_t topk_cluster_dynamic_bytes(int segment) {
    return (static_cast<size_t>(kTopkCandidates) + 3 + static_cast<size_t>(segment)) * sizeof(uint32_t);
}

__global__ void __cluster_dims__(kClusterBlocks, 1, 1) __launch_bounds__(kTopkThreads, 1)
    topk_cluster_kernel(TopkArgs a, int segment) {
    wait_for_previous_kernel();
    extern __shared__ __align__(16) uint32_t dynamic_s[];
    __shared__ __align__(16) uint32_t hist[2][kTopkBins];  // pass p uses hist[p % 2]: its zeroing needs no barrier
    __shared__ __align__(8) uint32_t total_s[kClusterSlice];  // the cluster's sums of this block's slice of the bins
    __shared__ uint32_t warp_sums[kTopkWarps], part_above[kTopkWarps], part_equal[kTopkWarps];
    __shared__ uint32_t s_digit, s_remaining, s_n_cand, s_counts[2];  // s_counts: keys > T, keys = T in this segment
    uint32_t* const cand_s = dynamic_s;

    cg::cluster_group cluster = cg::this_cluster();
    const int tid = static_cast<int>(threadIdx.x), lane = tid % 32, warp = tid / 32;
    const int rank = static_cast<int>(cluster.block_rank());
    for (int64_t r = blockIdx.y; r < a.n_rows; r += gridDim.y) {  // uniform over the cluster
        const float* s = a.scores + r * a.scores_row_stride;
        int32_t* o = a.out + r * a.out_row_stride;
        const int n = topk_row_length(a, r);
        const int picks = static_cast<int>(min(a.k, static_cast<int64_t>(n)));
        const int begin = static_cast<int>(min(static_cast<int64_t>(rank) * segment, static_cast<int64_t>(n)));
        const int len = min(segment, n - begin);
        if (picks == n) {
            for (int i = tid; i < len; i += kTopkThreads) o[begin + i] = begin + i;
        } else {
            // 1 ≤ picks < n. The segment's keys: up to 3 before the first 16-byte boundary, then 16-byte
            // loads, then up to 3 after the last.
            const float* seg = s + begin;
            const int head = min(len, static_cast<int>(((16u - (reinterpret_cast<uintptr_t>(seg) & 15u)) & 15u) / 4u));
            uint32_t* const keys = dynamic_s + kTopkCandidates + ((4 - head) & 3);  // keys + head: 16-byte aligned
            const int n4 = (len - head) / 4, tail = head + 4 * n4;
            for (int i = tid; i < kTopkBins; i += kTopkThreads) hist[0][i] = 0u;
            if (tid == 0) s_n_cand = 0u;
            __syncthreads();
            if (warp == 0) {
                const int i = lane < 4 ? lane : tail + lane - 4;  // lanes 0–3: the head; 4–7: the tail
                const bool take = (lane < 4 && i < head) || (lane >= 4 && lane < 8 && i < len);
                const uint32_t key = take ? topk_rank_key(seg[i]) : 0u;
                if (take) keys[i] = key;
                topk_histogram_add(hist[0], take, key >> topk_digit_shift(0));
            }
            const float4* seg4 = reinterpret_cast<const float4*>(seg + head);
            uint4* keys4 = reinterpret_cast<uint4*>(keys + head);
            for (int j0 = 0; j0 < n4; j0 += kTopkThreads * kClusterLoadUnroll) {
                float4 v[kClusterLoadUnroll];
#pragma unroll
                for (int u = 0; u < kClusterLoadUnroll; ++u) {
                    const int j = j0 + tid + u * kTopkThreads;
                    v[u] = j < n4 ? __ldg(seg4 + j) : make_float4(0.0f, 0.0f, 0.0f, 0.0f);
                }
#pragma unroll
                for (int u = 0; u < kClusterLoadUnroll; ++u) {
                    const int j = j0 + tid + u * kTopkThreads;
                    if (j >= n4) continue;
                    const uint4 k = make_uint4(topk_rank_key(v[u].x), topk_rank_key(v[u].y), topk_rank_key(v[u].z),
                                               topk_rank_key(v[u].w));
                    keys4[j] = k;
                    topk_histogram_add(hist[0], true, k.x >> topk_digit_shift(0));
                    topk_histogram_add(hist[0], true, k.y >> topk_digit_shift(0));
                    topk_histogram_add(hist[0], true, k.z >> topk_digit_shift(0));
                    topk_histogram_add(hist[0], true, k.w >> topk_digit_shift(0));
                }
            }

            uint32_t prefix = 0u, remaining = static_cast<uint32_t>(picks);
            bool keep_candidates = false;  // the second pass keeps this block's keys of the first digit's bin
            for (int pass = 0; pass < 3; ++pass) {
                const int shift = topk_digit_shift(pass);
                uint32_t* const h = hist[pass % 2];
                if (pass > 0) {
                    const uint32_t fixed = topk_fixed_mask(pass), digit_mask = topk_digit_mask(pass);
                    const bool from_candidates = pass == 2 && keep_candidates;
                    const uint32_t* const src = from_candidates ? cand_s : keys;
                    const int count = from_candidates ? static_cast<int>(s_n_cand) : len;
                    for (int i0 = 0; i0 < count; i0 += kTopkThreads) {  // every thread runs every step: full warps
                        const int i = i0 + tid;
                        const uint32_t key = i < count ? src[i] : 0u;
                        const bool take = i < count && (key & fixed) == prefix;
                        topk_histogram_add(h, take, (key >> shift) & digit_mask);
                        if (pass == 1 && keep_candidates) topk_append(cand_s, &s_n_cand, take, key, lane);
                    }
                }
                cluster.sync();  // every block's histogram of this pass is complete (and cand_s with it)
                // The other buffer was last read in the previous pass, before this barrier: clear it for the next.
                if (pass < 2)
                    for (int i = tid; i < kTopkBins; i += kTopkThreads) hist[(pass + 1) % 2][i] = 0u;
                // Block b sums slice b of the bins over the cluster, then every thread reads its two bins' sums
                // from the block that holds them: 1/kClusterBlocks of the remote reads of every block summing
                // every bin (measured: 2.2 µs per pass that way).
                if (tid < kClusterSlice) {
                    uint32_t sum = 0u;
#pragma unroll
                    for (int b = 0; b < kClusterBlocks; ++b) sum += cluster.map_shared_rank(h, b)[rank * kClusterSlice + tid];
                    total_s[tid] = sum;
                }
                cluster.sync();  // every slice is summed
                const int low = topk_low_bin();
                const uint2 counts =
                    *reinterpret_cast<const uint2*>(cluster.map_shared_rank(total_s, low / kClusterSlice) + low % kClusterSlice);
                topk_choose_digit(counts, remaining, warp_sums, &s_digit, &s_remaining);
                const uint32_t digit = s_digit;
                prefix |= digit << shift;
                remaining = s_remaining;
                if (pass == 0) keep_candidates = hist[0][digit] <= static_cast<uint32_t>(kTopkCandidates);  // this block's
            }

            // T = prefix is the key of the last pick; `remaining` of the keys equal to T are picked. Warp w's
            // part: whole 32-key steps of the segment.
            const uint32_t threshold = prefix, take_equal = remaining;
            const int part = ((len + kTopkWarps - 1) / kTopkWarps + 31) / 32 * 32;
            const int w_begin = min(len, warp * part), w_end = min(len, w_begin + part);
            uint32_t above = 0u, equal = 0u;
            for (int i = w_begin + lane; i < w_end; i += 32) {
                const uint32_t key = keys[i];
                above += key > threshold ? 1u : 0u;
                equal += key == threshold ? 1u : 0u;
            }
            uint32_t pos = 0u, equal_rank = 0u;
            topk_cluster_part_start(cluster, above, equal, part_above, part_equal, s_counts, take_equal, pos, equal_rank);
            for (int i0 = w_begin; i0 < w_end; i0 += 32) {  // warp-uniform
                const int i = i0 + lane;
                const uint32_t key = i < w_end ? keys[i] : 0u;
                const bool in = i < w_end;
                topk_write_picks(o, begin + i, in && key > threshold ? 1u : 0u, in && key == threshold ? 1u : 0u,
                                 take_equal, pos, equal_rank, lane);
            }
        }
        if (rank == 0) {
            for (int64_t i = picks + tid; i < a.k; i += kTopkThreads) o[i] = -1;  // −1 up to width k
            if (a.out_count != nullptr && tid == 0) a.out_count[r] = picks;
        }
        cluster.sync();  // no block leaves (or reuses its shared memory) while another still reads it
    }
}

Status launch_topk(const TopkArgs& a, cudaStream_t stream) {
    if (a.n_rows == 0) return Status::ok();
    const int64_t segment = (a.n_cols + kClusterBlocks - 1) / kClusterBlocks;
    if (segment <= kClusterMaxSegment && a.n_rows <= kClusterMaxRows) {
        static const cudaError_t attribute =
            cudaFuncSetAttribute(topk_cluster_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                 static_cast<int>(topk_cluster_dynamic_bytes(kClusterMaxSegment)));
        SIEVE_RETURN_IF_ERROR(cuda_status(attribute, "topk: shared memory of the cluster kernel"));
        const int seg = static_cast<int>(std::max<int64_t>(segment, 1));
        const dim3 grid(kClusterBlocks, static_cast<unsigned>(a.n_rows));
        launch_after_previous(topk_cluster_kernel, grid, kTopkThreads, topk_cluster_dynamic_bytes(seg), stream, a, seg);
        return cuda_status(cudaGetLastError(), "topk launch (cluster)");
    }
    static const cudaError_t attribute = cudaFuncSetAttribute(topk_row_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                                              static_cast<int>(kTopkCandidates * sizeof(uint32_t)));
    SIEVE_RETURN_IF_ERROR(cuda_status(attribute, "topk: shared memory of the row kernel"));
    const dim3 grid(kRowBlocks, static_cast<unsigned>(std::min(a.n_rows, kMaxGridY)));
    launch_after_previous(topk_row_kernel, grid, kTopkThreads, kTopkCandidates * sizeof(uint32_t), stream, a);
    return cuda_status(cudaGetLastError(), "topk launch");
}

// ============================== selected slots ==================================================

constexpr int kSlotsThreads = 256;
constexpr int64_t kSlotsMaxBlocks = int64_t{1} << 16;  // a grid-stride loop covers the rest

__global__ void __launch_bounds__(kSlotsThreads) selected_slots_kernel(SelectedSlotsParams p) {
    wait_for_previous_kernel();
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
        // Tensor cores where the operands allow: warpgroup MMAs for the deployed key layout with e4m3 or bf16
        // q (indexer_scores_wgmma.h), mma.sync for other bf16 / e4m3 operands (indexer_scores_mma.h). Otherwise
        // the fp32 kernel, whose thread layout follows the head count (QSA: 4 heads, V4 / DSA: 64), so that
        // few heads do not leave most threads idle.
        if (indexer_scores_wgmma_supported(a)) {
            SIEVE_RETURN_IF_ERROR(launch_indexer_scores_wgmma(a, stream));
        } else if (indexer_scores_mma_supported(a)) {
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
    launch_after_previous(selected_slots_kernel, static_cast<unsigned>(blocks), kSlotsThreads, 0, stream, p);
    return cuda_status(cudaGetLastError(), "selected_slots launch");
}

}  // namespace sieve::cuda
