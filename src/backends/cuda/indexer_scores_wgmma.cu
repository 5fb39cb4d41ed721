// The Lightning Indexer's scores with warpgroup MMAs for the deployed key layout (indexer_scores_wgmma.h):
// fp8_row_scale keys of 128 dims in blocks of a multiple of 64 entries, e4m3 q with its scale (DeepSeek-V3.2,
// Hy4) or bf16 q (DeepSeek-V4), up to 64 heads. The math of ops/indexer_scores.h:
// score[t, j] = s_j · Σ_h w[t, h] · ReLU(Σ_i q[t, h, i] · v_j[i]), fp32 sums in any order.
//
// d[t, j, h] is a [keys × dims] · [dims × heads] product per token, so that all the heads of a key end in one
// accumulator row: wgmma m64n64k16 with fp32 accumulation, heads padded with zero heads to 64. Its operands
// are exact: f16 for e4m3 q (every e4m3 value is an f16), bf16 for bf16 q (the keys widened).
// - Keys travel by the copy engine: a tile of 128 keys is two runs of 64 consecutive entries of a paged block,
//   each one tensor copy of its 64 × 128 value bytes (the tensor map's box, in the 128-byte swizzle) and one
//   bulk copy of its 64 fp32 row scales. Thread 0 issues them into a ring of kStages shared-memory stages,
//   each stage with an mbarrier that counts the bytes landing; a run whose block cannot be located is not
//   copied and its keys score NaN. Each run's block-table entry is read one tile before its copies are
//   issued, so no load latency stands in front of them. No thread but the first spends an instruction on the
//   copies: the warps only wait for a stage, multiply it and write the scores.
// - A = the keys, from registers. Each warp converts the raw e4m3 bytes of its own 16 keys of a tile: ldmatrix
//   (b16) over 16-byte row pieces (at their swizzled places) gives lane (g, t) the bytes of dims 4t … 4t + 3 of
//   a key, which become k = 2t, 2t + 1 and k = 2t + 8, 2t + 9 of the 16-dim step (e4m3_dim_column).
// - B = q[t] in shared memory, K-major in the 128-byte swizzle, its dims at the same columns; converted once
//   per token. The head weights w[t, h] (0 for padding) beside it.
// - Each thread ends with 16 heads of two keys: w_h·ReLU(d) summed over them, then over the 4 lanes of the
//   row by shuffles, always in the same order, so two runs give the same bytes.
// - One thread block of two warpgroups per (token, range of tiles); the split over blocks is key_grid's.
#include "backends/cuda/indexer_scores_wgmma.h"

#include <cuda.h>
#include <cudaTypedefs.h>

#include <algorithm>
#include <cstdint>
#include <limits>

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
constexpr int kRunKeys = 64;    // keys of one tensor copy: consecutive entries of one block
constexpr int kRuns = kTileKeys / kRunKeys;
constexpr int kHeads = 64;      // the wgmma's n
constexpr int kDims = 128;      // the product's k (8 steps of 16), and a key's value bytes
constexpr int kKSteps = kDims / 16;
constexpr int kStages = 5;      // key tiles in shared memory: one multiplied, four in flight
// Shared memory, from a 1024-byte aligned start (the swizzle's atoms): q [2 slabs of 64 dims][64 heads], the
// head weights, the stages' mbarriers and run flags (1: the run was copied), then the stages: [kTileKeys]
// rows of kDims value bytes in the 128-byte swizzle, [kTileKeys] fp32 scales.
constexpr int kRunValueBytes = kRunKeys * kDims;
constexpr int kRunScaleBytes = kRunKeys * 4;
constexpr int kScalesOff = kTileKeys * kDims;
constexpr int kStageBytes = (kScalesOff + kTileKeys * 4 + wgmma::kAtomBytes - 1) / wgmma::kAtomBytes * wgmma::kAtomBytes;
constexpr int kQSlabBytes = kHeads * wgmma::kSlabValues * 2;
constexpr int kWOff = 2 * kQSlabBytes;
constexpr int kBarsOff = kWOff + kHeads * 4;
constexpr int kFlagsOff = kBarsOff + kStages * 8;
constexpr int kStagesOff = (kFlagsOff + kStages * kRuns + wgmma::kAtomBytes - 1) / wgmma::kAtomBytes * wgmma::kAtomBytes;
constexpr int kSmemBytes = kStagesOff + kStages * kStageBytes + wgmma::kAtomBytes;  // + the alignment's slack
static_assert(kStageBytes % wgmma::kAtomBytes == 0 && kRunValueBytes % wgmma::kAtomBytes == 0, "swizzle atoms stay aligned");

