// The cache writes and reads (ops/cache_store.h, ops/kv_load.h) and DeepSeek-V4's compressor (ops/compressor.h), over paged caches of every record format (ops/cache_record.h).
//
// Design: one thread block per row (a cache entry written or read, a compressor state row), except
// compressor_pool (one block per entry and chunk of 128 channels, one thread per channel). The record
// layout numbers are computed on the host (cache_record.cuh RecordGeometry) and the entry-part addresses
// mirror ops/cache_record.h. In the fp8 formats one warp owns one scale group (≤ 128 values: 64 for
// fp8_model1, min(128, R) for fp8_v32, dim ≤ 128 for fp8_row_scale), holds its ≤ 4 values per lane in
// registers, reduces the group's |v| maximum with one warp reduction and writes the codes and the scale.
//
// Numerics: cache_store and kv_load are bit-exact (no reduction: the amax is a max, the quantization
// divides by a power of two with IEEE division, the dequantization is one fp32 product, bf16 rounding is
// core/dtype.h's rule written on the bits); the one exception is the payload of a NaN that kv_load
// computes (a NaN code or scale times the other factor: the GPU's canonical NaN, the host's operand NaN). compressor_state_store is exact (one fp32 add per value).
// compressor_pool is fp32 as the contract allows (ref: double): the two passes of the cpu backend (max,
// then Σ e^(b − max)·a and Σ e^(b − max)), expf (≤ 2 ulp) and the rows in position order.
//
// Index arrays live on the device and are not range-checked by the backend (check_indices cannot run):
// every kernel keeps memory safe by itself. cache_store skips a slot outside [0, n_slots) like −1;
// kv_load gives a row of zeros for any slot < 0 (−1 per contract; below −1 invalid) and cannot bound a
// slot from above (KvLoadParams carries no n_slots); compressor_state_store skips a slot < 0 and a
// position < 0 (its ape row would lie before ape), and cannot bound a slot from above either;
// compressor_pool skips every gather slot < 0 and cannot bound one from above.
#include <algorithm>
#include <cstdint>

#include "backends/cuda/cache_kernels.h"
#include "backends/cuda/cache_record.cuh"
#include "backends/cuda/cuda_status.h"
#include "backends/cuda/dependent_launch.cuh"
#include "backends/cuda/fp8.cuh"

