// The Lightning Indexer's scores on tensor cores (indexer_scores_mma.h; the math of ops/indexer_scores.h).
//
// d[t, h, j] = Σ_i q[t, h, i] · v_j[i] is a [heads × dims] · [dims × keys] product per token: mma.sync
// m16n8k16 with fp32 accumulation. Its operands are exact: e4m3 q with e4m3 keys become f16 (every e4m3
// value is an f16), otherwise bf16 (bf16 q and keys as they are, e4m3 keys widened); the contract allows
// any order of the fp32 sums. Then w_h·ReLU(d) summed over the heads in a fixed order, and s_j once.
//
// One thread block of 8 warps per (token, range of key tiles). The token's q (all heads, padded with zero
// heads to a multiple of 32 and zero dims to a multiple of 16) stays in shared memory; each tile of 128
// keys is converted into shared memory while the next tile's raw bytes are already being loaded into
// registers. Warp (wm, wn) multiplies head groups wm, wm + 2, ... of 32 heads with keys 32·wn … 32·wn + 31;
// each lane sums w_h·ReLU over its heads, the lanes of a key column are added by shuffles and the two
// head halves in shared memory, always in the same order: two runs give the same bytes.
#include "backends/cuda/indexer_scores_mma.h"

#include <algorithm>
#include <cstdint>

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_fp8.h>

#include "backends/cuda/cuda_status.h"

