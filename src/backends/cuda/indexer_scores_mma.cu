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
//   with the same permutation of the k of each 16-dim chunk (q_dim_column), so the sum over k is the dot
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
constexpr int kStages = 3;       // key tiles in shared memory: one multiplied, two in flight
// Blocks resident at once on an H100 / H200 SXM: 132 multiprocessors × 2. The split of the keys over
// blocks is chosen for whole waves of these (split_keys); a constant, so it is a function of the shapes.
constexpr int64_t kResidentBlocks = 132 * 2;
constexpr int64_t kMaxWaves = 8;
constexpr int64_t kBlockStartTiles = 2;  // a block's start (q, the pipeline's fill), in tiles of work
constexpr int64_t kMaxGridY = 65535;

// A key's status in its stage, from its location.
constexpr uint8_t kKeyLocated = 0, kKeyNoCandidate = 1, kKeyUnlocatable = 2;

// The source of zero-filled copies (cp.async with source size 0 reads nothing, but wants an address).
__device__ __align__(16) uint8_t g_zero_source[16];

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

// The q_s column of dim p for e4m3 keys: within each 16-dim chunk, dim 4t + s sits at k = 2t + s (s < 2)
// or 8 + 2t + (s − 2), the k that ldmatrix and the conversion give the key's dim 4t + s (header comment).
__device__ __forceinline__ int q_dim_column(int p) {
    const int r = p % kMmaK, t = r / 4, s = r % 4;
    return p - r + (s < 2 ? 2 * t + s : 8 + 2 * t + (s - 2));
}

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

