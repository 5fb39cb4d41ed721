// RoPE, FP8 quantisation and the Hadamard transform (ops/rope.h, ops/quant_fp8.h, ops/hadamard.h): bit for bit the ref backend's results, as those contracts promise.
//
// Every product and sum below that reaches an output is an explicit __fmul_rn / __fadd_rn / __fsub_rn:
// nvcc contracts a·b ± c into an FMA by default (-fmad=true), which would change the bits ref produces.
// Loads and stores go through dtype_access.cuh (ref's load()/store(), NaN included). No launcher allocates,
// synchronises or copies: each enqueues one kernel on `stream`.
//
// Indices: none of these ops reads an index array that addresses memory. RoPE's positions only feed the
// angle (any int value is a position, ops/rope.h check_indices), so no device value can send a kernel out
// of the views that validate() checked.
#include "backends/cuda/row_kernels.h"
#include "backends/cuda/cuda_status.h"
#include "backends/cuda/dependent_launch.cuh"
#include "backends/cuda/fp8.cuh"
#include "backends/cuda/dtype_access.cuh"
#include "backends/cuda/row_rope.cuh"

#include <algorithm>

namespace sieve::cuda {
namespace {

constexpr int64_t kMaxGridX = 0x7fffffff;  // gridDim.x limit (2^31 − 1)
constexpr int64_t kMaxGridY = 65535;       // gridDim.y limit
constexpr unsigned kFullMask = 0xffffffffu;

int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

// ---- rope ------------------------------------------------------------------------------------------
// One block per (token, group of up to kRopeHeadsPerBlock heads), fewer heads a block while the grid would
// not fill the GPU (a decode step's few tokens: rope_heads_per_block). The block computes c/s of its token
// chunk by chunk (kRopeChunk pairs at a time, any rot_dim) into shared memory, once for all its heads, then
// each thread rotates kRopeBatch (head, pair)s at a time: consecutive threads take consecutive pairs of a
// head, so that a warp's loads cover a contiguous span of the slice, and a thread issues all its loads of a
// batch before its first store (the compiler may not move a load of x above a store to y: they may alias).
// Dims outside the slice are copied first, in batches the same way (not when in place: validate() makes
// y == x the same view, so they are already there), 4 elements a load and a store (16 or 8 bytes) where
// every head's copied runs, strides and both bases allow (rope_copy_unit): enough bytes in flight to keep
// the memory busy when most of a head is copied (DeepSeek-V4's q: 448 of 512 dims). Each thread writes
// exactly the elements it read, so in place needs no barrier.

constexpr int kRopeChunk = 128;        // pairs per c/s chunk = the largest block
constexpr int kRopeHeadsPerBlock = 8;  // heads sharing one token's c/s, at most
constexpr int kRopeBatch = 4;          // elements (copy) or pairs (rotation) a thread loads before storing
constexpr int64_t kRopeTargetBlocks = 2 * 132;  // two blocks a multiprocessor of an H100 / H200 SXM

// kUnit consecutive elements of an activation row at element offset i (kUnit = 4: the access is aligned).
template <int kUnit>
__device__ __forceinline__ void load_act_unit(const void* base, bool bf16, int64_t i, float (&v)[kUnit]) {
    if constexpr (kUnit == 4) {
        if (bf16) {
            const uint2 r = *reinterpret_cast<const uint2*>(static_cast<const uint16_t*>(base) + i);
            v[0] = __uint_as_float(r.x << 16), v[1] = __uint_as_float(r.x & 0xffff0000u);
            v[2] = __uint_as_float(r.y << 16), v[3] = __uint_as_float(r.y & 0xffff0000u);
        } else {
            const float4 r = *reinterpret_cast<const float4*>(static_cast<const float*>(base) + i);
            v[0] = r.x, v[1] = r.y, v[2] = r.z, v[3] = r.w;
        }
    } else {
        v[0] = load_act(base, bf16, i);
    }
}
template <int kUnit>
__device__ __forceinline__ void store_act_unit(void* base, bool bf16, int64_t i, const float (&v)[kUnit]) {
    if constexpr (kUnit == 4) {
        if (bf16) {
            const uint2 r = make_uint2(f32_to_bf16_bits(v[0]) | static_cast<uint32_t>(f32_to_bf16_bits(v[1])) << 16,
                                       f32_to_bf16_bits(v[2]) | static_cast<uint32_t>(f32_to_bf16_bits(v[3])) << 16);
            *reinterpret_cast<uint2*>(static_cast<uint16_t*>(base) + i) = r;
        } else {
            *reinterpret_cast<float4*>(static_cast<float*>(base) + i) = make_float4(v[0], v[1], v[2], v[3]);
        }
    } else {
        store_act(base, bf16, i, v[0]);
    }
}

// The copy of the block's dims outside the slice, kUnit elements at a time: unit k is head k / per_head, its
// (k % per_head)-th run of kUnit dims outside the slice (32-bit: the launch keeps heads_per_block · head_dim
// below 2^31; a run never straddles the slice, rope_copy_unit).
template <int kUnit>
__device__ __forceinline__ void rope_copy_outside(const RopeParams& p, int64_t xt, int64_t yt, int nh) {
    const bool xb = p.x_type == DType::bf16, yb = p.y_type == DType::bf16;
    const int rot = static_cast<int>(p.rot_dim);
    const int first_rotated = static_cast<int>(p.slice == RopeSlice::first ? 0 : p.head_dim - p.rot_dim);
    const int per_head = static_cast<int>(p.head_dim - p.rot_dim) / kUnit, total = nh * per_head, step = static_cast<int>(blockDim.x);
    for (int k0 = threadIdx.x; k0 < total; k0 += kRopeBatch * step) {
        float v[kRopeBatch][kUnit];
        int64_t yo[kRopeBatch];
#pragma unroll
        for (int j = 0; j < kRopeBatch; ++j) {
            const int k = k0 + j * step, hh = k / per_head, i = (k % per_head) * kUnit;
            const int d = i < first_rotated ? i : i + rot;
            yo[j] = yt + hh * p.y_head_stride + d;
            if (k < total) load_act_unit<kUnit>(p.x, xb, xt + hh * p.x_head_stride + d, v[j]);
        }
#pragma unroll
        for (int j = 0; j < kRopeBatch; ++j)
            if (k0 + j * step < total) store_act_unit<kUnit>(p.y, yb, yo[j], v[j]);
    }
}

__global__ void __launch_bounds__(kRopeChunk) rope_kernel(RopeParams p, int heads_per_block, int copy_unit) {
    wait_for_previous_kernel();
    __shared__ float cos_s[kRopeChunk], sin_s[kRopeChunk];
    const int64_t t = blockIdx.x;
    const int64_t h0 = static_cast<int64_t>(blockIdx.y) * heads_per_block;
    const int nh = static_cast<int>(p.n_heads - h0 < heads_per_block ? p.n_heads - h0 : heads_per_block);
    const bool xb = p.x_type == DType::bf16, yb = p.y_type == DType::bf16;
    const bool interleaved = p.pairing == RopePairing::interleaved;
    const int64_t half = p.rot_dim / 2;
    const int64_t start = p.slice == RopeSlice::first ? 0 : p.head_dim - p.rot_dim;
    const int64_t pos = p.positions_type == DType::i64 ? static_cast<const int64_t*>(p.positions)[t]
                                                       : static_cast<const int32_t*>(p.positions)[t];
    const int64_t xt = t * p.x_token_stride + h0 * p.x_head_stride;
    const int64_t yt = t * p.y_token_stride + h0 * p.y_head_stride;
    const int step = static_cast<int>(blockDim.x);

    if (p.x != p.y) {  // dims outside the slice are copied (ops/rope.h); cast once to y_type
        if (copy_unit == 4)
            rope_copy_outside<4>(p, xt, yt, nh);
        else
            rope_copy_outside<1>(p, xt, yt, nh);
    }

    for (int64_t c0 = 0; c0 < half; c0 += kRopeChunk) {
        const int nc = static_cast<int>(half - c0 < kRopeChunk ? half - c0 : kRopeChunk);
        for (int i = threadIdx.x; i < nc; i += step)
            rope_cos_sin_one(pos, p.inv_freq[c0 + i], p.attention_factor, cos_s[i], sin_s[i]);
        __syncthreads();
        // Pair k of the chunk: head k / nc, pair c0 + k % nc. interleaved (GPT-J): (x[n+2i], x[n+2i+1]);
        // half_split (NeoX): (x[n+i], x[n+i+r/2])  (ops/rope.h).
        auto first = [&](int k) {
            const int64_t pair = c0 + k % nc;
            return start + (interleaved ? 2 * pair : pair);
        };
        auto second = [&](int k) {
            const int64_t pair = c0 + k % nc;
            return start + (interleaved ? 2 * pair + 1 : pair + half);
        };
        const int total = nh * nc;
        for (int k0 = threadIdx.x; k0 < total; k0 += kRopeBatch * step) {
            float x0[kRopeBatch], x1[kRopeBatch];
#pragma unroll
            for (int j = 0; j < kRopeBatch; ++j) {
                const int k = k0 + j * step;
                if (k >= total) continue;
                const int64_t xo = xt + (k / nc) * p.x_head_stride;
                x0[j] = load_act(p.x, xb, xo + first(k));
                x1[j] = load_act(p.x, xb, xo + second(k));
            }
#pragma unroll
            for (int j = 0; j < kRopeBatch; ++j) {
                const int k = k0 + j * step;
                if (k >= total) continue;
                const float c = cos_s[k % nc], s = sin_s[k % nc];
                float y0, y1;
                if (p.inverse) {  // y0 = x0·c + x1·s ; y1 = x1·c − x0·s   (conjugate rotation, deepseek_v4.md §2.3)
                    y0 = __fadd_rn(__fmul_rn(x0[j], c), __fmul_rn(x1[j], s));
                    y1 = __fsub_rn(__fmul_rn(x1[j], c), __fmul_rn(x0[j], s));
                } else {  // y0 = x0·c − x1·s ; y1 = x0·s + x1·c   (each product rounded, then the sum: no FMA)
                    y0 = __fsub_rn(__fmul_rn(x0[j], c), __fmul_rn(x1[j], s));
                    y1 = __fadd_rn(__fmul_rn(x0[j], s), __fmul_rn(x1[j], c));
                }
                const int64_t yo = yt + (k / nc) * p.y_head_stride;
                store_act(p.y, yb, yo + first(k), y0);
                store_act(p.y, yb, yo + second(k), y1);
            }
        }
        __syncthreads();  // cos_s / sin_s are refilled by the next chunk
    }
}

// 4 when every run of 4 copied dims is 4 aligned elements of x and of y (the bases, every stride and both
// ends of the slice multiples of 4 elements, the bases aligned to 4 of theirs), else 1.
int rope_copy_unit(const RopeParams& p) {
    const auto aligned = [](const void* base, DType t) {
        return reinterpret_cast<uintptr_t>(base) % (4 * (t == DType::bf16 ? 2u : 4u)) == 0;
    };
    const int64_t start = p.slice == RopeSlice::first ? 0 : p.head_dim - p.rot_dim;
    const bool fours = p.head_dim % 4 == 0 && p.rot_dim % 4 == 0 && start % 4 == 0 && p.x_token_stride % 4 == 0 &&
                       p.y_token_stride % 4 == 0 && p.x_head_stride % 4 == 0 && p.y_head_stride % 4 == 0;
    return fours && aligned(p.x, p.x_type) && aligned(p.y, p.y_type) ? 4 : 1;
}

// Heads a block: kRopeHeadsPerBlock, halved while the grid has fewer than kRopeTargetBlocks blocks (a decode
// step of 64 tokens rotating 8 heads: 256 blocks of 2 heads, not 64 of 8, whose threads each wait on many
// round trips in turn).
int rope_heads_per_block(int64_t n_tokens, int64_t n_heads) {
    int h = kRopeHeadsPerBlock;
    while (h > 1 && n_tokens * ceil_div(n_heads, h) < kRopeTargetBlocks) h /= 2;
    return h;
}

// ---- quant_fp8 --------------------------------------------------------------------------------------
// One team of W lanes per group, W = the power of two ≥ group_size, at most a warp; a block of
// kQuantThreads holds kQuantThreads / W teams (so groups of 1, 3 or 16 values do not leave most of a warp
// idle). Teams of a warp are aligned to W lanes, so the xor shuffles of the amax reduction stay inside a
// team. The group is read twice (amax, then codes), from L1/L2 the second time; each lane writes only the
// elements it read, after the whole team's amax is known, so in-place dequant (dequant == x) is safe.
// amax: max of |x| through the integer order of the bits (finite |x| order like their bit patterns; any
// NaN or infinity gives bits ≥ 0x7F800000, the poisoned case of ops/quant_fp8.h). max is exact, so the
// order of the reduction does not matter: the bytes are ref's.

constexpr int kQuantThreads = 256;

__global__ void __launch_bounds__(kQuantThreads) quant_fp8_kernel(QuantFp8Params p, int team, int64_t n_teams) {
    wait_for_previous_kernel();
    const int lane = static_cast<int>(threadIdx.x) & (team - 1);
    const int64_t team_id = static_cast<int64_t>(blockIdx.x) * (kQuantThreads / team) + threadIdx.x / team;
    const bool active = team_id < n_teams;
    const int64_t n_groups = p.dim / p.group_size;
    const int64_t row = active ? team_id / n_groups : 0, g = active ? team_id % n_groups : 0;
    const int64_t t = row / p.n_heads, h = row % p.n_heads;
    const int64_t g0 = g * p.group_size;
    const bool xb = p.x_type == DType::bf16, db = p.dequant_type == DType::bf16;
    const int64_t xo = t * p.x_token_stride + h * p.x_head_stride + g0;

    uint32_t amax_bits = 0;
    if (active)
        for (int64_t j = lane; j < p.group_size; j += team)
            amax_bits = max(amax_bits, __float_as_uint(load_act(p.x, xb, xo + j)) & 0x7fffffffu);
    for (int o = team / 2; o > 0; o /= 2)  // every lane of the warp takes part, inactive teams included
        amax_bits = max(amax_bits, __shfl_xor_sync(kFullMask, amax_bits, o));
    if (!active) return;

    const int64_t so = t * p.scale_token_stride + h * p.scale_head_stride + g;
    uint8_t* q = p.q ? p.q + t * p.q_token_stride + h * p.q_head_stride + g0 : nullptr;
    const int64_t dqo = t * p.dequant_token_stride + h * p.dequant_head_stride + g0;

    if (amax_bits >= 0x7f800000u) {  // a NaN or an infinity: the group is poisoned (ops/quant_fp8.h)
        const float nan = __uint_as_float(0x7fc00000u);  // ref's quiet_NaN (bf16: 0x7FC0)
        if (lane == 0) {
            if (p.scale_ue8m0) p.scale_ue8m0[so] = 0xff;
            if (p.scale_f32) p.scale_f32[so] = nan;
        }
        for (int64_t j = lane; j < p.group_size; j += team) {
            if (q) q[j] = static_cast<uint8_t>(0x7fu | ((__float_as_uint(load_act(p.x, xb, xo + j)) >> 24) & 0x80u));
            if (p.dequant) store_act(p.dequant, db, dqo + j, nan);
        }
        return;
    }
    // s = 2^ceil(log2(max(amax, 1e-4) · (1/448))) (core ue8m0_scale_for_amax; deepseek_v4.md §2.4). amax ≤
    // FLT_MAX bounds the exponent to [−22, 120], so s and 1/s are normal powers of two built from their bits.
    const uint8_t sb = ue8m0_byte_for_amax(__uint_as_float(amax_bits));
    const float s = __uint_as_float(static_cast<uint32_t>(sb) << 23);
    const float inv_s = __uint_as_float(static_cast<uint32_t>(254 - sb) << 23);
    if (lane == 0) {
        if (p.scale_ue8m0) p.scale_ue8m0[so] = sb;  // = log2(s) + 127, ref's ue8m0_from_pow2(s)
        if (p.scale_f32) p.scale_f32[so] = s;
    }
    for (int64_t j = lane; j < p.group_size; j += team) {
        // x·(1/s) is ref's x / s: both are the correctly rounded x·2^-e (1/s is exact), subnormals included
        // (no -ftz in this build). The clamp to ±448 is ref's; f32_to_e4m3 saturates there anyway.
        const float v = fmaxf(fminf(__fmul_rn(load_act(p.x, xb, xo + j), inv_s), kFp8E4m3Max), -kFp8E4m3Max);
        const uint8_t code = f32_to_e4m3(v);
        if (q) q[j] = code;
        if (p.dequant) store_act(p.dequant, db, dqo + j, __fmul_rn(e4m3_to_f32(code), s));  // exact in f32 and bf16
    }
}

// ---- hadamard ---------------------------------------------------------------------------------------
// The butterfly of level h maps (v[j], v[j+h]), (j & h) == 0, to (v[j] + v[j+h], v[j] − v[j+h]), levels in
// the order h = 1, 2, 4, … (ops/hadamard.h). Which thread computes a butterfly does not change its bits,
// only the level order and the operand roles do, so any data layout that keeps both gives ref's bytes.
// With element i = k·T + l held by thread l of a T-thread team as v[k]:
//   levels h < T act on thread bits: the partner is thread l ^ h (a shuffle); the lower thread keeps
//     v + w, the upper one w − v (w: the partner's value, so it is again lower − upper);
//   levels h ≥ T act on register bits: v[k], v[k + h/T] inside one thread.
// Loads and stores of a k are T consecutive elements: coalesced.

// One butterfly level across the lanes of a team (h < team ≤ 32; the teams are h-aligned in the warp).
__device__ __forceinline__ float butterfly_lanes(float v, int lane, int h) {
    const float w = __shfl_xor_sync(kFullMask, v, h);
    return (lane & h) ? __fsub_rn(w, v) : __fadd_rn(v, w);
}

// The register levels h = T, 2T, …: between v[k] and v[k + hk], hk = h / T, in increasing hk.
template <int E>
__device__ __forceinline__ void butterfly_registers(float (&v)[E]) {
#pragma unroll
    for (int hk = 1; hk < E; hk *= 2) {
#pragma unroll
        for (int k = 0; k < E; ++k) {
            if (k & hk) continue;
            const float a = v[k], b = v[k + hk];
            v[k] = __fadd_rn(a, b);
            v[k + hk] = __fsub_rn(a, b);
        }
    }
}

// dim ≤ 1024: one team of T = min(dim, 32) lanes per row, E = dim / T values per lane, in registers;
// kHadamardThreads / T rows per block. Levels h < T: shuffles; h ≥ T: registers.
constexpr int kHadamardThreads = 256;

template <int E>
__global__ void __launch_bounds__(kHadamardThreads) hadamard_team_kernel(HadamardParams p, int team, int64_t rows) {
    wait_for_previous_kernel();
    const int lane = static_cast<int>(threadIdx.x) & (team - 1);
    const int64_t row = static_cast<int64_t>(blockIdx.x) * (kHadamardThreads / team) + threadIdx.x / team;
    const bool active = row < rows;  // inactive teams still shuffle (full-warp masks), with zeros
    const int64_t t = active ? row / p.n_heads : 0, hd = active ? row % p.n_heads : 0;
    const bool xb = p.x_type == DType::bf16, yb = p.y_type == DType::bf16;
    const int64_t xo = t * p.x_token_stride + hd * p.x_head_stride + lane;
    float v[E];
#pragma unroll
    for (int k = 0; k < E; ++k) v[k] = active ? load_act(p.x, xb, xo + static_cast<int64_t>(k) * team) : 0.0f;
    for (int h = 1; h < team; h *= 2) {
#pragma unroll
        for (int k = 0; k < E; ++k) v[k] = butterfly_lanes(v[k], lane, h);
    }
    butterfly_registers<E>(v);
    if (!active) return;
    const int64_t yo = t * p.y_token_stride + hd * p.y_head_stride + lane;
#pragma unroll
    for (int k = 0; k < E; ++k) store_act(p.y, yb, yo + static_cast<int64_t>(k) * team, __fmul_rn(v[k], p.scale));
}

// dim ≥ 2048: one block of 1024 threads per row, E = dim / 1024 values per thread, i = k·1024 + w·32 + l
// (warp w, lane l). Levels h = 1 … 16 (lane bits): shuffles. Levels h = 32 … 512 are warp bits: the row
// goes through shared memory (dim·4 bytes ≤ 64 KiB) and comes back transposed, thread (w, l) holding
// i = k·1024 + l·32 + w, so that they are lane bits again (shuffles of h / 32). Levels h ≥ 1024: registers.
// The scaled row goes back to shared memory and out in the first layout (coalesced stores). Shared index
// i ^ ((i >> 5) & 31) (an xor swizzle of the low 5 bits by the next 5): both layouts then hit 32 distinct
// banks per warp access. In place is safe: every load of x precedes the first barrier, every store of y
// follows it.
constexpr int kHadamardBlockThreads = 1024;
constexpr int64_t kHadamardTeamMaxDim = 1024;  // the largest dim of hadamard_team_kernel (E = 32)

__device__ __forceinline__ int hadamard_swizzle(int i) { return i ^ ((i >> 5) & 31); }

template <int E>
__global__ void __launch_bounds__(kHadamardBlockThreads) hadamard_block_kernel(HadamardParams p) {
    wait_for_previous_kernel();
    extern __shared__ float row_s[];  // [dim], swizzled
    const int64_t row = blockIdx.x;
    const int64_t t = row / p.n_heads, hd = row % p.n_heads;
    const int tid = static_cast<int>(threadIdx.x), lane = tid & 31, warp = tid >> 5;
    const bool xb = p.x_type == DType::bf16, yb = p.y_type == DType::bf16;
    const int64_t xo = t * p.x_token_stride + hd * p.x_head_stride;
    const int64_t yo = t * p.y_token_stride + hd * p.y_head_stride;
    float v[E];
#pragma unroll
    for (int k = 0; k < E; ++k) v[k] = load_act(p.x, xb, xo + k * kHadamardBlockThreads + tid);
    for (int h = 1; h < 32; h *= 2) {  // levels 1 … 16
#pragma unroll
        for (int k = 0; k < E; ++k) v[k] = butterfly_lanes(v[k], lane, h);
    }
#pragma unroll
    for (int k = 0; k < E; ++k) row_s[hadamard_swizzle(k * kHadamardBlockThreads + tid)] = v[k];
    __syncthreads();
    const int tr = lane * 32 + warp;  // the transposed position of this thread
#pragma unroll
    for (int k = 0; k < E; ++k) v[k] = row_s[hadamard_swizzle(k * kHadamardBlockThreads + tr)];
    for (int h = 1; h < 32; h *= 2) {  // levels 32 … 512: the partner of i ^ (32·h) is lane ^ h
#pragma unroll
        for (int k = 0; k < E; ++k) v[k] = butterfly_lanes(v[k], lane, h);
    }
    butterfly_registers<E>(v);  // levels 1024 … dim/2
    // Each thread overwrites the very elements it read: no barrier needed before these stores.
#pragma unroll
    for (int k = 0; k < E; ++k) row_s[hadamard_swizzle(k * kHadamardBlockThreads + tr)] = __fmul_rn(v[k], p.scale);
    __syncthreads();
#pragma unroll
    for (int k = 0; k < E; ++k) {
        const int i = k * kHadamardBlockThreads + tid;
        store_act(p.y, yb, yo + i, row_s[hadamard_swizzle(i)]);
    }
}

template <int E>
Status launch_hadamard_team(const HadamardParams& p, int64_t rows, cudaStream_t stream) {
    const int team = static_cast<int>(p.dim / E);  // E = 1: team = dim ≤ 32; else 32
    const int64_t blocks = ceil_div(rows, kHadamardThreads / team);
    if (blocks > kMaxGridX) return unsupported_error("cuda: hadamard over {} rows of dim {} (grid of {} blocks)", rows, p.dim, blocks);
    launch_after_previous(hadamard_team_kernel<E>, static_cast<unsigned>(blocks), kHadamardThreads, 0, stream, p, team,
                          rows);
    return cuda_status(cudaGetLastError(), "hadamard launch");
}

template <int E>
Status launch_hadamard_block(const HadamardParams& p, int64_t rows, cudaStream_t stream) {
    if (rows > kMaxGridX) return unsupported_error("cuda: hadamard over {} rows of dim {} (at most 2^31 − 1)", rows, p.dim);
    const size_t smem = static_cast<size_t>(p.dim) * sizeof(float);
    if (smem > 48 * 1024) {  // above the default dynamic shared memory limit: opt in (not a stream operation)
        SIEVE_CUDA_RETURN_IF_ERROR(cudaFuncSetAttribute(hadamard_block_kernel<E>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                                        static_cast<int>(smem)),
                                   "hadamard shared memory attribute");
    }
    launch_after_previous(hadamard_block_kernel<E>, static_cast<unsigned>(rows), kHadamardBlockThreads, smem, stream,
                          p);
    return cuda_status(cudaGetLastError(), "hadamard launch");
}

}  // namespace

Status rope(const RopeParams& p, cudaStream_t stream) {
    if (p.n_tokens == 0 || p.n_heads == 0) return Status::ok();
    const int heads_per_block = rope_heads_per_block(p.n_tokens, p.n_heads);
    const int64_t head_groups = ceil_div(p.n_heads, heads_per_block);
    if (p.head_dim > INT32_MAX / kRopeHeadsPerBlock)  // rope_kernel's 32-bit offsets within a block
        return unsupported_error("cuda: rope over heads of {} dims (at most 2^31 / {})", p.head_dim, kRopeHeadsPerBlock);
    if (p.n_tokens > kMaxGridX || head_groups > kMaxGridY)
        return unsupported_error("cuda: rope over {} tokens × {} heads (at most 2^31 − 1 tokens and {} heads)", p.n_tokens,
                                 p.n_heads, kMaxGridY * heads_per_block);
    // Threads: enough for one chunk of pairs of every head of a block, or for one batch of the copy of its
    // dims outside the slice, in whole warps, at most kRopeChunk.
    const int copy_unit = rope_copy_unit(p);
    const int64_t half = p.rot_dim / 2, heads = std::min<int64_t>(p.n_heads, heads_per_block);
    const int64_t work = std::max(heads * std::min<int64_t>(half, kRopeChunk),
                                  p.x != p.y ? ceil_div(heads * (p.head_dim - p.rot_dim) / copy_unit, kRopeBatch) : 0);
    const int threads = static_cast<int>(work >= kRopeChunk ? kRopeChunk : ceil_div(work, 32) * 32);
    const dim3 grid(static_cast<unsigned>(p.n_tokens), static_cast<unsigned>(head_groups));
    launch_after_previous(rope_kernel, grid, threads, 0, stream, p, heads_per_block, copy_unit);
    return cuda_status(cudaGetLastError(), "rope launch");
}

Status quant_fp8(const QuantFp8Params& p, cudaStream_t stream) {
    const int64_t n_teams = p.n_tokens * p.n_heads * (p.dim / p.group_size);  // one team per group
    if (n_teams == 0) return Status::ok();
    int team = 1;
    while (team < 32 && team < p.group_size) team *= 2;
    const int64_t blocks = ceil_div(n_teams, kQuantThreads / team);
    if (blocks > kMaxGridX)
        return unsupported_error("cuda: quant_fp8 over {} groups of {} (grid of {} blocks, at most 2^31 − 1)", n_teams,
                                 p.group_size, blocks);
    launch_after_previous(quant_fp8_kernel, static_cast<unsigned>(blocks), kQuantThreads, 0, stream, p, team, n_teams);
    return cuda_status(cudaGetLastError(), "quant_fp8 launch");
}

Status hadamard(const HadamardParams& p, cudaStream_t stream) {
    const int64_t rows = p.n_tokens * p.n_heads;
    if (rows == 0) return Status::ok();
    static_assert(kHadamardMaxDim == 16384 && kHadamardTeamMaxDim == 1024, "hadamard: the dispatch covers every dim");
    switch (p.dim) {  // a power of two in [1, kHadamardMaxDim] (validate)
        case 1: case 2: case 4: case 8: case 16: case 32: return launch_hadamard_team<1>(p, rows, stream);
        case 64: return launch_hadamard_team<2>(p, rows, stream);
        case 128: return launch_hadamard_team<4>(p, rows, stream);
        case 256: return launch_hadamard_team<8>(p, rows, stream);
        case 512: return launch_hadamard_team<16>(p, rows, stream);
        case 1024: return launch_hadamard_team<32>(p, rows, stream);
        case 2048: return launch_hadamard_block<2>(p, rows, stream);
        case 4096: return launch_hadamard_block<4>(p, rows, stream);
        case 8192: return launch_hadamard_block<8>(p, rows, stream);
        case 16384: return launch_hadamard_block<16>(p, rows, stream);
        default: break;
    }
    return unsupported_error("cuda: hadamard dim {} is not a power of two in [1, {}]", p.dim, kHadamardMaxDim);
}

}  // namespace sieve::cuda
