// The Lightning Indexer's scores with warpgroup MMAs for the deployed operands (indexer_scores_wgmma.h): e4m3
// q against fp8_row_scale keys, up to 64 heads and 128 dims. The math of ops/indexer_scores.h:
// score[t, j] = s_j · Σ_h w[t, h] · ReLU(Σ_i q[t, h, i] · v_j[i]), fp32 sums in any order.
//
// d[t, j, h] is a [keys × dims] · [dims × heads] product per token, so that all the heads of a key end in one
// accumulator row: wgmma m64n64k16 with f16 operands (every e4m3 value is an f16, so the products are exact)
// and fp32 accumulation, heads padded with zero heads to 64 and dims with zeros to 128.
// - A = the keys, from registers. Each warp converts the raw e4m3 bytes of its own 16 keys of a tile into f16
//   pairs, so no key is converted twice: ldmatrix (b16) over 16-byte row pieces gives lane (g, t) the bytes of
//   dims 4t … 4t + 3 of a key, which become k = 2t, 2t + 1 and k = 2t + 8, 2t + 9 of the 16-dim step
//   (e4m3_dim_column).
// - B = q[t] as f16 in shared memory, K-major in the 128-byte swizzle, its dims at the same columns;
//   converted once per token. The head weights w[t, h] (0 for padding) beside it.
// - Each thread ends with 16 heads of two keys: w_h·ReLU(d) summed over them, then over the 4 lanes of the
//   row by shuffles, always in the same order, so two runs give the same bytes.
// - Keys travel as in the mma.sync kernel (indexer_key_tiles.cuh): tiles of 128 keys (64 per warpgroup) into
//   a ring of kStages shared-memory stages with cp.async, each key's block-table entry read one tile before
//   its copy is issued, the copies of a tile issued while the products of the tile before run; one thread
//   block of two warpgroups per (token, range of tiles).
#include "backends/cuda/indexer_scores_wgmma.h"

#include <algorithm>
#include <cstdint>

#include "backends/cuda/async_copy.cuh"
#include "backends/cuda/cuda_status.h"
#include "backends/cuda/dependent_launch.cuh"
#include "backends/cuda/indexer_key_tiles.cuh"
#include "backends/cuda/mma_sync.cuh"
#include "backends/cuda/wgmma.cuh"