// Where one run of a tile comes from: block `id` (not yet range-checked; −1: none) from entry `entry`.
struct RunSource {
    int32_t id = -1;
    uint32_t entry = 0;
};

// One token's key tiles through the ring: start() takes the token's tiles [tile0, tile1) of this block and sets
// the first kStages − 1 of them travelling; arrive() before tile `tile` is read from stage read_stage (its bytes
// have landed, and every warp is done with tile − 1); refill(tile) after arrive: the tile kStages − 1 ahead
// goes into the stage tile − 1 used. Only thread 0 issues copies; every thread keeps the stage order and the
// barriers' phases, which carry on from token to token (each stage filled is waited on exactly once).
struct KeyRing {
    const ScoresArgs& a;
    const CUtensorMap* map;
    uint32_t bars, stages;  // shared addresses: the mbarriers, stage 0
    uint8_t* flags;
    IndexerBlockDivisor block;
    const int32_t* row = nullptr;  // the token's block-table row (req_ok)
    bool req_ok = false;
    uint32_t n = 0;  // the token's candidates
    int tile0 = 0, tile1 = 0;
    RunSource ahead[kRuns];  // thread 0: the runs of tile + kStages − 1
    int read_stage = 0, write_stage = kStages - 1;
    uint32_t phases = 0;  // bit s: the parity of stage s's next phase

    __device__ RunSource lookup(int tile, int run) const {
        const uint32_t j = static_cast<uint32_t>(tile) * kTileKeys + static_cast<uint32_t>(run) * kRunKeys;
        RunSource r;
        if (j >= n || !req_ok) return r;  // no candidate, or the request's row is not there: not copied
        const uint32_t b = block.block_of(j);  // paged_slot (ops/block_tables.h); 64 | block size: one block a run
        if (static_cast<int64_t>(b) >= a.block_table_stride) return r;
        r.id = __ldg(row + b);
        r.entry = j - b * block.size;
        return r;
    }
    __device__ void lookup_tile(int tile) {
#pragma unroll
        for (int r = 0; r < kRuns; ++r) ahead[r] = lookup(tile, r);
    }
    // Thread 0: the copies of `ahead` into stage s, announced to its barrier first.
    __device__ void issue(int s) {
        const uint32_t bar = bars + static_cast<uint32_t>(8 * s), dst = stages + static_cast<uint32_t>(s * kStageBytes);
        bool copied[kRuns];
        uint32_t bytes = 0;
#pragma unroll
        for (int r = 0; r < kRuns; ++r) {
            copied[r] = ahead[r].id >= 0 && ahead[r].id < a.keys.n_blocks;
            flags[s * kRuns + r] = copied[r] ? 1 : 0;
            bytes += copied[r] ? kRunValueBytes + kRunScaleBytes : 0;
        }
        async_copy::mbarrier_arrive_expect_tx(bar, bytes);
#pragma unroll
        for (int r = 0; r < kRuns; ++r) {
            if (!copied[r]) continue;
            async_copy::tensor_copy_3d(dst + static_cast<uint32_t>(r * kRunValueBytes), map, 0, static_cast<int32_t>(ahead[r].entry),
                                       ahead[r].id, bar);
            const uint8_t* const scales =
                a.keys.base + ahead[r].id * a.keys.block_bytes + a.keys.scales_offset + 4 * static_cast<int64_t>(ahead[r].entry);
            async_copy::bulk_copy(dst + static_cast<uint32_t>(kScalesOff + r * kRunScaleBytes), scales, kRunScaleBytes, bar);
        }
    }
    // Token t's tiles of this block (the blockIdx.x-th run of tiles_per_block); false (uniform over the block)
    // when it takes none. The barrier first: the previous token's readers of the block's shared memory are done.
    __device__ bool start(int64_t t, int tiles_per_block) {
        if (!token_tiles<kTileKeys>(a, t, tiles_per_block, n, tile0, tile1)) return false;
        __syncthreads();
        read_stage = 0, write_stage = kStages - 1;
        if (threadIdx.x != 0) return true;
        const int64_t req = a.token_request[t];
        req_ok = req >= 0 && req < a.n_requests;  // inputs_ok: the host sends no other args here
        row = a.block_table + (req_ok ? req : 0) * a.block_table_stride;
        for (int s = 0; s < kStages - 1 && tile0 + s < tile1; ++s) {
            lookup_tile(tile0 + s);
            issue(s);
        }
        if (tile0 + kStages - 1 < tile1) lookup_tile(tile0 + kStages - 1);
        return true;
    }
    __device__ void arrive() {
        async_copy::mbarrier_wait_parity(bars + static_cast<uint32_t>(8 * read_stage), (phases >> read_stage) & 1u);
        phases ^= 1u << read_stage;
        __syncthreads();
    }
    __device__ void refill(int tile) {
        if (threadIdx.x != 0) return;
        const int after = tile + kStages - 1;
        if (after < tile1) issue(write_stage);
        if (after + 1 < tile1) lookup_tile(after + 1);
    }
    // After tile `tile` is read.
    __device__ void done() {
        read_stage = read_stage + 1 == kStages ? 0 : read_stage + 1;
        write_stage = write_stage + 1 == kStages ? 0 : write_stage + 1;
    }
};

