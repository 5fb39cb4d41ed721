// The key side of the Lightning Indexer's tensor-core kernels: how a tile's key rows travel from the paged
// cache into a shared-memory stage with cp.async and the status byte each key leaves there
// (indexer_scores_mma.cu: mma.sync, any bf16 / e4m3 operands); the columns of e4m3 key bytes read by ldmatrix,
// and the grid: how the candidate columns are split over thread blocks (that kernel's and
// indexer_scores_wgmma.cu's, whose keys the copy engine brings).
//
// A stage holds, for each key k of a tile, its raw value bytes at row k (row_bytes per row, zero-filled past
// the key's data and wholly when it is not located), its fp32 row scale (fp8 keys) and a status byte. Two
// threads bring one key: every other copy granule each; the first writes the status, the second copies the
// scale.
#pragma once

#include <algorithm>
#include <cstdint>

#include <cuda_runtime_api.h>

#include "backends/cuda/async_copy.cuh"
#include "backends/cuda/indexer_scores_args.cuh"

namespace sieve::cuda {
namespace {

// A key's status in its stage, from its location.
constexpr uint8_t kKeyLocated = 0, kKeyNoCandidate = 1, kKeyUnlocatable = 2;

// The source of zero-filled copies (cp.async with source size 0 reads nothing, but wants an address).
__device__ __align__(16) uint8_t g_zero_source[16];

// Where a stage keeps its rows, scales and status bytes (shared addresses and byte offsets).
struct KeyStage {
    uint32_t rows = 0;   // shared address of the stage (row k at rows + k·row_stride)
    uint8_t* base = nullptr;  // the same stage as a pointer, for the status bytes
    int row_stride = 0, row_bytes = 0;  // bytes between rows; bytes copied per row (the padded key data)
    int scales_off = 0, status_off = 0;
};

// This thread's share of the copies of one key's row: granules first, first + 2, … of kGranule bytes of the
// padded row (those past the key's data_bytes, or all when the key is not located, zero-filled).
template <int kGranule>
__device__ __forceinline__ void copy_key_values(uint32_t dst_row, const uint8_t* src_row, bool located, int first, int row_bytes,
                                                int data_bytes) {
#pragma unroll
    for (int b = first * kGranule; b < row_bytes; b += 2 * kGranule) {
        const bool have = located && b < data_bytes;
        async_copy::copy_zfill<kGranule>(dst_row + static_cast<uint32_t>(b), have ? src_row + b : g_zero_source, have ? kGranule : 0);
    }
}

// Issues this thread's part (`part` 0 or 1) of the copies of key `key` of a tile into stage `s`, the key
// looked up as `k` (indexer_key_lookup). `granule`: key_copy_granule's.
template <bool kFp8Keys>
__device__ __forceinline__ void stage_key(const ScoresArgs& a, const IndexerKeyLookup& k, const KeyStage& s, int key, int part,
                                          int granule) {
    const int64_t loc = indexer_key_lookup_location(a, k);
    const bool located = loc >= 0;
    const uint8_t* const src = a.keys.base + (located ? loc : 0);
    const uint32_t dst = s.rows + static_cast<uint32_t>(key * s.row_stride);
    const int data_bytes = static_cast<int>(a.keys.data_bytes);
    if (granule == 16)
        copy_key_values<16>(dst, src, located, part, s.row_bytes, data_bytes);
    else if (granule == 8)
        copy_key_values<8>(dst, src, located, part, s.row_bytes, data_bytes);
    else
        copy_key_values<4>(dst, src, located, part, s.row_bytes, data_bytes);
    if (part == 0) {
        s.base[s.status_off + key] = located ? kKeyLocated : loc == kNoCandidate ? kKeyNoCandidate : kKeyUnlocatable;
    } else if constexpr (kFp8Keys) {  // its fp32 row scale, at scales_offset + 4·entry of its block
        const uint8_t* const scale =
            located ? a.keys.base + k.id * a.keys.block_bytes + a.keys.scales_offset + 4 * static_cast<int64_t>(k.entry) : g_zero_source;
        async_copy::copy_zfill<4>(s.rows + static_cast<uint32_t>(s.scales_off + 4 * key), scale, located ? 4 : 0);
    }
}

// The score of a key from its stage: NaN for a key that cannot be located, else s · sum (s: its fp32 row
// scale for fp8 keys, else 1). Not called for kKeyNoCandidate (columns j ≥ n_keys[t] are not written).
template <bool kFp8Keys>
__device__ __forceinline__ float staged_key_score(const KeyStage& s, int key, uint8_t status, float sum) {
    if (status != kKeyLocated) return __uint_as_float(0x7fc00000u);
    const float scale = kFp8Keys ? reinterpret_cast<const float*>(s.base + s.scales_off)[key] : 1.0f;
    return __fmul_rn(scale, sum);
}

// The k (within the 16-dim step of dim p) at which an e4m3 key's dim p reaches an mma operand when the key
// bytes are read with ldmatrix b16 over 16-byte row pieces: lane (g, t) gets dims 4t … 4t + 3, converted into
// the pairs k = 2t, 2t + 1 and k = 2t + 8, 2t + 9. q is stored with its dims at the same columns, so that the
// sum over k is the dot product in another order (which the contract allows).
__host__ __device__ constexpr int e4m3_dim_column(int p) {
    const int r = p % 16, t = r / 4, s = r % 4;
    return p - r + (s < 2 ? 2 * t + s : 8 + 2 * t + (s - 2));
}

// Token t's candidates n (n_keys[t] clamped to [0, n_cols]: at most INT32_MAX) and the tiles [tile0, tile1) of
// kTileKeys columns that this block takes (the blockIdx.x-th run of tiles_per_block); false when it takes none.
template <int kTileKeys>
__device__ __forceinline__ bool token_tiles(const ScoresArgs& a, int64_t t, int tiles_per_block, uint32_t& n, int& tile0,
                                            int& tile1) {
    const int64_t nk = min(max(static_cast<int64_t>(a.n_keys[t]), int64_t{0}), a.n_cols);
    const int64_t tiles = (nk + kTileKeys - 1) / kTileKeys;
    const int64_t first_tile = static_cast<int64_t>(blockIdx.x) * tiles_per_block;
    if (first_tile >= tiles) return false;
    n = static_cast<uint32_t>(nk);
    tile0 = static_cast<int>(first_tile);
    tile1 = static_cast<int>(min(first_tile + tiles_per_block, tiles));
    return true;
}

// One token's key tiles through a ring of kStages shared-memory stages, as the mma.sync kernel runs it. start: the
// token's tiles this block takes, and the first kStages − 1 of them travelling (one cp.async group per tile
// slot, empty or not, so that the wait_group counts stay uniform). arrive(), before tile `tile` is read
// from stage read_stage: this thread's copies of it have landed and, after the barrier, everyone's (and
// every warp is done with tile − 1). refill(tile), any time after arrive: the tile kStages − 1 ahead goes
// into the stage tile − 1 used, its block-table entry read one iteration early, so no load latency
// stands in front of the copies. kThreads = 2 · kTileKeys: thread i brings part i % 2 of key i / 2 of
// each tile. stage_of(s) gives stage s as a KeyStage.
template <bool kFp8Keys, int kTileKeys, int kStages, class StageOf>
struct KeyTileRing {
    const ScoresArgs& a;
    StageOf stage_of;
    int granule = 0;
    int key = 0, part = 0;
    IndexerBlockDivisor block;
    // The token's.
    const int32_t* row = nullptr;
    bool req_ok = false;
    uint32_t n = 0;
    int tile0 = 0, tile1 = 0;
    IndexerKeyLookup ahead;  // the key of tile + kStages − 1
    int read_stage = 0, write_stage = kStages - 1;

