// The Lightning Indexer's scores on tensor cores (indexer_scores_mma.h; the math of ops/indexer_scores.h:
// score[t, j] = s_j · Σ_h w[t, h] · ReLU(Σ_i q[t, h, i] · v_j[i]), fp32 sums in any order).
//
// d[t, h, j] is a [heads × dims] · [dims × keys] product per token: mma.sync m16n8k16 with fp32
// accumulation. Its operands are exact: e4m3 q with e4m3 keys become f16 (every e4m3 value is an f16),
// otherwise bf16 (bf16 q and keys as they are, e4m3 keys widened). Then w_h·ReLU(d) summed over the heads
// in a fixed order, and s_j once.
//
// The kernel streams keys, so it is built to keep HBM busy (keys are read once per token and tile; a
// token's q is tiny):
// - One thread block of 8 warps per (token, range of 128-key tiles). The token's q (all heads, padded with
//   zero heads to a multiple of 32 and zero dims to a multiple of 16) is converted into shared memory once.
// - Raw key bytes go straight from global memory into a ring of kStages shared-memory stages with cp.async
//   (zero-filled where a key is missing or cannot be located, and in the padding dims), each stage with the
//   tile's fp32 row scales (cp.async too) and a status byte per key. The copies are 16-byte granules where
//   the cache's base, block stride and entry size allow, else 8 or 4 (indexer_scores_mma_supported wants
//   at least 4; e.g. 40 or 24 e4m3 dims use 8). Iteration i waits for tile i, then refills the stage tile
//   i − 1 used with tile i + kStages − 1, so two tiles are in flight while one is multiplied. Each key's
//   block-table entry is read one tile before its copy is issued, in 32-bit index math
//   (indexer_key_lookup), so no load latency or 64-bit division sits in front of the copies.
// - There is no converted key tile: the MMA's B fragments come from the raw stage with ldmatrix. For bf16
//   keys that is the usual fragment. For e4m3 keys, ldmatrix (b16) over rows of 16 key bytes gives lane
//   (g, t) = (lane / 4, lane % 4) the bytes of dims 4t … 4t + 3 of key g; converted in registers they are
//   b0 (k = 2t, 2t + 1 ↔ dims 4t, 4t + 1) and b1 (k = 2t + 8, 2t + 9 ↔ dims 4t + 2, 4t + 3). q is stored
//   with the same permutation of the k of each 16-dim chunk (e4m3_dim_column), so the sum over k is the dot
//   product, summed in another order (which the contract allows).
// - Warp (wm, wn) multiplies head groups wm, wm + 2, ... of 32 heads with keys 32·wn … 32·wn + 31; each
//   lane sums w_h·ReLU over its heads, the lanes of a key column are added by shuffles and the two head
//   halves in shared memory (warps (0, wn) and (1, wn) meet at a named barrier), always in the same
//   order: the result depends on the inputs and shapes alone, two runs give the same bytes.
#include "backends/cuda/indexer_scores_mma.h"

#include <algorithm>
#include <cstdint>

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_fp8.h>

#include "backends/cuda/async_copy.cuh"
#include "backends/cuda/cuda_status.h"
#include "backends/cuda/dependent_launch.cuh"
#include "backends/cuda/indexer_key_tiles.cuh"
#include "backends/cuda/mma_sync.cuh"