// kHalf: e4m3 q, f16 operands; else bf16 q, bf16 operands.
template <bool kHalf>
__global__ void __launch_bounds__(kThreads, 2)
    indexer_scores_wgmma_kernel(const __grid_constant__ CUtensorMap key_map, ScoresArgs a, int tiles_per_block) {
    wait_for_previous_kernel();
    extern __shared__ __align__(16) uint8_t smem_raw[];
    uint8_t* const smem = smem_raw + (wgmma::kAtomBytes - mma::smem_address(smem_raw) % wgmma::kAtomBytes) % wgmma::kAtomBytes;
    float* const w_s = reinterpret_cast<float*>(smem + kWOff);
    uint8_t* const flags = smem + kFlagsOff;
    const uint32_t bars = mma::smem_address(smem + kBarsOff), stages = mma::smem_address(smem + kStagesOff);
    const float* const scales = reinterpret_cast<const float*>(smem + kStagesOff + kScalesOff);  // + stage · kStageBytes / 4

    const int tid = static_cast<int>(threadIdx.x), lane = tid % 32, warp = tid / 32, g = lane / 4, tq = lane % 4;
    const int64_t H = a.n_heads;
    if (tid == 0) {
        for (int s = 0; s < kStages; ++s) async_copy::mbarrier_init(bars + static_cast<uint32_t>(8 * s), 1);
        async_copy::mbarrier_init_fence();
    }
    KeyRing ring{a, &key_map, bars, stages, flags, indexer_block_divisor(a.keys)};
    // Warp w multiplies keys 16w … 16w + 15 of a tile (rows 16·(w % 4) … of its warpgroup's m64). Its ldmatrix
    // matrices per pair of k-steps kp: keys +0 … 7 and +8 … 15 of the first step's 16 bytes (chunk 2·kp of
    // the row), then of the second's (chunk 2·kp + 1); lane l gives the address of row l % 8 of matrix l / 8,
    // at its chunk's swizzled place (the row's index mod 8 is l % 8).
    const int key_row = 16 * warp + (lane & 7) + 8 * ((lane >> 3) & 1);
    uint32_t key_lane_offset[kKSteps / 2];
#pragma unroll
    for (int kp = 0; kp < kKSteps / 2; ++kp) key_lane_offset[kp] = wgmma::swizzle_chunk(key_row, 2 * kp + (lane >> 4));
    const uint64_t q_desc = wgmma::sw128_descriptor(mma::smem_address(smem), 16, wgmma::kAtomBytes);

    for (int64_t t = blockIdx.y; t < a.n_tokens; t += gridDim.y) {
        if (!ring.start(t, tiles_per_block)) continue;  // the first tiles travel while q is converted

        // q[t] as operand pairs (dims p, p + 1 of a head land at adjacent columns), zero heads as padding.
        const int64_t q_base = t * a.q_token_stride;
        for (int idx = tid; idx < kHeads * kDims / 2; idx += kThreads) {
            const int h = idx / (kDims / 2), p = 2 * (idx % (kDims / 2)), k = e4m3_dim_column(p);
            uint32_t pair = 0;
            if (h < H) {
                const int64_t i = q_base + h * a.q_head_stride + p;
                if constexpr (kHalf) {
                    const uint8_t* const src = static_cast<const uint8_t*>(a.q) + i;
                    pair = mma::e4m3x2_to_operand<true>(src[0] | static_cast<uint32_t>(src[1]) << 8);
                } else {
                    const uint16_t* const src = static_cast<const uint16_t*>(a.q) + i;
                    pair = src[0] | static_cast<uint32_t>(src[1]) << 16;
                }
            }
            *reinterpret_cast<uint32_t*>(smem + (k / 64) * kQSlabBytes + wgmma::swizzle_chunk(h, (k % 64) / 8) + (k % 8) * 2) = pair;
        }
        for (int h = tid; h < kHeads; h += kThreads) w_s[h] = h < H ? indexer_head_weight(a, t, h) : 0.0f;
        wgmma::fence_operands();  // q is read by wgmma (after the first tile's barrier)

        float* const out_row = a.out + t * a.out_row_stride;
        for (int tile = ring.tile0; tile < ring.tile1; ++tile) {
            ring.arrive();  // (the barrier also publishes q and w_s)
            ring.refill(tile);

            // This warp's A fragments for the 8 k-steps: keys g and g + 8, pairs of dims 4t, 4t + 1 (k 2t) and
            // 4t + 2, 4t + 3 (k 2t + 8).
            const uint32_t rows = stages + static_cast<uint32_t>(ring.read_stage * kStageBytes);
            uint32_t af[kKSteps][4];
#pragma unroll
            for (int kp = 0; kp < kKSteps / 2; ++kp) {
                uint32_t r[4];
                mma::ldmatrix_x4(r, rows + key_lane_offset[kp]);
#pragma unroll
                for (int half = 0; half < 2; ++half) {
                    uint32_t(&f)[4] = af[2 * kp + half];
                    f[0] = mma::e4m3x2_to_operand<kHalf>(r[2 * half] & 0xffffu);
                    f[1] = mma::e4m3x2_to_operand<kHalf>(r[2 * half + 1] & 0xffffu);
                    f[2] = mma::e4m3x2_to_operand<kHalf>(r[2 * half] >> 16);
                    f[3] = mma::e4m3x2_to_operand<kHalf>(r[2 * half + 1] >> 16);
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
                wgmma::mma_rs_m64n64k16<(K / 4) * kQSlabBytes + (K % 4) * 32, kHalf>(acc, af[K], q_desc, K > 0);
            });
            wgmma::commit();
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
            const int k = 16 * warp + g + 8 * tq;  // lane t = 0 writes key g, lane t = 1 key g + 8
            const uint32_t j = static_cast<uint32_t>(tile) * kTileKeys + static_cast<uint32_t>(k);
            if (tq < 2 && j < ring.n) {  // columns j ≥ n_keys[t] are not written
                // A key whose block cannot be located scores NaN, the sentinel a downstream top-k ranks last.
                const bool located = flags[ring.read_stage * kRuns + k / kRunKeys] != 0;
                out_row[j] = located ? __fmul_rn(scales[ring.read_stage * (kStageBytes / 4) + k], sum[tq]) : __uint_as_float(0x7fc00000u);
            }
            ring.done();
        }
    }
}