    __device__ KeyTileRing(const ScoresArgs& args, StageOf stages, int copy_granule)
        : a(args), stage_of(stages), granule(copy_granule), key(static_cast<int>(threadIdx.x) / 2),
          part(static_cast<int>(threadIdx.x) % 2), block(indexer_block_divisor(args.keys)) {}

    __device__ IndexerKeyLookup lookup(int tile) const {
        return indexer_key_lookup(a, row, req_ok, static_cast<uint32_t>(tile) * kTileKeys + static_cast<uint32_t>(key), n, block);
    }
    // Token t's tiles [tile0, tile1) of this block (blockIdx.x-th run of tiles_per_block); false (uniform over
    // the block) when it takes none. The barrier first: the previous token's readers of the block's shared
    // memory are done.
    __device__ bool start(int64_t t, int tiles_per_block) {
        if (!token_tiles<kTileKeys>(a, t, tiles_per_block, n, tile0, tile1)) return false;
        __syncthreads();
        const int64_t req = a.token_request[t];
        req_ok = req >= 0 && req < a.n_requests;  // inputs_ok: the host sends no other args here
        row = a.block_table + (req_ok ? req : 0) * a.block_table_stride;
        for (int s = 0; s < kStages - 1; ++s) {
            if (tile0 + s < tile1) stage_key<kFp8Keys>(a, lookup(tile0 + s), stage_of(s), key, part, granule);
            async_copy::commit();
        }
        if (tile0 + kStages - 1 < tile1) ahead = lookup(tile0 + kStages - 1);
        read_stage = 0, write_stage = kStages - 1;
        return true;
    }
    __device__ void arrive() {
        async_copy::wait<kStages - 2>();
        __syncthreads();
    }
    __device__ void refill(int tile) {
        const int after = tile + kStages - 1;
        if (after < tile1) stage_key<kFp8Keys>(a, ahead, stage_of(write_stage), key, part, granule);
        async_copy::commit();
        if (after + 1 < tile1) ahead = lookup(after + 1);
    }
    // After tile `tile` is read.
    __device__ void done() {
        read_stage = read_stage + 1 == kStages ? 0 : read_stage + 1;
        write_stage = write_stage + 1 == kStages ? 0 : write_stage + 1;
    }
};

// The largest copy granule (16, 8 or 4 bytes) at which every key row and block is aligned, or 0.
inline int key_copy_granule(const ScoresArgs& a) {
    const uintptr_t base = reinterpret_cast<uintptr_t>(a.keys.base);
    for (const int gr : {16, 8, 4})
        if (base % gr == 0 && a.keys.block_bytes % gr == 0 && a.keys.data_bytes % gr == 0) return gr;
    return 0;
}

// The grid of both kernels over tiles of kTileKeys candidate columns: blockIdx.y a token (more tokens in
// strides of gridDim.y), blockIdx.x a run of tiles_per_block tiles. Both keep two blocks resident on each of
// an H100 / H200 SXM's 132 multiprocessors; tiles_per_block is the split into whole waves of those (1 … 8
// of them) with the least work for the busiest block slot (its rounds × (tiles + 2), 2 tiles standing for a
// block's start: q and the pipeline's fill). Constants, so that the split is a function of the shapes alone.
struct KeyGrid {
    dim3 grid;
    int tiles_per_block = 1;
};
template <int kTileKeys>
KeyGrid key_grid(const ScoresArgs& a) {
    constexpr int64_t kResidentBlocks = 132 * 2, kMaxWaves = 8, kBlockStartTiles = 2, kMaxGridY = 65535;
    const int64_t tiles = (a.n_cols + kTileKeys - 1) / kTileKeys;
    const int64_t grid_y = std::min(a.n_tokens, kMaxGridY);
    int64_t best_tiles = tiles, best_cost = -1;
    for (int64_t waves = 1; waves <= kMaxWaves; ++waves) {
        const int64_t blocks_x = std::clamp<int64_t>(waves * kResidentBlocks / grid_y, 1, tiles);
        const int64_t per_block = (tiles + blocks_x - 1) / blocks_x;
        const int64_t grid_x = (tiles + per_block - 1) / per_block;
        const int64_t rounds = (grid_x * grid_y + kResidentBlocks - 1) / kResidentBlocks;
        const int64_t cost = rounds * (per_block + kBlockStartTiles);
        if (best_cost < 0 || cost < best_cost) best_cost = cost, best_tiles = per_block;
    }
    const int64_t grid_x = (tiles + best_tiles - 1) / best_tiles;
    return {dim3(static_cast<unsigned>(grid_x), static_cast<unsigned>(grid_y)), static_cast<int>(best_tiles)};
}

}  // namespace
}  // namespace sieve::cuda