namespace sieve::cuda {
namespace {

constexpr int kThreads = 256;
constexpr int kTileKeys = 128;   // keys per tile: 4 key warps × 32
constexpr int kWarpHeads = 32;   // heads of one warp pass: 2 m-tiles of 16
constexpr int kMaxHeads = 128;
constexpr int kMaxDims = 128;
constexpr int kChunk = 8;        // key values per load item
constexpr int kMaxItems = kTileKeys * kMaxDims / kChunk / kThreads;  // load items per thread and tile
// Blocks the grid aims at: four waves of two blocks per multiprocessor of an H100 / H200 SXM (132). A
// constant, so that the split of the keys is a function of the shapes alone.
constexpr int64_t kTargetBlocks = 132 * 2 * 4;
constexpr int64_t kMaxGridY = 65535;

struct SmemLayout {
    int hp = 0, dp = 0, row = 0;  // padded heads, padded dims, elements per shared row (dp + 8: no bank conflicts)
    size_t q_off = 0, k_off = 0, w_off = 0, red_off = 0, loc_off = 0, bytes = 0;
};
__host__ __device__ inline SmemLayout smem_layout(int64_t heads, int64_t dims) {
    SmemLayout l;
    l.hp = static_cast<int>((heads + kWarpHeads - 1) / kWarpHeads * kWarpHeads);
    l.dp = static_cast<int>((dims + 15) / 16 * 16);
    l.row = l.dp + 8;
    l.q_off = 0;
    l.k_off = l.q_off + static_cast<size_t>(l.hp) * l.row * 2;
    l.w_off = l.k_off + static_cast<size_t>(kTileKeys) * l.row * 2;
    l.red_off = l.w_off + static_cast<size_t>(l.hp) * 4;
    l.loc_off = (l.red_off + 2 * kTileKeys * 4 + 7) / 8 * 8;
    l.bytes = l.loc_off + 2 * kTileKeys * 8;
    return l;
}

__device__ __forceinline__ uint32_t smem_address(const void* p) {
    return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}
__device__ __forceinline__ void ldmatrix_x4(uint32_t (&r)[4], const void* p) {
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(smem_address(p)));
}
template <bool kHalf>
__device__ __forceinline__ void mma_16816(float (&c)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1) {
    if constexpr (kHalf) {
        asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
                     "{%0, %1, %2, %3};\n"
                     : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
                     : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
    } else {
        asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
                     "{%0, %1, %2, %3};\n"
                     : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
                     : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
    }
}

// Two e4m3 values (the first in the low byte) as two f16 or bf16 values (the first in the low half): exact.
template <bool kHalf>
__device__ __forceinline__ uint32_t e4m3x2_to_operand(uint32_t pair) {
    const __half2_raw h = __nv_cvt_fp8x2_to_halfraw2(static_cast<__nv_fp8x2_storage_t>(pair), __NV_E4M3);
    if constexpr (kHalf) return static_cast<uint32_t>(h.x) | (static_cast<uint32_t>(h.y) << 16);
    const float2 f = __half22float2(__half2(h));
    const __nv_bfloat162 b = __float22bfloat162_rn(f);
    return static_cast<uint32_t>(__bfloat16_as_ushort(b.x)) | (static_cast<uint32_t>(__bfloat16_as_ushort(b.y)) << 16);
}
template <bool kHalf>
__device__ __forceinline__ uint16_t f32_to_operand(float v) {
    if constexpr (kHalf) return __half_as_ushort(__float2half_rn(v));
    return __bfloat16_as_ushort(__float2bfloat16_rn(v));
}

// The raw bytes of one load item: 8 key values (fp8: 8 bytes in x, y; bf16: 16 bytes).
struct Raw {
    uint32_t w[4];
};

// Item `it` of a tile covers key jl = it / chunks, values [8c, 8c + 8) with c = it % chunks.
template <bool kFp8Keys>
__device__ __forceinline__ Raw load_item(const ScoresArgs& a, int64_t loc, int c, bool vector_ok) {
    Raw r{{0u, 0u, 0u, 0u}};
    if (loc < 0) return r;  // no candidate, or a key that cannot be located: zeros (the score is not used)
    const uint8_t* p = a.keys.base + loc;
    const int64_t d0 = static_cast<int64_t>(c) * kChunk;
    if (vector_ok && d0 + kChunk <= a.head_dim) {
        if constexpr (kFp8Keys) {
            const uint2 v = __ldg(reinterpret_cast<const uint2*>(p + d0));
            r.w[0] = v.x;
            r.w[1] = v.y;
        } else {
            const uint4 v = __ldg(reinterpret_cast<const uint4*>(p + 2 * d0));
            r.w[0] = v.x, r.w[1] = v.y, r.w[2] = v.z, r.w[3] = v.w;
        }
        return r;
    }
    for (int i = 0; i < kChunk && d0 + i < a.head_dim; ++i) {
        if constexpr (kFp8Keys) {
            r.w[i / 4] |= static_cast<uint32_t>(p[d0 + i]) << (8 * (i % 4));
        } else {
            const uint16_t v = reinterpret_cast<const uint16_t*>(p)[d0 + i];
            r.w[i / 2] |= static_cast<uint32_t>(v) << (16 * (i % 2));
        }
    }
    return r;
}
// The item's 8 values as operands, one 16-byte shared store. Zero bytes are zero operands.
template <bool kHalf, bool kFp8Keys>
__device__ __forceinline__ void store_item(const Raw& r, uint16_t* dst) {
    uint4 v;
    if constexpr (kFp8Keys) {
        v.x = e4m3x2_to_operand<kHalf>(r.w[0] & 0xffffu);
        v.y = e4m3x2_to_operand<kHalf>(r.w[0] >> 16);
        v.z = e4m3x2_to_operand<kHalf>(r.w[1] & 0xffffu);
        v.w = e4m3x2_to_operand<kHalf>(r.w[1] >> 16);
    } else {
        v = make_uint4(r.w[0], r.w[1], r.w[2], r.w[3]);
    }
    *reinterpret_cast<uint4*>(dst) = v;
}

template <bool kHalf, bool kFp8Keys>
__global__ void __launch_bounds__(kThreads) indexer_scores_mma_kernel(ScoresArgs a, int64_t tiles_per_block, bool vector_ok) {
    extern __shared__ __align__(16) uint8_t smem[];
    const SmemLayout L = smem_layout(a.n_heads, a.head_dim);
    uint16_t* const q_s = reinterpret_cast<uint16_t*>(smem + L.q_off);
    uint16_t* const k_s = reinterpret_cast<uint16_t*>(smem + L.k_off);
    float* const w_s = reinterpret_cast<float*>(smem + L.w_off);
    float* const red = reinterpret_cast<float*>(smem + L.red_off);     // [2 head halves][kTileKeys]
    int64_t* const loc_s = reinterpret_cast<int64_t*>(smem + L.loc_off);  // [2 buffers][kTileKeys]

    const int tid = static_cast<int>(threadIdx.x), lane = tid % 32, warp = tid / 32;
    const int wm = warp / 4, wn = warp % 4, g = lane / 4, tq = lane % 4;
    const int chunks = L.dp / kChunk, items = kTileKeys * chunks / kThreads;  // dp ≤ 128: items ≤ kMaxItems
    const int64_t H = a.n_heads, D = a.head_dim;

    for (int64_t t = blockIdx.y; t < a.n_tokens; t += gridDim.y) {
        const int64_t n = min(max(static_cast<int64_t>(a.n_keys[t]), int64_t{0}), a.n_cols);
        const int64_t tiles = (n + kTileKeys - 1) / kTileKeys;
        const int64_t tile0 = static_cast<int64_t>(blockIdx.x) * tiles_per_block;
        const int64_t tile1 = min(tile0 + tiles_per_block, tiles);
        if (tile0 >= tile1) continue;  // uniform over the block
        __syncthreads();  // the previous token's readers of q_s, w_s, loc_s are done
        const int64_t req = a.token_request[t];
        const bool req_ok = req >= 0 && req < a.n_requests;  // inputs_ok: the host sends no other args here
        const int32_t* row = a.block_table + (req_ok ? req : 0) * a.block_table_stride;

        // q[t] as operands, zero heads and dims as padding; the head weights w[t, h] (0 for padding).
        const int64_t q_base = t * a.q_token_stride;
        for (int idx = tid; idx < L.hp * L.dp; idx += kThreads) {
            const int h = idx / L.dp, d = idx % L.dp;
            const float v = h < H && d < D ? indexer_q_value(a, q_base + h * a.q_head_stride + d) : 0.0f;
            q_s[h * L.row + d] = f32_to_operand<kHalf>(v);  // exact: v is an e4m3 or bf16 value (or 0)
        }
        for (int h = tid; h < L.hp; h += kThreads) w_s[h] = h < H ? indexer_head_weight(a, t, h) : 0.0f;
        for (int jl = tid; jl < kTileKeys; jl += kThreads)
            loc_s[jl] = indexer_key_location(a, row, req_ok, tile0 * kTileKeys + jl, n);
        __syncthreads();

        Raw raw[kMaxItems] = {};
#pragma unroll
        for (int i = 0; i < kMaxItems; ++i) {
            const int it = tid + i * kThreads;
            if (i < items) raw[i] = load_item<kFp8Keys>(a, loc_s[it / chunks], it % chunks, vector_ok);
        }
        for (int64_t tile = tile0; tile < tile1; ++tile) {
            const int buf = static_cast<int>((tile - tile0) & 1);
            const int64_t* const loc = loc_s + buf * kTileKeys;
#pragma unroll
            for (int i = 0; i < kMaxItems; ++i) {
                const int it = tid + i * kThreads;
                if (i < items) store_item<kHalf, kFp8Keys>(raw[i], k_s + (it / chunks) * L.row + (it % chunks) * kChunk);
            }
            const bool next = tile + 1 < tile1;
            if (next)
                for (int jl = tid; jl < kTileKeys; jl += kThreads)
                    loc_s[(buf ^ 1) * kTileKeys + jl] = indexer_key_location(a, row, req_ok, (tile + 1) * kTileKeys + jl, n);
            __syncthreads();
            if (next) {  // the next tile's bytes travel while this tile is multiplied
                const int64_t* const nloc = loc_s + (buf ^ 1) * kTileKeys;
#pragma unroll
                for (int i = 0; i < kMaxItems; ++i) {
                    const int it = tid + i * kThreads;
                    if (i < items) raw[i] = load_item<kFp8Keys>(a, nloc[it / chunks], it % chunks, vector_ok);
                }
            }

            // part[nt][c]: Σ over this lane's heads of w_h·ReLU(d) for key 32·wn + 8·nt + 2·tq + c.
            float part[4][2] = {};
            for (int hg = wm; hg < L.hp / kWarpHeads; hg += 2) {
                const int hb = hg * kWarpHeads;
                float acc[2][4][4] = {};
                for (int k0 = 0; k0 < L.dp; k0 += 16) {
                    uint32_t af[2][4], bf[4][2];
#pragma unroll
                    for (int mt = 0; mt < 2; ++mt)
                        ldmatrix_x4(af[mt], q_s + (hb + mt * 16 + (lane & 15)) * L.row + k0 + (lane >> 4) * 8);
#pragma unroll
                    for (int np = 0; np < 2; ++np) {
                        uint32_t r[4];
                        ldmatrix_x4(r, k_s + (wn * 32 + np * 16 + (lane >> 4) * 8 + (lane & 7)) * L.row + k0 +
                                           ((lane >> 3) & 1) * 8);
                        bf[2 * np][0] = r[0], bf[2 * np][1] = r[1], bf[2 * np + 1][0] = r[2], bf[2 * np + 1][1] = r[3];
                    }
#pragma unroll
                    for (int mt = 0; mt < 2; ++mt)
#pragma unroll
                        for (int nt = 0; nt < 4; ++nt) mma_16816<kHalf>(acc[mt][nt], af[mt], bf[nt][0], bf[nt][1]);
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
                    for (int c = 0; c < 2; ++c) red[wm * kTileKeys + wn * 32 + nt * 8 + 2 * tq + c] = part[nt][c];
            __syncthreads();
            float* const out_row = a.out + t * a.out_row_stride;
            for (int jl = tid; jl < kTileKeys; jl += kThreads) {
                const int64_t l = loc[jl];
                if (l == kNoCandidate) continue;  // columns j ≥ n_keys[t] are not written
                const int64_t j = tile * kTileKeys + jl;
                float v = __uint_as_float(0x7fc00000u);  // kUnlocatable: NaN
                if (l >= 0) v = __fmul_rn(indexer_key_scale_of(a, row, j), __fadd_rn(red[jl], red[kTileKeys + jl]));
                out_row[j] = v;
            }
            __syncthreads();  // red, k_s and this loc buffer are written again by the next tile
        }
    }
}

template <bool kHalf, bool kFp8Keys>
Status launch(const ScoresArgs& a, cudaStream_t stream) {
    const SmemLayout L = smem_layout(a.n_heads, a.head_dim);
    // The largest layout this kernel takes (kMaxHeads, kMaxDims), allowed once per instantiation.
    static const cudaError_t attribute = cudaFuncSetAttribute(indexer_scores_mma_kernel<kHalf, kFp8Keys>,
                                                              cudaFuncAttributeMaxDynamicSharedMemorySize,
                                                              static_cast<int>(smem_layout(kMaxHeads, kMaxDims).bytes));
    SIEVE_RETURN_IF_ERROR(cuda_status(attribute, "indexer_scores: shared memory of the tensor-core kernel"));
    const int64_t tiles = (a.n_cols + kTileKeys - 1) / kTileKeys;
    const int64_t grid_y = std::min(a.n_tokens, kMaxGridY);
    const int64_t blocks_x = std::clamp<int64_t>((kTargetBlocks + grid_y - 1) / grid_y, 1, tiles);
    const int64_t tiles_per_block = (tiles + blocks_x - 1) / blocks_x;
    const int64_t grid_x = (tiles + tiles_per_block - 1) / tiles_per_block;
    // 16-byte loads of key values: whole 8-value chunks at 8- (fp8) or 16-byte (bf16) aligned addresses.
    const int64_t chunk_bytes = kFp8Keys ? kChunk : 2 * kChunk;
    const bool vector_ok = a.head_dim % kChunk == 0 && reinterpret_cast<uintptr_t>(a.keys.base) % 16 == 0 &&
                           a.keys.block_bytes % chunk_bytes == 0 && a.keys.data_bytes % chunk_bytes == 0;
    indexer_scores_mma_kernel<kHalf, kFp8Keys><<<dim3(static_cast<unsigned>(grid_x), static_cast<unsigned>(grid_y)), kThreads,
                                                 L.bytes, stream>>>(a, tiles_per_block, vector_ok);
    return cuda_status(cudaGetLastError(), "indexer_scores launch (tensor cores)");
}

}  // namespace

bool indexer_scores_mma_supported(const ScoresArgs& a) {
    const bool q_ok = a.q_format == kIndexerQBf16 || a.q_format == kIndexerQE4m3;
    const bool keys_ok = a.keys.format == kIndexerKeyBf16 || a.keys.format == kIndexerKeyFp8RowScale;
    return a.inputs_ok && q_ok && keys_ok && a.n_heads >= 1 && a.n_heads <= kMaxHeads && a.head_dim >= 1 &&
           a.head_dim <= kMaxDims;
}

Status launch_indexer_scores_mma(const ScoresArgs& a, cudaStream_t stream) {
    if (a.keys.format == kIndexerKeyBf16) return launch<false, false>(a, stream);
    if (a.q_format == kIndexerQE4m3) return launch<true, true>(a, stream);
    return launch<false, true>(a, stream);
}

}  // namespace sieve::cuda