// This thread's share of the copies of one key's row into a stage: granules first, first + 2, … of
// kGranule bytes of the padded row (those past the key's data_bytes, or all when the key is not located,
// zero-filled).
template <int kGranule>
__device__ __forceinline__ void copy_key_values(uint32_t dst_row, const uint8_t* src_row, bool located, int first, int row_bytes,
                                                int data_bytes) {
    for (int b = first * kGranule; b < row_bytes; b += 2 * kGranule) {
        const bool have = located && b < data_bytes;
        async_copy::copy_zfill<kGranule>(dst_row + static_cast<uint32_t>(b), have ? src_row + b : g_zero_source, have ? kGranule : 0);
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
    // Copies: threads 2·k and 2·k + 1 bring key k of a tile (every other granule each); the first also
    // writes its status, the second copies its scale.
    const int copy_key = tid / 2, copy_part = tid % 2;
    const int64_t H = a.n_heads, D = a.head_dim;
    const int data_bytes = static_cast<int>(a.keys.data_bytes);  // head_dim (fp8) or 2·head_dim (bf16): ≤ 256
    const uint32_t block_size_u32 = indexer_block_size_u32(a.keys);
    const int steps = L.dp / kMmaK;

    // Shared addresses of this lane's ldmatrix rows: q rows (lane % 16) of an m-tile, k half lane / 16;
    // fp8 keys: key 32·wn + lane (matrix lane / 8 = n-tile, row lane % 8); bf16 keys: keys 32·wn + 16·np +
    // 8·(lane / 16) + lane % 8 (n-tiles 2·np, 2·np + 1), k half (lane / 8) % 2.
    const uint32_t q_lane = mma::smem_address(q_s) + static_cast<uint32_t>(((lane & 15) * L.q_row + (lane >> 4) * 8) * 2);
    const uint32_t key_lane_offset =
        kFp8Keys ? static_cast<uint32_t>((wn * kWarpKeys + lane) * L.key_row)
                 : static_cast<uint32_t>((wn * kWarpKeys + (lane >> 4) * 8 + (lane & 7)) * L.key_row + ((lane >> 3) & 1) * 16);
    const uint32_t stages_address = mma::smem_address(stages);

    for (int64_t t = blockIdx.y; t < a.n_tokens; t += gridDim.y) {
        const int64_t n = min(max(static_cast<int64_t>(a.n_keys[t]), int64_t{0}), a.n_cols);  // ≤ INT32_MAX
        const int64_t tiles = (n + kTileKeys - 1) / kTileKeys;
        const int64_t first_tile = static_cast<int64_t>(blockIdx.x) * tiles_per_block;
        if (first_tile >= tiles) continue;  // uniform over the block
        const int tile0 = static_cast<int>(first_tile);
        const int tile1 = static_cast<int>(min(first_tile + tiles_per_block, tiles));
        __syncthreads();  // the previous token's readers of q_s, w_s, red and the stages are done
        const int64_t req = a.token_request[t];
        const bool req_ok = req >= 0 && req < a.n_requests;  // inputs_ok: the host sends no other args here
        const int32_t* row = a.block_table + (req_ok ? req : 0) * a.block_table_stride;
        const uint32_t n_u32 = static_cast<uint32_t>(n);

        // The table entry of this thread's key of a tile, and the tile's copies into a stage.
        const auto lookup = [&](int tile) {
            return indexer_key_lookup(a, row, req_ok, static_cast<uint32_t>(tile) * kTileKeys + copy_key, n_u32, block_size_u32);
        };
        const auto issue = [&](int stage, const IndexerKeyLookup& k) {
            const int64_t loc = indexer_key_lookup_location(a, k);
            const bool located = loc >= 0;
            const uint8_t* const src = a.keys.base + (located ? loc : 0);
            const uint32_t stage_address = stages_address + static_cast<uint32_t>(stage * L.stage_bytes);
            const uint32_t dst = stage_address + static_cast<uint32_t>(copy_key * L.key_row);
            if (granule == 16)
                copy_key_values<16>(dst, src, located, copy_part, L.key_data, data_bytes);
            else if (granule == 8)
                copy_key_values<8>(dst, src, located, copy_part, L.key_data, data_bytes);
            else
                copy_key_values<4>(dst, src, located, copy_part, L.key_data, data_bytes);
            if (copy_part == 0) {
                stages[stage * L.stage_bytes + L.status_off + copy_key] =
                    located ? kKeyLocated : loc == kNoCandidate ? kKeyNoCandidate : kKeyUnlocatable;
            } else if constexpr (kFp8Keys) {  // its fp32 row scale, at scales_offset + 4·entry of its block
                const uint8_t* const scale =
                    located ? a.keys.base + k.id * a.keys.block_bytes + a.keys.scales_offset + 4 * static_cast<int64_t>(k.entry)
                            : g_zero_source;
                async_copy::copy_zfill<4>(stage_address + static_cast<uint32_t>(L.scales_off + 4 * copy_key), scale, located ? 4 : 0);
            }
        };

        // The first kStages − 1 tiles start travelling while q is converted.
        for (int s = 0; s < kStages - 1; ++s) {
            if (tile0 + s < tile1) issue(s, lookup(tile0 + s));
            async_copy::commit();  // one group per tile slot, empty or not: wait_group counts stay uniform
        }
        IndexerKeyLookup ahead;  // the key of tile + kStages − 1, read one iteration early
        if (tile0 + kStages - 1 < tile1) ahead = lookup(tile0 + kStages - 1);

        // q[t] as operands, zero heads and dims as padding (e4m3 keys: dims permuted, q_dim_column); the
        // head weights w[t, h] (0 for padding).
        const int64_t q_base = t * a.q_token_stride;
        for (int idx = tid; idx < L.hp * L.dp; idx += kThreads) {
            const int h = idx / L.dp, p = idx % L.dp;
            const float v = h < H && p < D ? indexer_q_value(a, q_base + h * a.q_head_stride + p) : 0.0f;
            q_s[h * L.q_row + (kFp8Keys ? q_dim_column(p) : p)] = mma::f32_to_operand<kHalf>(v);  // exact: e4m3 / bf16 (or 0)
        }
        for (int h = tid; h < L.hp; h += kThreads) w_s[h] = h < H ? indexer_head_weight(a, t, h) : 0.0f;

        float* const out_row = a.out + t * a.out_row_stride;
        int read_stage = 0, write_stage = kStages - 1;
        for (int tile = tile0; tile < tile1; ++tile) {
            async_copy::wait<kStages - 2>();  // this thread's copies of `tile` have landed
            __syncthreads();               // everyone's have (and q_s, w_s); every warp is done with tile − 1
            const int next = tile + kStages - 1;  // into the stage tile − 1 used
            if (next < tile1) issue(write_stage, ahead);
            async_copy::commit();
            if (next + 1 < tile1) ahead = lookup(next + 1);

            const uint8_t* const stage = stages + read_stage * L.stage_bytes;
            const uint32_t keys_lane = stages_address + static_cast<uint32_t>(read_stage * L.stage_bytes) + key_lane_offset;
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
                const uint8_t status = stage[L.status_off + k];
                if (status != kKeyNoCandidate) {  // columns j ≥ n_keys[t] are not written
                    float v = __uint_as_float(0x7fc00000u);  // a key that cannot be located: NaN
                    if (status == kKeyLocated) {
                        const float s = kFp8Keys ? reinterpret_cast<const float*>(stage + L.scales_off)[k] : 1.0f;
                        v = __fmul_rn(s, __fadd_rn(red[k], red[kTileKeys + k]));
                    }
                    out_row[static_cast<uint32_t>(tile) * kTileKeys + static_cast<uint32_t>(k)] = v;
                }
            }
            read_stage = read_stage + 1 == kStages ? 0 : read_stage + 1;
            write_stage = write_stage + 1 == kStages ? 0 : write_stage + 1;
        }
    }
}

