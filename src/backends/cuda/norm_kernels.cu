// RMSNorm and LayerNorm (ops/rms_norm.h, ops/layer_norm.h): one thread block per (token, head) row, or for
// RMSNorm's many rows of up to kWarpRowMaxDim values one warp per row. The sums are fp32 (a strided per-thread
// partial, then a block or warp reduction: order unspecified, as the contracts allow); 1/sqrt is IEEE
// division and square root (nvcc's default -prec-div / -prec-sqrt), and the output products are rounded as
// written, as in ref.
#include "backends/cuda/norm_kernels.h"
#include "backends/cuda/cuda_status.h"
#include "backends/cuda/dependent_launch.cuh"
#include "backends/cuda/dtype_access.cuh"

namespace sieve::cuda {
namespace {

constexpr int kThreads = 256;

// The sum of every thread's v over the block, returned to all threads.
__device__ float block_sum(float v) {
    __shared__ float partial[kThreads / 32];
    __shared__ float total;
    for (int offset = 16; offset > 0; offset /= 2) v += __shfl_down_sync(0xffffffffu, v, offset);
    if (threadIdx.x % 32 == 0) partial[threadIdx.x / 32] = v;
    __syncthreads();
    if (threadIdx.x < 32) {
        float w = threadIdx.x < kThreads / 32 ? partial[threadIdx.x] : 0.0f;
        for (int offset = 16; offset > 0; offset /= 2) w += __shfl_down_sync(0xffffffffu, w, offset);
        if (threadIdx.x == 0) total = w;
    }
    __syncthreads();
    const float out = total;
    __syncthreads();  // total and partial may be reused by a second call
    return out;
}

// The factor of value i by the weight mode (ops/rms_norm.h): 1, w_i or 1 + w_i (that sum rounded, as in ref).
__device__ __forceinline__ float rms_norm_gain(const RmsNormParams& p, int64_t i) {
    if (p.weight_mode == RmsNormWeight::multiply) return p.weight[i];
    if (p.weight_mode == RmsNormWeight::one_plus) return __fadd_rn(1.0f, p.weight[i]);
    return 1.0f;
}

__global__ void __launch_bounds__(kThreads) rms_norm_kernel(RmsNormParams p) {
    wait_for_previous_kernel();
    const int64_t t = blockIdx.x / p.n_heads, h = blockIdx.x % p.n_heads;
    const int64_t xo = t * p.x_token_stride + h * p.x_head_stride, yo = t * p.y_token_stride + h * p.y_head_stride;
    const bool x_bf16 = p.x_type == DType::bf16, y_bf16 = p.y_type == DType::bf16;
    float sum_sq = 0.0f;
    for (int64_t i = threadIdx.x; i < p.dim; i += kThreads) {
        const float v = load_act(p.x, x_bf16, xo + i);
        sum_sq += v * v;
    }
    const float ms = block_sum(sum_sq) / static_cast<float>(p.dim);
    const float inv = 1.0f / sqrtf(ms + p.eps);
    for (int64_t i = threadIdx.x; i < p.dim; i += kThreads) {
        store_act(p.y, y_bf16, yo + i, __fmul_rn(__fmul_rn(load_act(p.x, x_bf16, xo + i), inv), rms_norm_gain(p, i)));
    }
}

// A warp per row, its lanes holding the row's values (lane l: values l, l + 32, …), read once: the per-head
// norms of a decode step (thousands of rows of 128 to 512 values) would leave most of a block idle and wait
// on its barriers. kPerLane values a lane, rows of up to 32 · kPerLane values. Timed on one H100 (ncu, a
// decode step of 64 tokens): 4096 rows of 512 values 13.5 µs → 6.6, but 64 rows of 512 or 1536 values took
// 5.6 and 8.8 µs against the blocks' 4.5 (eight multiprocessors for 64 warps): few rows keep a block each.
constexpr int kWarpRowMaxDim = 512;
constexpr int64_t kWarpRowMinRows = 1024;
template <int kPerLane>
__global__ void __launch_bounds__(kThreads) rms_norm_warp_kernel(RmsNormParams p, int64_t rows) {
    wait_for_previous_kernel();
    const int64_t row = static_cast<int64_t>(blockIdx.x) * (kThreads / 32) + threadIdx.x / 32;
    if (row >= rows) return;  // a whole warp
    const int lane = static_cast<int>(threadIdx.x % 32);
    const int64_t t = row / p.n_heads, h = row % p.n_heads;
    const int64_t xo = t * p.x_token_stride + h * p.x_head_stride, yo = t * p.y_token_stride + h * p.y_head_stride;
    const bool x_bf16 = p.x_type == DType::bf16, y_bf16 = p.y_type == DType::bf16;
    const int dim = static_cast<int>(p.dim);
    // Every load (the row and its weights) before the first store: a load may not pass a store to y, which
    // the compiler cannot tell from x or the weights, and each would then wait a round trip of its own.
    float v[kPerLane], g[kPerLane];
    float sum_sq = 0.0f;
#pragma unroll
    for (int j = 0; j < kPerLane; ++j) {
        const int i = lane + 32 * j;
        v[j] = i < dim ? load_act(p.x, x_bf16, xo + i) : 0.0f;
        g[j] = i < dim ? rms_norm_gain(p, i) : 1.0f;
    }
#pragma unroll
    for (int j = 0; j < kPerLane; ++j) sum_sq += v[j] * v[j];
    for (int offset = 16; offset > 0; offset /= 2) sum_sq += __shfl_xor_sync(0xffffffffu, sum_sq, offset);
    const float inv = 1.0f / sqrtf(sum_sq / static_cast<float>(p.dim) + p.eps);
#pragma unroll
    for (int j = 0; j < kPerLane; ++j) {
        const int i = lane + 32 * j;
        if (i < dim) store_act(p.y, y_bf16, yo + i, __fmul_rn(__fmul_rn(v[j], inv), g[j]));
    }
}

__global__ void __launch_bounds__(kThreads) layer_norm_kernel(LayerNormParams p) {
    wait_for_previous_kernel();
    const int64_t t = blockIdx.x / p.n_heads, h = blockIdx.x % p.n_heads;
    const int64_t xo = t * p.x_token_stride + h * p.x_head_stride, yo = t * p.y_token_stride + h * p.y_head_stride;
    const bool x_bf16 = p.x_type == DType::bf16, y_bf16 = p.y_type == DType::bf16;
    float sum = 0.0f;
    for (int64_t i = threadIdx.x; i < p.dim; i += kThreads) sum += load_act(p.x, x_bf16, xo + i);
    const float mean = block_sum(sum) / static_cast<float>(p.dim);
    float sum_sq = 0.0f;
    for (int64_t i = threadIdx.x; i < p.dim; i += kThreads) {
        const float d = load_act(p.x, x_bf16, xo + i) - mean;
        sum_sq += d * d;
    }
    const float inv = 1.0f / sqrtf(block_sum(sum_sq) / static_cast<float>(p.dim) + p.eps);
    for (int64_t i = threadIdx.x; i < p.dim; i += kThreads) {
        float v = __fmul_rn(__fsub_rn(load_act(p.x, x_bf16, xo + i), mean), inv);
        if (p.weight) v = __fmul_rn(v, p.weight[i]);
        if (p.bias) v = __fadd_rn(v, p.bias[i]);
        store_act(p.y, y_bf16, yo + i, v);
    }
}

// One block per row: rows beyond the grid's x limit (2^31 − 1) are not expected of a step.
Status launch_rows(int64_t rows, const char* op) {
    if (rows > 0x7fffffff) return unsupported_error("cuda: {} over {} rows (at most 2^31 − 1)", op, rows);
    return Status::ok();
}

}  // namespace

Status rms_norm(const RmsNormParams& p, cudaStream_t stream) {
    const int64_t rows = p.n_tokens * p.n_heads;
    if (rows == 0) return Status::ok();
    SIEVE_RETURN_IF_ERROR(launch_rows(rows, "rms_norm"));
    if (p.dim <= kWarpRowMaxDim && rows >= kWarpRowMinRows) {
        const unsigned blocks = static_cast<unsigned>((rows + kThreads / 32 - 1) / (kThreads / 32));
        launch_after_previous(rms_norm_warp_kernel<kWarpRowMaxDim / 32>, blocks, kThreads, 0, stream, p, rows);
    } else {
        launch_after_previous(rms_norm_kernel, static_cast<unsigned>(rows), kThreads, 0, stream, p);
    }
    return cuda_status(cudaGetLastError(), "rms_norm launch");
}

Status layer_norm(const LayerNormParams& p, cudaStream_t stream) {
    const int64_t rows = p.n_tokens * p.n_heads;
    if (rows == 0) return Status::ok();
    SIEVE_RETURN_IF_ERROR(launch_rows(rows, "layer_norm"));
    launch_after_previous(layer_norm_kernel, static_cast<unsigned>(rows), kThreads, 0, stream, p);
    return cuda_status(cudaGetLastError(), "layer_norm launch");
}

}  // namespace sieve::cuda