namespace sieve::cuda {
namespace {

constexpr int kThreads = 256;   // two warpgroups
constexpr int kTileKeys = 128;  // 16 per warp
constexpr int kHeads = 64;      // the wgmma's n
constexpr int kDims = 128;      // the product's k: 8 steps of 16
constexpr int kKSteps = kDims / 16;
static_assert(kThreads == 2 * kTileKeys, "two threads bring each key of a tile (indexer_key_tiles.cuh)");
constexpr int kStages = 4;      // key tiles in shared memory: one multiplied, three in flight
// Shared memory, from a 1024-byte aligned start (the swizzle's atoms): q [2 slabs of 64 dims][64 heads] f16,
// the head weights, then the stages: [kTileKeys][kKeyRow] raw key bytes, [kTileKeys] fp32 scales,
// [kTileKeys] status bytes. A key row is 9 16-byte units, so that the 8 row addresses of an ldmatrix fall in
// distinct banks.
constexpr int kKeyRow = kDims + 16;
constexpr int kScalesOff = kTileKeys * kKeyRow;
constexpr int kStatusOff = kScalesOff + kTileKeys * 4;
constexpr int kStageBytes = (kStatusOff + kTileKeys + 15) / 16 * 16;
constexpr int kQSlabBytes = kHeads * wgmma::kSlabValues * 2;
constexpr int kWOff = 2 * kQSlabBytes;
constexpr int kStagesOff = kWOff + kHeads * 4;
constexpr int kSmemBytes = kStagesOff + kStages * kStageBytes + wgmma::kAtomBytes;  // + the alignment's slack

__global__ void __launch_bounds__(kThreads, 2) indexer_scores_wgmma_kernel(ScoresArgs a, int tiles_per_block, int granule) {
    wait_for_previous_kernel();
    extern __shared__ __align__(16) uint8_t smem_raw[];
    uint8_t* const smem = smem_raw + (wgmma::kAtomBytes - mma::smem_address(smem_raw) % wgmma::kAtomBytes) % wgmma::kAtomBytes;
    float* const w_s = reinterpret_cast<float*>(smem + kWOff);
    uint8_t* const stages = smem + kStagesOff;
    const uint32_t stages_address = mma::smem_address(stages);
    const auto key_stage = [=](int s) {
        return KeyStage{stages_address + static_cast<uint32_t>(s * kStageBytes), stages + s * kStageBytes, kKeyRow, kDims,
                        kScalesOff, kStatusOff};
    };

    const int tid = static_cast<int>(threadIdx.x), lane = tid % 32, warp = tid / 32, g = lane / 4, tq = lane % 4;
    const int64_t H = a.n_heads, D = a.head_dim;
    KeyTileRing<true, kTileKeys, kStages, decltype(key_stage)> ring(a, key_stage, granule);
    // Warp w multiplies keys 16w … 16w + 15 of a tile (rows 16·(w % 4) … of its warpgroup's m64). Its ldmatrix
    // matrices per pair of k-steps: keys +0 … 7 and +8 … 15 of the first step's 16 bytes, then of the second's;
    // lane l gives the address of row l % 8 of matrix l / 8.
    const uint32_t key_lane_offset =
        static_cast<uint32_t>((16 * warp + (lane & 7) + 8 * ((lane >> 3) & 1)) * kKeyRow + (lane >> 4) * 16);
    const uint64_t q_desc = wgmma::sw128_descriptor(mma::smem_address(smem), 16, wgmma::kAtomBytes);

    for (int64_t t = blockIdx.y; t < a.n_tokens; t += gridDim.y) {
        if (!ring.start(t, tiles_per_block)) continue;  // the first tiles travel while q is converted

        // q[t] as f16 pairs (dims p, p + 1 of a head land at adjacent columns), zero heads and dims as padding.
        const uint8_t* const q8 = static_cast<const uint8_t*>(a.q) + t * a.q_token_stride;
        for (int idx = tid; idx < kHeads * kDims / 2; idx += kThreads) {
            const int h = idx / (kDims / 2), p = 2 * (idx % (kDims / 2)), k = e4m3_dim_column(p);
            uint32_t pair = 0;
            if (h < H && p < D) {
                const uint8_t* const src = q8 + h * a.q_head_stride + p;
                pair = src[0] | (p + 1 < D ? static_cast<uint32_t>(src[1]) << 8 : 0u);
            }
            *reinterpret_cast<uint32_t*>(smem + (k / 64) * kQSlabBytes + wgmma::swizzle_chunk(h, (k % 64) / 8) + (k % 8) * 2) =
                mma::e4m3x2_to_operand<true>(pair);
        }
        for (int h = tid; h < kHeads; h += kThreads) w_s[h] = h < H ? indexer_head_weight(a, t, h) : 0.0f;
        wgmma::fence_operands();  // q is read by wgmma (after the first tile's barrier)

        float* const out_row = a.out + t * a.out_row_stride;
        for (int tile = ring.tile0; tile < ring.tile1; ++tile) {
            ring.arrive();  // (the barrier also publishes q and w_s)

            // This warp's A fragments for the 8 k-steps: keys g and g + 8, f16 pairs of dims 4t, 4t + 1 (k 2t)
            // and 4t + 2, 4t + 3 (k 2t + 8).
            const KeyStage st = key_stage(ring.read_stage);
            uint32_t af[kKSteps][4];
#pragma unroll
            for (int kp = 0; kp < kKSteps / 2; ++kp) {
                uint32_t r[4];
                mma::ldmatrix_x4(r, st.rows + key_lane_offset + static_cast<uint32_t>(kp * 32));
#pragma unroll
                for (int half = 0; half < 2; ++half) {
                    uint32_t(&f)[4] = af[2 * kp + half];
                    f[0] = mma::e4m3x2_to_operand<true>(r[2 * half] & 0xffffu);
                    f[1] = mma::e4m3x2_to_operand<true>(r[2 * half + 1] & 0xffffu);
                    f[2] = mma::e4m3x2_to_operand<true>(r[2 * half] >> 16);
                    f[3] = mma::e4m3x2_to_operand<true>(r[2 * half + 1] >> 16);
                }
            }
            float acc[32] = {};
#pragma unroll
            for (int ks = 0; ks < kKSteps; ++ks) wgmma::pin(af[ks]);
            wgmma::pin(acc);
            wgmma::fence();
            // k-step K of q starts 32 bytes a step inside its slab of 64 dims.
            wgmma::for_each_index<kKSteps>([&](auto step) {
                constexpr int K = decltype(step)::value;
                wgmma::mma_rs_m64n64k16_f16<(K / 4) * kQSlabBytes + (K % 4) * 32>(acc, af[K], q_desc, K > 0);
            });
            wgmma::commit();
            ring.refill(tile);  // the next tile's copies are issued while the products run
            wgmma::wait<0>();
            wgmma::pin(acc);

            // acc[4j + c]: key g, head 8j + 2t + c; acc[4j + 2 + c]: key g + 8. ReLU(x) = x > 0 ? x : 0: a NaN
            // dot counts 0 (ops/indexer_scores.h).
            float sum[2] = {0.0f, 0.0f};
#pragma unroll
            for (int j = 0; j < kHeads / 8; ++j)
#pragma unroll
                for (int c = 0; c < 2; ++c) {
                    const float w = w_s[8 * j + 2 * tq + c];
#pragma unroll
                    for (int r = 0; r < 2; ++r) {
                        const float d = acc[4 * j + 2 * r + c];
                        sum[r] = fmaf(w, d > 0.0f ? d : 0.0f, sum[r]);
                    }
                }
#pragma unroll
            for (int r = 0; r < 2; ++r) {
                sum[r] += __shfl_xor_sync(0xffffffffu, sum[r], 1);
                sum[r] += __shfl_xor_sync(0xffffffffu, sum[r], 2);
            }
            if (tq < 2) {  // lane t = 0 writes key g, lane t = 1 key g + 8
                const int k = 16 * warp + g + 8 * tq;
                const uint8_t status = st.base[kStatusOff + k];
                if (status != kKeyNoCandidate)  // columns j ≥ n_keys[t] are not written
                    out_row[static_cast<uint32_t>(tile) * kTileKeys + static_cast<uint32_t>(k)] =
                        staged_key_score<true>(st, k, status, sum[tq]);
            }
            ring.done();
        }
    }
}

cudaError_t configure_kernel() {
    const cudaError_t e = cudaFuncSetAttribute(indexer_scores_wgmma_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, kSmemBytes);
    if (e != cudaSuccess) return e;
    return cudaFuncSetAttribute(indexer_scores_wgmma_kernel, cudaFuncAttributePreferredSharedMemoryCarveout,
                                cudaSharedmemCarveoutMaxShared);
}

}  // namespace

bool indexer_scores_wgmma_supported(const ScoresArgs& a) {
    // cp.async copies whole aligned granules of every key row, and its fp32 scale as 4 aligned bytes.
    return a.inputs_ok && a.q_format == kIndexerQE4m3 && a.keys.format == kIndexerKeyFp8RowScale && key_copy_granule(a) >= 4 &&
           a.keys.scales_offset % 4 == 0 && a.n_heads >= 1 && a.n_heads <= kHeads && a.head_dim >= 1 && a.head_dim <= kDims;
}

Status launch_indexer_scores_wgmma(const ScoresArgs& a, cudaStream_t stream) {
    static const cudaError_t configured = configure_kernel();
    SIEVE_RETURN_IF_ERROR(cuda_status(configured, "indexer_scores: shared memory of the wgmma kernel"));
    const KeyGrid g = key_grid<kTileKeys>(a);
    launch_after_previous(indexer_scores_wgmma_kernel, g.grid, kThreads, static_cast<size_t>(kSmemBytes), stream, a, g.tiles_per_block, key_copy_granule(a));
    return cuda_status(cudaGetLastError(), "indexer_scores launch (wgmma)");
}

}  // namespace sieve::cuda