namespace sieve::cuda {
namespace {

using namespace cache_rec;  // cache_record.cuh

constexpr int kMaxThreads = 256;
constexpr int kMaxGroupWarps = 8;           // warps per block in the fp8 kernels (groups round-robin)
constexpr int64_t kMaxGroup = 128;          // the largest scale group of any format (ops/cache_record.h)
constexpr int kValuesPerLane = kMaxGroup / 32;
constexpr uint32_t kQuietNaNBits = 0x7fc00000u;  // std::numeric_limits<float>::quiet_NaN(): ref's NaN scale

// Threads for a row of n values: a multiple of 32, at most kMaxThreads.
int threads_for(int64_t n) { return static_cast<int>(std::clamp<int64_t>((n + 31) / 32 * 32, 32, kMaxThreads)); }
// Threads of the fp8 kernels: one warp per group, at most kMaxGroupWarps warps, at least one (the tail).
int threads_for_groups(int64_t n_groups) { return 32 * static_cast<int>(std::clamp<int64_t>(n_groups, 1, kMaxGroupWarps)); }

// One block per row: rows beyond the grid's x limit (2^31 − 1) are not expected of a step.
Status launch_rows(int64_t rows, const char* op) {
    if (rows > 0x7fffffff) return unsupported_error("cuda: {} over {} rows (at most 2^31 − 1)", op, rows);
    return Status::ok();
}

// ---- cache_store ---------------------------------------------------------------------------------

struct CacheStoreArgs {
    RecordGeometry g;
    const void* x;          // [n_rows, dim], f32 or bf16, row stride x_row_stride elements
    const int32_t* slots;   // [n_rows]
    int64_t n_slots, dim, entry_offset, x_row_stride;
    bool x_bf16, round_bf16;
};

// The fp32 bits of x[r, i] widened exactly (bf16 → f32); the raw bits are kept so that an f32 copy is exact.
__device__ __forceinline__ uint32_t x_bits(const CacheStoreArgs& a, int64_t idx) {
    return a.x_bf16 ? f32_bits_of_bf16(static_cast<const uint16_t*>(a.x)[idx]) : static_cast<const uint32_t*>(a.x)[idx];
}

// The slot row r writes, or −1 for none: −1 skips (the contract), anything outside [0, n_slots) is
// refused by check_indices, which cannot run here: skipped too, so that no byte outside the cache is
// written.
__device__ __forceinline__ int64_t store_slot(const CacheStoreArgs& a, int64_t r) {
    const int64_t s = a.slots[r];
    return s >= 0 && s < a.n_slots ? s : -1;
}

// f32 and bf16 entries: values entry_offset … entry_offset + dim − 1 of the entry; the others untouched.
__global__ void __launch_bounds__(kMaxThreads) cache_store_plain_kernel(CacheStoreArgs a) {
    wait_for_previous_kernel();
    const int64_t r = blockIdx.x;
    const int64_t s = store_slot(a, r);
    if (s < 0) return;
    uint8_t* data = record_data(a.g, s);
    const int64_t x0 = r * a.x_row_stride;
    if (a.g.format == CacheRecordFormat::f32) {
        uint8_t* out = data + 4 * a.entry_offset;
        for (int64_t i = threadIdx.x; i < a.dim; i += blockDim.x) put_u32(out + 4 * i, x_bits(a, x0 + i), a.g.values_aligned);
    } else {  // bf16: core's f32_to_bf16 of the widened value (also for bf16 x: its NaNs are made quiet, as ref)
        uint8_t* out = data + 2 * a.entry_offset;
        for (int64_t i = threadIdx.x; i < a.dim; i += blockDim.x)
            put_u16(out + 2 * i, bf16_bits_of(x_bits(a, x0 + i)), a.g.values_aligned);
    }
}

// v_i of ops/cache_store.h as fp32 bits: bf16(x_i) when round_bf16 (DeepSeek-V4: §3.2 "bf16 round-trip +
// UE8M0 FP8 quant", §4.3 "bf16-rounded post-RoPE key"), else x_i.
__device__ __forceinline__ uint32_t fp8_value_bits(const CacheStoreArgs& a, int64_t idx) {
    const uint32_t u = x_bits(a, idx);
    return a.round_bf16 ? f32_bits_of_bf16(bf16_bits_of(u)) : u;
}

// fp8_row_scale, fp8_model1, fp8_v32: the whole entry. Warp w quantizes groups w, w + n_warps, …; then
// the block writes fp8_model1's zero scale padding and the bf16 tail.
__global__ void __launch_bounds__(kMaxThreads) cache_store_fp8_kernel(CacheStoreArgs a) {
    wait_for_previous_kernel();
    const int64_t r = blockIdx.x;
    const int64_t s = store_slot(a, r);
    if (s < 0) return;
    const RecordGeometry& g = a.g;
    uint8_t* data = record_data(g, s);
    uint8_t* scales = record_scales(g, s);
    const int64_t x0 = r * a.x_row_stride;
    const int lane = threadIdx.x % 32, warp = threadIdx.x / 32, n_warps = blockDim.x / 32;
    for (int64_t k = warp; k < g.n_groups; k += n_warps) {  // uniform per warp: the full-mask reduction is safe
        const int64_t g0 = k * g.group_size;
        const int64_t n = min(g.group_size, g.quant_dim - g0);  // fp8_model1's last tile may be shorter
        uint32_t v[kValuesPerLane];
        uint32_t abs_max = 0;  // max |v| as bits: monotone for non-negative floats; ≥ 0x7f800000 iff inf/NaN
#pragma unroll
        for (int t = 0; t < kValuesPerLane; ++t) {
            const int64_t i = lane + 32 * t;
            v[t] = i < n ? fp8_value_bits(a, x0 + g0 + i) : 0u;
            abs_max = max(abs_max, v[t] & 0x7fffffffu);
        }
        abs_max = __reduce_max_sync(0xffffffffu, abs_max);
        // ops/quant_fp8.h: a finite group gets s = ue8m0_scale_for_amax(amax) (deepseek_v4.md §2.4, dsa_mla.md
        // §3.2), q = e4m3(clamp(v / s, ±448)); a group with a NaN or an infinity is poisoned loudly: s = NaN,
        // q = 0x7F | sign(v).
        const bool finite = abs_max < 0x7f800000u;
        const int e = finite ? ue8m0_exponent_for_amax(__uint_as_float(abs_max)) : 0;  // e ∈ [−22, 120]
        const float scale = __uint_as_float(static_cast<uint32_t>(e + 127) << 23);    // 2^e, a normal float
#pragma unroll
        for (int t = 0; t < kValuesPerLane; ++t) {
            const int64_t i = lane + 32 * t;
            if (i >= n) continue;
            uint8_t q;
            if (finite) {
                // IEEE division, as ref's `v / s`: exact for the power of two s unless the quotient is an
                // fp32 subnormal, then rounded to nearest even on both sides.
                const float qv = __fdiv_rn(__uint_as_float(v[t]), scale);
                q = f32_to_e4m3(fminf(fmaxf(qv, -448.0f), 448.0f));
            } else {
                q = static_cast<uint8_t>(0x7fu | ((v[t] >> 24) & 0x80u));
            }
            data[g0 + i] = q;
        }
        if (lane == 0) {
            if (g.format == CacheRecordFormat::fp8_model1)  // ue8m0 byte log2(s) + 127, 0xFF for NaN (§4.1)
                scales[k] = finite ? static_cast<uint8_t>(e + 127) : uint8_t{0xff};
            else  // fp8_row_scale (deepseek_v4.md §4.3), fp8_v32 (dsa_mla.md §3.4): s as an fp32 value
                put_u32(scales + 4 * k, finite ? __float_as_uint(scale) : kQuietNaNBits, g.scales_aligned);
        }
    }
    if (g.format == CacheRecordFormat::fp8_model1)  // §4.1: zero padding after the tile bytes
        for (int64_t k = g.n_groups + threadIdx.x; k < g.scale_bytes; k += blockDim.x) scales[k] = 0;
    if (g.bf16_tail > 0) {  // the rope values: bf16(v_i) (= bf16(x_i) whether or not v_i was rounded first)
        uint8_t* tail = record_bf16_tail(g, s);
        for (int64_t i = threadIdx.x; i < g.bf16_tail; i += blockDim.x)
            put_u16(tail + 2 * i, bf16_bits_of(fp8_value_bits(a, x0 + g.quant_dim + i)), g.tail_aligned);
    }
}

// ---- kv_load -------------------------------------------------------------------------------------

struct KvLoadArgs {
    RecordGeometry g;
    const int32_t* slots;  // [n_rows]
    void* y;               // [n_rows, dim], f32 or bf16, row stride y_row_stride elements
    int64_t y_row_stride;
    bool y_bf16;
};

// y[i] of the row starting at y0 = the fp32 value with bits u, cast once to y_type (bf16: core's rule).
__device__ __forceinline__ void put_y(const KvLoadArgs& a, int64_t idx, uint32_t u) {
    if (a.y_bf16)
        static_cast<uint16_t*>(a.y)[idx] = bf16_bits_of(u);
    else
        static_cast<uint32_t*>(a.y)[idx] = u;
}

// Rows of zeros for slots < 0: −1 by the contract; below −1 (refused by check_indices, which cannot run
// here) likewise, reading nothing. Returns whether the row was such a row.
__device__ __forceinline__ bool load_zero_row(const KvLoadArgs& a, int64_t s, int64_t y0) {
    if (s >= 0) return false;
    for (int64_t i = threadIdx.x; i < a.g.dim; i += blockDim.x) put_y(a, y0 + i, 0u);
    return true;
}

// f32: as stored (bits kept); bf16: widened (exact).
__global__ void __launch_bounds__(kMaxThreads) kv_load_plain_kernel(KvLoadArgs a) {
    wait_for_previous_kernel();
    const int64_t r = blockIdx.x, y0 = r * a.y_row_stride;
    const int64_t s = a.slots[r];
    if (load_zero_row(a, s, y0)) return;
    const uint8_t* data = record_data(a.g, s);
    if (a.g.format == CacheRecordFormat::f32) {
        for (int64_t i = threadIdx.x; i < a.g.dim; i += blockDim.x) put_y(a, y0 + i, get_u32(data + 4 * i, a.g.values_aligned));
    } else {
        for (int64_t i = threadIdx.x; i < a.g.dim; i += blockDim.x)
            put_y(a, y0 + i, f32_bits_of_bf16(get_u16(data + 2 * i, a.g.values_aligned)));
    }
}

// The fp8 formats: warp w dequantizes groups w, w + n_warps, … (one scale read per group), then the block
// widens the bf16 tail. e4m3(q) · scale is one fp32 product, rounded as ref's (ops/kv_load.h; exact for the
// power-of-two scales cache_store writes); a NaN code or a NaN scale gives NaN, whose payload may differ
// from the host's (the host's product propagates an operand's NaN, the GPU returns the canonical NaN).
__global__ void __launch_bounds__(kMaxThreads) kv_load_fp8_kernel(KvLoadArgs a) {
    wait_for_previous_kernel();
    const int64_t r = blockIdx.x, y0 = r * a.y_row_stride;
    const int64_t s = a.slots[r];
    if (load_zero_row(a, s, y0)) return;
    const RecordGeometry& g = a.g;
    const uint8_t* data = record_data(g, s);
    const uint8_t* scales = record_scales(g, s);
    const int lane = threadIdx.x % 32, warp = threadIdx.x / 32, n_warps = blockDim.x / 32;
    for (int64_t k = warp; k < g.n_groups; k += n_warps) {
        const int64_t g0 = k * g.group_size;
        const int64_t n = min(g.group_size, g.quant_dim - g0);
        const float scale = g.format == CacheRecordFormat::fp8_model1
                                ? ue8m0_to_f32(scales[k])  // 2^(e − 127), 0xFF = NaN (core ue8m0_to_f32)
                                : __uint_as_float(get_u32(scales + 4 * k, g.scales_aligned));
        for (int64_t i = lane; i < n; i += 32)
            put_y(a, y0 + g0 + i, __float_as_uint(__fmul_rn(e4m3_to_f32(data[g0 + i]), scale)));
    }
    if (g.bf16_tail > 0) {
        const uint8_t* tail = record_bf16_tail(g, s);
        for (int64_t i = threadIdx.x; i < g.bf16_tail; i += blockDim.x)
            put_y(a, y0 + g.quant_dim + i, f32_bits_of_bf16(get_u16(tail + 2 * i, g.tail_aligned)));
    }
}

// ---- compressor ----------------------------------------------------------------------------------

// The byte offset of a plain state row from the view's base (ops/cache_view.h CacheView::row).
__device__ __forceinline__ int64_t state_row_offset(const CacheView& v, int64_t slot) {
    return (slot / v.block_size) * v.block_bytes + (slot % v.block_size) * v.entry_bytes;
}

// row(s) = [a_s | b_s + ape[p_s mod m]] (deepseek_v4.md §3.4, §4.4 vLLM save_partial_states): a_s copied
// bit for bit, the score half one fp32 add (ref's order: gate + ape).
__global__ void __launch_bounds__(kMaxThreads) compressor_state_store_kernel(CompressorStateStoreParams p) {
    wait_for_previous_kernel();
    const int64_t t = blockIdx.x;
    const int64_t s = p.slots[t], pos = p.positions[t];
    if (s < 0 || pos < 0) return;  // −1 skips; a negative position (refused by check_indices) would index before ape
    float* row = reinterpret_cast<float*>(p.state.base + state_row_offset(p.state, s));
    const uint32_t* kv = reinterpret_cast<const uint32_t*>(p.kv + t * p.kv_row_stride);
    const float* gate = p.gate + t * p.gate_row_stride;
    const float* ape = p.ape + (pos % p.ratio) * p.width;  // §3.4: ape row = the token's slot in its block
    uint32_t* row_bits = reinterpret_cast<uint32_t*>(row);
    for (int64_t i = threadIdx.x; i < p.width; i += blockDim.x) {
        row_bits[i] = kv[i];
        row[p.width + i] = __fadd_rn(gate[i], ape[i]);
    }
}

constexpr int kPoolThreads = 128;  // channels per block
constexpr int kPoolRows = 256;     // gather rows whose state-row offsets one block stages at a time

// out[k, e] = Σ_j e^(B_j − max B)·A_j / Σ_j e^(B_j − max B) over the valid rows j of entry k (ops/compressor.h;
// §3.4 [ref] overlap_transform: rows j < m contribute their Ca column e, rows j ≥ m their Cb column c + e when
// overlapping). Block (k, chunk): thread = channel e; the rows' byte offsets are staged in shared memory
// (−1 = absent) chunk by chunk, once per pass.
__global__ void __launch_bounds__(kPoolThreads) compressor_pool_kernel(CompressorPoolParams p) {
    wait_for_previous_kernel();
    __shared__ int64_t row_offset[kPoolRows];
    const int64_t k = blockIdx.x;
    // p.coff(), p.width(), p.n_rows() are host functions: the same numbers, spelled out.
    const int64_t c = p.head_dim, m = p.ratio, width = (p.overlap ? 2 : 1) * c, n_rows = (p.overlap ? 2 : 1) * m;
    const int64_t e = static_cast<int64_t>(blockIdx.y) * blockDim.x + threadIdx.x;
    const bool active = e < c;  // no early return: every thread takes part in the staging
    const int32_t* slots = p.gather_slots + k * p.gather_stride;
    auto stage = [&](int64_t j0, int64_t nj) {
        __syncthreads();  // the previous chunk's offsets are no longer read
        for (int64_t j = threadIdx.x; j < nj; j += blockDim.x) {
            const int64_t s = slots[j0 + j];
            row_offset[j] = s < 0 ? -1 : state_row_offset(p.state, s);  // −1 = no such token (positions < 0)
        }
        __syncthreads();
    };
    auto column = [&](int64_t j) { return p.overlap && j >= m ? c + e : e; };  // Ca of block k − 1, Cb of block k
    // Pass 1: the maximum score over the valid rows (fmaxf ignores a NaN score, as the cpu backend's
    // std::max(mx, b) does).
    float mx = -INFINITY;
    bool any = false;  // the same for every active thread (it depends on the slots only)
    for (int64_t j0 = 0; j0 < n_rows; j0 += kPoolRows) {
        const int64_t nj = min(static_cast<int64_t>(kPoolRows), n_rows - j0);
        stage(j0, nj);
        if (!active) continue;
        for (int64_t j = 0; j < nj; ++j) {
            if (row_offset[j] < 0) continue;
            const float* row = reinterpret_cast<const float*>(p.state.base + row_offset[j]);
            mx = fmaxf(mx, row[width + column(j0 + j)]);
            any = true;
        }
    }
    // Pass 2: Σ e^(B_j − max)·A_j and Σ e^(B_j − max), rows in position order (fp32, the accumulation order
    // unspecified by the contract). With one chunk its offsets are still staged; with several (n_rows >
    // kPoolRows) every thread restages each chunk (uniform: the condition depends on n_rows only).
    const bool restage = n_rows > kPoolRows;
    float num = 0.0f, den = 0.0f;
    for (int64_t j0 = 0; j0 < n_rows; j0 += kPoolRows) {
        const int64_t nj = min(static_cast<int64_t>(kPoolRows), n_rows - j0);
        if (restage) stage(j0, nj);
        if (!active || !any) continue;
        for (int64_t j = 0; j < nj; ++j) {
            if (row_offset[j] < 0) continue;
            const float* row = reinterpret_cast<const float*>(p.state.base + row_offset[j]);
            const int64_t col = column(j0 + j);
            const float w = expf(__fsub_rn(row[width + col], mx));  // ≤ 2 ulp (no fast math in this build)
            num = fmaf(w, row[col], num);
            den = __fadd_rn(den, w);
        }
    }
    if (active) p.out[k * p.out_row_stride + e] = any ? __fdiv_rn(num, den) : 0.0f;  // no valid row gives 0
}

}  // namespace

Status cache_store(const CacheStoreParams& p, cudaStream_t stream) {
    if (p.n_rows == 0) return Status::ok();
    SIEVE_RETURN_IF_ERROR(launch_rows(p.n_rows, "cache_store"));
    CacheStoreArgs a;
    a.g = record_geometry(p.cache, p.layout);
    a.x = p.x;
    a.slots = p.slots;
    a.n_slots = p.n_slots;
    a.dim = p.dim;
    a.entry_offset = p.entry_offset;
    a.x_row_stride = p.x_row_stride;
    a.x_bf16 = p.x_type == DType::bf16;
    a.round_bf16 = p.round_bf16;
    const auto rows = static_cast<unsigned>(p.n_rows);
    if (p.layout.is_fp8()) {
        if (a.g.group_size > kMaxGroup)  // validate(CacheRecordLayout) bounds every format's group by 128
            return internal_error("cuda: cache_store: {} group of {} values (at most {})",
                                  cache_record_format_name(p.layout.format), a.g.group_size, kMaxGroup);
        launch_after_previous(cache_store_fp8_kernel, rows, threads_for_groups(a.g.n_groups), 0, stream, a);
    } else {
        launch_after_previous(cache_store_plain_kernel, rows, threads_for(p.dim), 0, stream, a);
    }
    return cuda_status(cudaGetLastError(), "cache_store launch");
}

Status kv_load(const KvLoadParams& p, cudaStream_t stream) {
    if (p.n_rows == 0) return Status::ok();
    SIEVE_RETURN_IF_ERROR(launch_rows(p.n_rows, "kv_load"));
    KvLoadArgs a;
    a.g = record_geometry(p.cache, p.layout);
    a.slots = p.slots;
    a.y = p.y;
    a.y_row_stride = p.y_row_stride;
    a.y_bf16 = p.y_type == DType::bf16;
    const auto rows = static_cast<unsigned>(p.n_rows);
    if (p.layout.is_fp8())
        launch_after_previous(kv_load_fp8_kernel, rows, threads_for_groups(a.g.n_groups), 0, stream, a);
    else
        launch_after_previous(kv_load_plain_kernel, rows, threads_for(p.layout.dim), 0, stream, a);
    return cuda_status(cudaGetLastError(), "kv_load launch");
}

Status compressor_state_store(const CompressorStateStoreParams& p, cudaStream_t stream) {
    if (p.n_tokens == 0) return Status::ok();
    SIEVE_RETURN_IF_ERROR(launch_rows(p.n_tokens, "compressor_state_store"));
    // validate() makes entry_bytes and block_bytes multiples of 4; the rows are fp32 (compressor_state_row).
    if (reinterpret_cast<uintptr_t>(p.state.base) % 4 != 0)
        return unsupported_error("cuda: compressor_state_store: state base {} is not 4-byte aligned",
                                 static_cast<const void*>(p.state.base));
    launch_after_previous(compressor_state_store_kernel, static_cast<unsigned>(p.n_tokens), threads_for(p.width), 0,
                          stream, p);
    return cuda_status(cudaGetLastError(), "compressor_state_store launch");
}

Status compressor_pool(const CompressorPoolParams& p, cudaStream_t stream) {
    if (p.n_entries == 0) return Status::ok();
    SIEVE_RETURN_IF_ERROR(launch_rows(p.n_entries, "compressor_pool"));
    if (reinterpret_cast<uintptr_t>(p.state.base) % 4 != 0)
        return unsupported_error("cuda: compressor_pool: state base {} is not 4-byte aligned",
                                 static_cast<const void*>(p.state.base));
    const int64_t chunks = (p.head_dim + kPoolThreads - 1) / kPoolThreads;
    if (chunks > 65535)
        return unsupported_error("cuda: compressor_pool: head_dim = {} needs {} blocks of {} channels (at most 65535)",
                                 p.head_dim, chunks, kPoolThreads);
    const dim3 grid(static_cast<unsigned>(p.n_entries), static_cast<unsigned>(chunks));
    launch_after_previous(compressor_pool_kernel, grid, kPoolThreads, 0, stream, p);
    return cuda_status(cudaGetLastError(), "compressor_pool launch");
}

}  // namespace sieve::cuda