namespace sieve::cuda {
namespace {

constexpr int kThreads = 256;
constexpr int kTileKeys = 128;   // keys per tile: 4 key warps × 32
constexpr int kWarpKeys = 32;    // keys of one warp: 4 n-tiles of 8
constexpr int kWarpHeads = 32;   // heads of one warp pass: 2 m-tiles of 16
constexpr int kMmaK = 16;        // dims per mma
constexpr int kMaxHeads = 128;
constexpr int kMaxDims = 128;
static_assert(kThreads == 2 * kTileKeys, "two threads bring each key of a tile (indexer_key_tiles.cuh)");
constexpr int kStages = 3;       // key tiles in shared memory: one multiplied, two in flight

// Shared memory: q_s [hp][q_row] operands, w_s [hp] head weights, red [2 head halves][kTileKeys], then
// kStages stages of [kTileKeys][key_row] raw key bytes, [kTileKeys] fp32 scales (fp8 keys), [kTileKeys]
// status bytes. Rows are padded to an odd number of 16-byte units, so that the 8 row addresses of an
// ldmatrix fall in distinct banks.
struct SmemLayout {
    int hp = 0, dp = 0;  // padded heads (multiple of 32) and dims (multiple of 16)
    int q_row = 0;       // operands per q_s row: dp + 8
    int key_data = 0;    // bytes of a key's padded values: dp (fp8) or 2·dp (bf16)
    int key_row = 0;     // bytes per stage row: key_data rounded up to an odd number of 16-byte units
    int scales_off = 0, status_off = 0, stage_bytes = 0;  // within a stage
    int q_off = 0, w_off = 0, red_off = 0, stages_off = 0, bytes = 0;
};
template <bool kFp8Keys>
__host__ __device__ inline SmemLayout smem_layout(int64_t heads, int64_t dims) {
    SmemLayout l;
    l.hp = static_cast<int>((heads + kWarpHeads - 1) / kWarpHeads * kWarpHeads);
    l.dp = static_cast<int>((dims + kMmaK - 1) / kMmaK * kMmaK);
    l.q_row = l.dp + 8;
    l.key_data = kFp8Keys ? l.dp : 2 * l.dp;
    const int units = l.key_data / 16;
    l.key_row = (units % 2 == 0 ? units + 1 : units) * 16;
    l.scales_off = kTileKeys * l.key_row;
    l.status_off = l.scales_off + (kFp8Keys ? kTileKeys * 4 : 0);
    l.stage_bytes = (l.status_off + kTileKeys + 15) / 16 * 16;
    l.q_off = 0;
    l.w_off = l.q_off + l.hp * l.q_row * 2;
    l.red_off = l.w_off + l.hp * 4;
    l.stages_off = (l.red_off + 2 * kTileKeys * 4 + 15) / 16 * 16;
    l.bytes = l.stages_off + kStages * l.stage_bytes;
    return l;
}

// ---- PTX wrappers ----------------------------------------------------------------------------------

// Barrier 1 + pair (pair < 4) of the 64 threads of two warps; __syncthreads is barrier 0. Immediate
// barrier ids, so that the kernel reserves 5 of the hardware's barriers rather than all 16.
__device__ __forceinline__ void warp_pair_barrier(int pair) {
    switch (pair) {
        case 0: asm volatile("bar.sync 1, 64;\n" ::: "memory"); break;
        case 1: asm volatile("bar.sync 2, 64;\n" ::: "memory"); break;
        case 2: asm volatile("bar.sync 3, 64;\n" ::: "memory"); break;
        default: asm volatile("bar.sync 4, 64;\n" ::: "memory"); break;
    }
}
// ---- operands --------------------------------------------------------------------------------------

// ---- one tile ----------------------------------------------------------------------------------------

// part[nt][c] += Σ over this lane's heads of w_h·ReLU(d) for key 32·wn + 8·nt + 2·(lane % 4) + c of the
// stage at `keys` (a shared address). kSteps: the 16-dim steps when known at compile time (else `steps`).
template <bool kHalf, bool kFp8Keys, int kSteps>
__device__ __forceinline__ void tile_head_sums(float (&part)[4][2], uint32_t q_lane, uint32_t keys_lane, const float* w_s,
                                               const SmemLayout& L, int steps, int wm, int g) {
    const int n_steps = kSteps > 0 ? kSteps : steps;
    const uint32_t q_mtile = 16 * L.q_row * 2;  // bytes between the two m-tiles of a head group
    for (int hg = wm; hg < L.hp / kWarpHeads; hg += 2) {
        const int hb = hg * kWarpHeads;
        const uint32_t qa = q_lane + static_cast<uint32_t>(hb * L.q_row * 2);
        float acc[2][4][4] = {};
#pragma unroll
        for (int ks = 0; ks < n_steps; ++ks) {
            uint32_t af[2][4], bf[4][2];
            mma::ldmatrix_x4(af[0], qa + ks * kMmaK * 2);
            mma::ldmatrix_x4(af[1], qa + q_mtile + ks * kMmaK * 2);
            if constexpr (kFp8Keys) {
                uint32_t r[4];  // r[nt]: dims 16·ks + 4t … + 3 of key 8·nt + g
                mma::ldmatrix_x4(r, keys_lane + ks * kMmaK);
#pragma unroll
                for (int nt = 0; nt < 4; ++nt) {
                    bf[nt][0] = mma::e4m3x2_to_operand<kHalf>(r[nt] & 0xffffu);
                    bf[nt][1] = mma::e4m3x2_to_operand<kHalf>(r[nt] >> 16);
                }
            } else {
#pragma unroll
                for (int np = 0; np < 2; ++np) {
                    uint32_t r[4];
                    mma::ldmatrix_x4(r, keys_lane + np * 16 * L.key_row + ks * kMmaK * 2);
                    bf[2 * np][0] = r[0], bf[2 * np][1] = r[1], bf[2 * np + 1][0] = r[2], bf[2 * np + 1][1] = r[3];
                }
            }
#pragma unroll
            for (int mt = 0; mt < 2; ++mt)
#pragma unroll
                for (int nt = 0; nt < 4; ++nt) mma::mma_16816<kHalf>(acc[mt][nt], af[mt], bf[nt][0], bf[nt][1]);
        }
#pragma unroll
        for (int mt = 0; mt < 2; ++mt)
#pragma unroll
            for (int half = 0; half < 2; ++half) {
                const float w = w_s[hb + mt * 16 + g + 8 * half];
#pragma unroll
                for (int nt = 0; nt < 4; ++nt)
#pragma unroll
                    for (int c = 0; c < 2; ++c) {
                        const float d = acc[mt][nt][2 * half + c];
                        // ReLU(x) = x > 0 ? x : 0: a NaN dot counts 0 (ops/indexer_scores.h).
                        part[nt][c] = fmaf(w, d > 0.0f ? d : 0.0f, part[nt][c]);
                    }
            }
    }
}

template <bool kHalf, bool kFp8Keys>
__global__ void __launch_bounds__(kThreads, 2) indexer_scores_mma_kernel(ScoresArgs a, int tiles_per_block, int granule) {
    wait_for_previous_kernel();
    extern __shared__ __align__(16) uint8_t smem[];
    const SmemLayout L = smem_layout<kFp8Keys>(a.n_heads, a.head_dim);
    uint16_t* const q_s = reinterpret_cast<uint16_t*>(smem + L.q_off);
    float* const w_s = reinterpret_cast<float*>(smem + L.w_off);
    float* const red = reinterpret_cast<float*>(smem + L.red_off);  // [2 head halves][kTileKeys]
    uint8_t* const stages = smem + L.stages_off;

    const int tid = static_cast<int>(threadIdx.x), lane = tid % 32, warp = tid / 32;
    const int wm = warp / 4, wn = warp % 4, g = lane / 4, tq = lane % 4;
    const int64_t H = a.n_heads, D = a.head_dim;
    const int steps = L.dp / kMmaK;

    // Shared addresses of this lane's ldmatrix rows: q rows (lane % 16) of an m-tile, k half lane / 16;
    // fp8 keys: key 32·wn + lane (matrix lane / 8 = n-tile, row lane % 8); bf16 keys: keys 32·wn + 16·np +
    // 8·(lane / 16) + lane % 8 (n-tiles 2·np, 2·np + 1), k half (lane / 8) % 2.
    const uint32_t q_lane = mma::smem_address(q_s) + static_cast<uint32_t>(((lane & 15) * L.q_row + (lane >> 4) * 8) * 2);
    const uint32_t key_lane_offset =
        kFp8Keys ? static_cast<uint32_t>((wn * kWarpKeys + lane) * L.key_row)
                 : static_cast<uint32_t>((wn * kWarpKeys + (lane >> 4) * 8 + (lane & 7)) * L.key_row + ((lane >> 3) & 1) * 16);
    const uint32_t stages_address = mma::smem_address(stages);

    const auto key_stage = [=](int s) {
        return KeyStage{stages_address + static_cast<uint32_t>(s * L.stage_bytes), stages + s * L.stage_bytes, L.key_row,
                        L.key_data, L.scales_off, L.status_off};
    };
    KeyTileRing<kFp8Keys, kTileKeys, kStages, decltype(key_stage)> ring(a, key_stage, granule);

    for (int64_t t = blockIdx.y; t < a.n_tokens; t += gridDim.y) {
        if (!ring.start(t, tiles_per_block)) continue;  // the first tiles travel while q is converted

        // q[t] as operands, zero heads and dims as padding (e4m3 keys: dims permuted, e4m3_dim_column); the
        // head weights w[t, h] (0 for padding).
        const int64_t q_base = t * a.q_token_stride;
        for (int idx = tid; idx < L.hp * L.dp; idx += kThreads) {
            const int h = idx / L.dp, p = idx % L.dp;
            const float v = h < H && p < D ? indexer_q_value(a, q_base + h * a.q_head_stride + p) : 0.0f;
            q_s[h * L.q_row + (kFp8Keys ? e4m3_dim_column(p) : p)] = mma::f32_to_operand<kHalf>(v);  // exact: e4m3 / bf16 (or 0)
        }
        for (int h = tid; h < L.hp; h += kThreads) w_s[h] = h < H ? indexer_head_weight(a, t, h) : 0.0f;

        float* const out_row = a.out + t * a.out_row_stride;
        for (int tile = ring.tile0; tile < ring.tile1; ++tile) {
            ring.arrive();  // (the barrier also publishes q_s and w_s)
            ring.refill(tile);

            const KeyStage st = key_stage(ring.read_stage);
            const uint32_t keys_lane = st.rows + key_lane_offset;
            float part[4][2] = {};
            if (L.dp == kMaxDims)
                tile_head_sums<kHalf, kFp8Keys, kMaxDims / kMmaK>(part, q_lane, keys_lane, w_s, L, steps, wm, g);
            else
                tile_head_sums<kHalf, kFp8Keys, 0>(part, q_lane, keys_lane, w_s, L, steps, wm, g);
            // The 8 lanes of a key column (g = 0 … 7) hold disjoint heads: add them, then the two head halves.
#pragma unroll
            for (int nt = 0; nt < 4; ++nt)
#pragma unroll
                for (int c = 0; c < 2; ++c)
#pragma unroll
                    for (int off = 4; off < 32; off *= 2) part[nt][c] += __shfl_xor_sync(0xffffffffu, part[nt][c], off);
            if (g == 0)
#pragma unroll
                for (int nt = 0; nt < 4; ++nt)
#pragma unroll
                    for (int c = 0; c < 2; ++c) red[wm * kTileKeys + wn * kWarpKeys + nt * 8 + 2 * tq + c] = part[nt][c];
            warp_pair_barrier(wn);  // warps (0, wn) and (1, wn): both halves of keys 32·wn … are in red
            if (wm == 0) {  // red is written again only after the next __syncthreads: this warp is done by then
                const int k = wn * kWarpKeys + lane;
                const uint8_t status = st.base[L.status_off + k];
                if (status != kKeyNoCandidate)  // columns j ≥ n_keys[t] are not written
                    out_row[static_cast<uint32_t>(tile) * kTileKeys + static_cast<uint32_t>(k)] =
                        staged_key_score<kFp8Keys>(st, k, status, __fadd_rn(red[k], red[kTileKeys + k]));
            }
            ring.done();
        }
    }
}

template <bool kHalf, bool kFp8Keys>
cudaError_t configure_kernel() {
    // The largest layout this kernel takes (kMaxHeads, kMaxDims); as much shared memory as the SM has,
    // so that two blocks fit.
    const auto kernel = indexer_scores_mma_kernel<kHalf, kFp8Keys>;
    const cudaError_t e = cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                               smem_layout<kFp8Keys>(kMaxHeads, kMaxDims).bytes);
    if (e != cudaSuccess) return e;
    return cudaFuncSetAttribute(kernel, cudaFuncAttributePreferredSharedMemoryCarveout, cudaSharedmemCarveoutMaxShared);
}

template <bool kHalf, bool kFp8Keys>
Status launch(const ScoresArgs& a, cudaStream_t stream) {
    static const cudaError_t configured = configure_kernel<kHalf, kFp8Keys>();  // once per instantiation
    SIEVE_RETURN_IF_ERROR(cuda_status(configured, "indexer_scores: shared memory of the tensor-core kernel"));
    const SmemLayout L = smem_layout<kFp8Keys>(a.n_heads, a.head_dim);
    const KeyGrid g = key_grid<kTileKeys>(a);
    launch_after_previous(indexer_scores_mma_kernel<kHalf, kFp8Keys>, g.grid, kThreads, static_cast<size_t>(L.bytes), stream, a, g.tiles_per_block, key_copy_granule(a));
    return cuda_status(cudaGetLastError(), "indexer_scores launch (tensor cores)");
}

}  // namespace

bool indexer_scores_mma_supported(const ScoresArgs& a) {
    const bool q_ok = a.q_format == kIndexerQBf16 || a.q_format == kIndexerQE4m3;
    const bool keys_ok = a.keys.format == kIndexerKeyBf16 || a.keys.format == kIndexerKeyFp8RowScale;
    // cp.async copies whole aligned granules of every key row, and its fp32 scale as 4 aligned bytes.
    const bool aligned = key_copy_granule(a) >= 4 && (a.keys.format != kIndexerKeyFp8RowScale || a.keys.scales_offset % 4 == 0);
    return a.inputs_ok && q_ok && keys_ok && aligned && a.n_heads >= 1 && a.n_heads <= kMaxHeads && a.head_dim >= 1 &&
           a.head_dim <= kMaxDims;
}

Status launch_indexer_scores_mma(const ScoresArgs& a, cudaStream_t stream) {
    if (a.keys.format == kIndexerKeyBf16) return launch<false, false>(a, stream);
    if (a.q_format == kIndexerQE4m3) return launch<true, true>(a, stream);
    return launch<false, true>(a, stream);
}

}  // namespace sieve::cuda