// cuTensorMapEncodeTiled from the driver the runtime uses (no link against the driver library), once.
PFN_cuTensorMapEncodeTiled_v12000 tensor_map_encoder() {
    static const PFN_cuTensorMapEncodeTiled_v12000 encode = [] {
        void* fn = nullptr;
        cudaDriverEntryPointQueryResult found{};
        if (cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &fn, 12000, cudaEnableDefault, &found) != cudaSuccess ||
            found != cudaDriverEntryPointSuccess)
            fn = nullptr;
        return reinterpret_cast<PFN_cuTensorMapEncodeTiled_v12000>(fn);
    }();
    return encode;
}

// The key cache as a 3-d tensor of bytes: [n_blocks][block_size][kDims] with the blocks' and entries' strides;
// its box is one run (kRunKeys entries of one block), landing in the 128-byte swizzle.
Status encode_key_map(const ScoresArgs& a, CUtensorMap* map) {
    const auto encode = tensor_map_encoder();
    if (encode == nullptr) return internal_error("cuda: indexer_scores: cuTensorMapEncodeTiled is not available from the driver");
    const cuuint64_t dims[3] = {static_cast<cuuint64_t>(kDims), static_cast<cuuint64_t>(a.keys.block_size),
                                static_cast<cuuint64_t>(a.keys.n_blocks)};
    const cuuint64_t strides[2] = {static_cast<cuuint64_t>(a.keys.data_bytes), static_cast<cuuint64_t>(a.keys.block_bytes)};
    const cuuint32_t box[3] = {kDims, kRunKeys, 1}, element_strides[3] = {1, 1, 1};
    const CUresult r = encode(map, CU_TENSOR_MAP_DATA_TYPE_UINT8, 3, const_cast<uint8_t*>(a.keys.base), dims, strides, box,
                              element_strides, CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B,
                              CU_TENSOR_MAP_L2_PROMOTION_L2_256B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
    if (r != CUDA_SUCCESS)
        return internal_error("cuda: indexer_scores: cuTensorMapEncodeTiled failed ({}) for {} blocks of {} entries, {} bytes apart",
                              static_cast<int>(r), a.keys.n_blocks, a.keys.block_size, a.keys.block_bytes);
    return Status::ok();
}

template <bool kHalf>
Status launch(const ScoresArgs& a, cudaStream_t stream) {
    static const cudaError_t configured = [] {
        const auto kernel = indexer_scores_wgmma_kernel<kHalf>;
        const cudaError_t e = cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, kSmemBytes);
        if (e != cudaSuccess) return e;
        return cudaFuncSetAttribute(kernel, cudaFuncAttributePreferredSharedMemoryCarveout, cudaSharedmemCarveoutMaxShared);
    }();
    SIEVE_RETURN_IF_ERROR(cuda_status(configured, "indexer_scores: shared memory of the wgmma kernel"));
    CUtensorMap map;
    SIEVE_RETURN_IF_ERROR(encode_key_map(a, &map));
    const KeyGrid g = key_grid<kTileKeys>(a);
    launch_after_previous(indexer_scores_wgmma_kernel<kHalf>, g.grid, kThreads, static_cast<size_t>(kSmemBytes), stream, map, a,
                          g.tiles_per_block);
    return cuda_status(cudaGetLastError(), "indexer_scores launch (wgmma)");
}

}  // namespace

