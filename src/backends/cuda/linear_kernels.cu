// Staging and finishing of the cuda linear (linear_kernels.h). Grid-stride loops over every element.
#include "backends/cuda/cuda_status.h"
#include "backends/cuda/dependent_launch.cuh"
#include "backends/cuda/dtype_access.cuh"
#include "backends/cuda/linear_kernels.h"

namespace sieve::cuda {
namespace {

constexpr int kThreads = 256;

unsigned blocks_for(int64_t n) {
    const int64_t b = (n + kThreads - 1) / kThreads;
    return static_cast<unsigned>(b < 65535 * 16 ? b : 65535 * 16);  // grid-stride beyond
}

__global__ void stage_x_kernel(const void* x, bool x_bf16, int64_t x_stride, int64_t n_tokens, int64_t k,
                               bool to_bf16, void* xs) {
    wait_for_previous_kernel();
    const int64_t n = n_tokens * k;
    for (int64_t e = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; e < n;
         e += static_cast<int64_t>(gridDim.x) * blockDim.x) {
        const int64_t t = e / k, i = e % k;
        const float v = load_act(x, x_bf16, t * x_stride + i);
        store_act(xs, to_bf16, e, v);
    }
}

__global__ void finish_kernel(const float* acc, const float* bias, int64_t n_tokens, int64_t n, void* y, bool y_bf16,
                              int64_t y_stride) {
    wait_for_previous_kernel();
    const int64_t total = n_tokens * n;
    for (int64_t e = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; e < total;
         e += static_cast<int64_t>(gridDim.x) * blockDim.x) {
        const int64_t t = e / n, o = e % n;
        float v = acc[e];
        if (bias) v = __fadd_rn(v, bias[o]);  // bias added in fp32 (ops/linear.h)
        store_act(y, y_bf16, t * y_stride + o, v);
    }
}

}  // namespace

Status linear_stage_x(const void* x, DType x_type, int64_t x_stride, int64_t n_tokens, int64_t k, bool to_bf16,
                      void* xs, cudaStream_t stream) {
    if (n_tokens * k == 0) return Status::ok();
    launch_after_previous(stage_x_kernel, blocks_for(n_tokens * k), kThreads, 0, stream, x, x_type == DType::bf16,
                          x_stride, n_tokens, k, to_bf16, xs);
    return cuda_status(cudaGetLastError(), "linear: staging x");
}

Status linear_finish(const float* acc, const float* bias, int64_t n_tokens, int64_t n, void* y, DType y_type,
                     int64_t y_stride, cudaStream_t stream) {
    if (n_tokens * n == 0) return Status::ok();
    launch_after_previous(finish_kernel, blocks_for(n_tokens * n), kThreads, 0, stream, acc, bias, n_tokens, n, y,
                          y_type == DType::bf16, y_stride);
    return cuda_status(cudaGetLastError(), "linear: bias and store");
}

}  // namespace sieve::cuda
