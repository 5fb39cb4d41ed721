#include "backends/cuda/cuda_linear.h"

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <vector>

#include <fmt/format.h>

#include "backends/cuda/cuda_status.h"
#include "backends/cuda/linear_kernels.h"
#include "sieve/ops/op_common.h"

namespace sieve::cuda {

namespace {

std::atomic<int64_t> g_live_weight_bytes{0};

// The workspace of one call: the staged x, then the fp32 accumulator, each 64-byte aligned.
struct LinearScratch {
    size_t x_bytes = 0, acc_offset = 0, total = 0;
};
LinearScratch linear_scratch(int64_t m, int64_t n, int64_t k, LinearMath math) {
    LinearScratch s;
    s.x_bytes = workspace_round_up(static_cast<size_t>(m * k) * (math == LinearMath::bf16 ? 2 : 4));
    s.acc_offset = s.x_bytes;
    s.total = s.acc_offset + workspace_round_up(static_cast<size_t>(m * n) * 4);
    return s;
}

}  // namespace

CudaPreparedLinear::CudaPreparedLinear(const LinearWeights& w, std::unique_ptr<DeviceBuffer> weight,
                                       std::unique_ptr<DeviceBuffer> bias)
    : PreparedLinear(w.out_features, w.in_features, w.math, w.weight_type, w.groups), weight_(std::move(weight)),
      bias_(std::move(bias)) {
    g_live_weight_bytes += static_cast<int64_t>(bytes());
}
CudaPreparedLinear::~CudaPreparedLinear() { g_live_weight_bytes -= static_cast<int64_t>(bytes()); }

size_t cuda_live_weight_bytes() { return static_cast<size_t>(g_live_weight_bytes.load()); }

std::string CudaPreparedLinear::describe() const {
    return math() == LinearMath::bf16 ? "cuBLAS bf16 GEMM, fp32 accumulation (weights rounded to bf16: exact for bf16 "
                                        "and for FP8 with power-of-two scales)"
                                      : "cuBLAS fp32 GEMM (pedantic: no TF32; FP8 and bf16 weights widened exactly)";
}

Expected<std::unique_ptr<PreparedLinear>> linear_prepare(Backend& backend, const LinearWeights& w) {
    SIEVE_RETURN_IF_ERROR(validate_and_check_indices(w));
    const int64_t n = w.out_features, k = w.in_features;
    const bool bf16 = w.math == LinearMath::bf16;
    const size_t count = static_cast<size_t>(n * k);
    SIEVE_ASSIGN_OR_RETURN(auto weight, backend.buffer_alloc(count * (bf16 ? 2 : 4), BufferUsage::weights,
                                                             fmt::format("linear weights [{}, {}]", n, k)));
    if (bf16) {
        std::vector<uint16_t> host(count);
        for (int64_t o = 0; o < n; ++o)
            for (int64_t i = 0; i < k; ++i) host[static_cast<size_t>(o * k + i)] = f32_to_bf16(linear_weight_value(w, o, i));
        SIEVE_RETURN_IF_ERROR(backend.buffer_upload(*weight, 0, host.data(), host.size() * 2));
    } else {
        std::vector<float> host(count);
        for (int64_t o = 0; o < n; ++o)
            for (int64_t i = 0; i < k; ++i) host[static_cast<size_t>(o * k + i)] = linear_weight_value(w, o, i);
        SIEVE_RETURN_IF_ERROR(backend.buffer_upload(*weight, 0, host.data(), host.size() * 4));
    }
    std::unique_ptr<DeviceBuffer> bias;
    if (w.bias != nullptr) {
        std::vector<float> host(static_cast<size_t>(n));
        for (int64_t o = 0; o < n; ++o)
            host[static_cast<size_t>(o)] = w.bias_type == DType::bf16 ? bf16_to_f32(static_cast<const uint16_t*>(w.bias)[o])
                                                                       : static_cast<const float*>(w.bias)[o];
        SIEVE_ASSIGN_OR_RETURN(bias, backend.buffer_alloc(host.size() * 4, BufferUsage::weights, "linear bias"));
        SIEVE_RETURN_IF_ERROR(backend.buffer_upload(*bias, 0, host.data(), host.size() * 4));
    }
    return std::unique_ptr<PreparedLinear>(new CudaPreparedLinear(w, std::move(weight), std::move(bias)));
}

Expected<LinearPlan> linear_plan(const CudaPreparedLinear& w, const LinearParams& shape) {
    SIEVE_RETURN_IF_ERROR(validate(shape, w.x_features(), w.out_features(), /*check_pointers=*/false));
    LinearPlan plan = LinearPlan::of_shape(shape);
    plan.workspace_bytes = shape.n_tokens == 0 ? 0 : linear_scratch(shape.n_tokens, w.out_features(), w.x_features(), w.math()).total;
    plan.kernel = w.math() == LinearMath::bf16 ? "cublas_gemm_bf16_f32acc" : "cublas_sgemm_pedantic";
    if (w.groups() > 1) plan.kernel += fmt::format(" (strided-batched over {} groups)", w.groups());
    return plan;
}

Status linear_run(cublasHandle_t cublas, cudaStream_t stream, const CudaPreparedLinear& w, const LinearPlan& plan,
                  const LinearParams& p, Workspace ws) {
    SIEVE_RETURN_IF_ERROR(check_linear_plan(plan, p));
    SIEVE_RETURN_IF_ERROR(validate(p, w.x_features(), w.out_features()));
    SIEVE_RETURN_IF_ERROR(check_workspace("linear", ws, plan.workspace_bytes));
    // G groups (ops/linear.h "Groups"): group g is the GEMM of x's values g·k … with weight rows and outputs
    // g·n_g …, n_g = n / G: one strided-batched GEMM, the groups its batch.
    const int64_t m = p.n_tokens, n = w.out_features(), k = w.in_features(), groups = w.groups(), n_g = n / groups;
    const int64_t kx = w.x_features();  // x's values per row: groups · k
    if (m == 0) return Status::ok();
    if (m > INT32_MAX || n > INT32_MAX || kx > INT32_MAX)
        return unsupported_error("cuda linear: {}×{}×{} exceeds cuBLAS's int dimensions", m, n, kx);
    const bool bf16 = w.math() == LinearMath::bf16;
    const LinearScratch s = linear_scratch(m, n, kx, w.math());
    auto* base = static_cast<uint8_t*>(ws.data);
    // x is read in place when it already is the GEMM's dtype with rows cuBLAS can step over (a leading
    // dimension of at least its kx values); otherwise it is staged (converted, and rounded to bf16 for bf16
    // math).
    const DType gemm_type = bf16 ? DType::bf16 : DType::f32;
    const bool x_in_place = p.x_type == gemm_type && (m == 1 || p.x_row_stride >= kx) && p.x_row_stride <= INT32_MAX;
    const void* xs = x_in_place ? p.x : base;
    const int64_t ldx = x_in_place ? std::max(p.x_row_stride, kx) : kx;
    if (!x_in_place) SIEVE_RETURN_IF_ERROR(linear_stage_x(p.x, p.x_type, p.x_row_stride, m, kx, bf16, base, stream));
    // Without a bias the GEMM writes y itself (its fp32 sums cast once, as the finish would), where cuBLAS
    // has that output type (bf16 or fp32 for bf16 math, fp32 for fp32 math); otherwise into the fp32
    // accumulator, which the finish adds the bias to and casts.
    const bool y_direct = w.bias() == nullptr && (bf16 || p.y_type == DType::f32) &&
                          (m == 1 || p.y_row_stride >= n) && p.y_row_stride <= INT32_MAX;
    void* out = y_direct ? p.y : base + s.acc_offset;
    const int64_t ldy = y_direct ? std::max(p.y_row_stride, n) : n;
    const cudaDataType_t out_type = y_direct && p.y_type == DType::bf16 ? CUDA_R_16BF : CUDA_R_32F;
    // Row-major y[m, n] = x[m, k] · W[n, k]ᵀ is column-major yᵀ[n, m] = W[n, k] · xᵀ: W's row-major bytes
    // are the column-major k×n matrix Wᵀ, taken transposed; x's rows (ldx apart) the column-major k×m matrix
    // xᵀ, and y's rows (ldy apart) the column-major n×m matrix yᵀ.
    const float alpha = 1.0f, beta = 0.0f;
    const cudaDataType_t in_type = bf16 ? CUDA_R_16BF : CUDA_R_32F;
    const cublasComputeType_t compute = bf16 ? CUBLAS_COMPUTE_32F : CUBLAS_COMPUTE_32F_PEDANTIC;
    if (groups == 1) {
        SIEVE_RETURN_IF_ERROR(cublas_status(
            cublasGemmEx(cublas, CUBLAS_OP_T, CUBLAS_OP_N, static_cast<int>(n), static_cast<int>(m), static_cast<int>(k),
                         &alpha, w.weight(), in_type, static_cast<int>(k), xs, in_type, static_cast<int>(ldx), &beta, out,
                         out_type, static_cast<int>(ldy), compute, CUBLAS_GEMM_DEFAULT),
            fmt::format("linear {}×{}×{} GEMM", m, n, k)));
    } else {
        // Group g: W's rows g·n_g … (n_g·k elements apart), x's columns g·k …, y's columns g·n_g ….
        SIEVE_RETURN_IF_ERROR(cublas_status(
            cublasGemmStridedBatchedEx(cublas, CUBLAS_OP_T, CUBLAS_OP_N, static_cast<int>(n_g), static_cast<int>(m),
                                       static_cast<int>(k), &alpha, w.weight(), in_type, static_cast<int>(k),
                                       static_cast<long long>(n_g * k), xs, in_type, static_cast<int>(ldx),
                                       static_cast<long long>(k), &beta, out, out_type, static_cast<int>(ldy),
                                       static_cast<long long>(n_g), static_cast<int>(groups), compute, CUBLAS_GEMM_DEFAULT),
            fmt::format("linear {} groups × {}×{}×{} GEMM", groups, m, n_g, k)));
    }
    if (y_direct) return Status::ok();
    return linear_finish(static_cast<const float*>(out), w.bias(), m, n, p.y, p.y_type, p.y_row_stride, stream);
}

bool mla_head_proj_takes_gemm(const MlaHeadProjParams& p) {
    return p.math == LinearMath::bf16 && p.x_type == DType::bf16 && p.w_type == DType::bf16 &&
           p.x_token_stride >= p.in_features && p.y_token_stride >= p.out_features && p.n_tokens <= INT32_MAX &&
           p.n_heads <= INT32_MAX && p.in_features <= INT32_MAX && p.out_features <= INT32_MAX &&
           p.x_token_stride <= INT32_MAX && p.y_token_stride <= INT32_MAX;
}

Status mla_head_proj_gemm(cublasHandle_t cublas, const MlaHeadProjParams& p) {
    SIEVE_RETURN_IF_ERROR(validate(p));
    if (!mla_head_proj_takes_gemm(p)) return internal_error("cuda mla_head_proj: shape or types not for the GEMM path");
    if (p.n_tokens == 0 || p.n_heads == 0) return Status::ok();
    // Row-major y_h[t, o] = x_h[t, i] · W_h[i, o] is column-major y_hᵀ[o, t] = W_hᵀ[o, i] · x_hᵀ[i, t]: W_h's
    // row-major bytes are the column-major out × in matrix W_hᵀ (leading dimension out), x_h's rows of
    // x_token_stride elements the column-major in × T matrix x_hᵀ, y_h's likewise; head h of each starts
    // h·(in·out), h·x_head_stride and h·y_head_stride elements in.
    const float alpha = 1.0f, beta = 0.0f;
    const int m = static_cast<int>(p.out_features), n = static_cast<int>(p.n_tokens), k = static_cast<int>(p.in_features);
    return cublas_status(
        cublasGemmStridedBatchedEx(cublas, CUBLAS_OP_N, CUBLAS_OP_N, m, n, k, &alpha, p.w, CUDA_R_16BF, m,
                                   static_cast<long long>(p.in_features * p.out_features), p.x, CUDA_R_16BF,
                                   static_cast<int>(p.x_token_stride), static_cast<long long>(p.x_head_stride), &beta,
                                   p.y, p.y_type == DType::bf16 ? CUDA_R_16BF : CUDA_R_32F,
                                   static_cast<int>(p.y_token_stride), static_cast<long long>(p.y_head_stride),
                                   static_cast<int>(p.n_heads), CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT),
        fmt::format("mla_head_proj {} heads × {}×{}×{} GEMM", p.n_heads, p.n_tokens, p.out_features, p.in_features));
}

}  // namespace sieve::cuda