bool indexer_scores_wgmma_supported(const ScoresArgs& a) {
    const IndexerKeyCache& c = a.keys;
    // The tensor copies: 16-byte aligned base and strides, int32 coordinates, whole runs inside a block; the
    // scale copies: 16-byte aligned runs of scales (scales_offset = block_size · 128, a multiple of 16).
    const bool layout_ok = c.format == kIndexerKeyFp8RowScale && c.data_bytes == kDims &&
                           reinterpret_cast<uintptr_t>(c.base) % 16 == 0 && c.block_bytes % 16 == 0 && c.block_size % kRunKeys == 0 &&
                           c.block_size <= std::numeric_limits<int32_t>::max() && c.n_blocks >= 1 &&
                           c.n_blocks <= std::numeric_limits<int32_t>::max() && c.scales_offset % 16 == 0;
    return a.inputs_ok && (a.q_format == kIndexerQE4m3 || a.q_format == kIndexerQBf16) && layout_ok && a.n_heads >= 1 &&
           a.n_heads <= kHeads && a.head_dim == kDims;
}

Status launch_indexer_scores_wgmma(const ScoresArgs& a, cudaStream_t stream) {
    return a.q_format == kIndexerQE4m3 ? launch<true>(a, stream) : launch<false>(a, stream);
}

}  // namespace sieve::cuda