// The largest copy granule (16, 8 or 4 bytes) at which every key row and block is aligned, or 0.
int key_copy_granule(const ScoresArgs& a) {
    const uintptr_t base = reinterpret_cast<uintptr_t>(a.keys.base);
    for (const int gr : {16, 8, 4})
        if (base % gr == 0 && a.keys.block_bytes % gr == 0 && a.keys.data_bytes % gr == 0) return gr;
    return 0;
}

// Tiles per block: the candidate splits into whole waves of kResidentBlocks (1 … kMaxWaves of them), the
// one with the least work for the busiest block slot (its rounds × (tiles + start)). A function of the
// shapes alone.
int64_t split_keys(int64_t tiles, int64_t grid_y) {
    int64_t best_tiles = tiles, best_cost = -1;
    for (int64_t waves = 1; waves <= kMaxWaves; ++waves) {
        const int64_t blocks_x = std::clamp<int64_t>(waves * kResidentBlocks / grid_y, 1, tiles);
        const int64_t per_block = (tiles + blocks_x - 1) / blocks_x;
        const int64_t grid_x = (tiles + per_block - 1) / per_block;
        const int64_t rounds = (grid_x * grid_y + kResidentBlocks - 1) / kResidentBlocks;
        const int64_t cost = rounds * (per_block + kBlockStartTiles);
        if (best_cost < 0 || cost < best_cost) best_cost = cost, best_tiles = per_block;
    }
    return best_tiles;
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
    const int64_t tiles = (a.n_cols + kTileKeys - 1) / kTileKeys;
    const int64_t grid_y = std::min(a.n_tokens, kMaxGridY);
    const int64_t tiles_per_block = split_keys(tiles, grid_y);
    const int64_t grid_x = (tiles + tiles_per_block - 1) / tiles_per_block;
    launch_after_previous(indexer_scores_mma_kernel<kHalf, kFp8Keys>,
                          dim3(static_cast<unsigned>(grid_x), static_cast<unsigned>(grid_y)), kThreads,
                          static_cast<size_t>(L.bytes), stream, a, static_cast<int>(tiles_per_block),
                          key_copy_granule(a));
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
