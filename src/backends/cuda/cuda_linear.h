// The cuda backend's linear (ops/linear.h): weights converted once to the GEMM's dtype and uploaded at
// prepare time (fp32 for LinearMath::f32; bf16 for LinearMath::bf16, exact for bf16 weights and for FP8
// weights with power-of-two block scales), then per call one cuBLAS GEMM with fp32 accumulation: x read in
// place when it already has the GEMM's dtype (else staged as a dense matrix of it), y written by the GEMM
// when there is no bias (else the fp32 sums go to the workspace and the bias add + cast + strided store
// follow, linear_kernels.h). A grouped linear (ops/linear.h "Groups") is one strided-batched GEMM, the groups
// its batch. Tensor-core FP8 GEMMs with block scales come later.
#pragma once

#include <memory>
#include <string>

#include <cublas_v2.h>
#include <cuda_runtime_api.h>

#include "sieve/backends/backend.h"
#include "sieve/ops/mla_head_proj.h"

namespace sieve::cuda {

class CudaPreparedLinear final : public PreparedLinear {
public:
    CudaPreparedLinear(const LinearWeights& w, std::unique_ptr<DeviceBuffer> weight, std::unique_ptr<DeviceBuffer> bias);
    ~CudaPreparedLinear() override;
    size_t bytes() const override { return weight_->bytes() + (bias_ ? bias_->bytes() : 0); }
    std::string describe() const override;
    const void* weight() const { return weight_->data(); }  // [out, in] dense, fp32 or bf16 (math())
    const float* bias() const { return bias_ ? bias_->as<float>() : nullptr; }  // [out] or null

private:
    std::unique_ptr<DeviceBuffer> weight_, bias_;
};

// Bytes of every live CudaPreparedLinear in the process (Backend::prepared_weight_bytes).
size_t cuda_live_weight_bytes();

// `backend` allocates and uploads (its buffers; the weights stay valid while the prepared linear lives).
Expected<std::unique_ptr<PreparedLinear>> linear_prepare(Backend& backend, const LinearWeights& w);
Expected<LinearPlan> linear_plan(const CudaPreparedLinear& w, const LinearParams& shape);
Status linear_run(cublasHandle_t cublas, cudaStream_t stream, const CudaPreparedLinear& w, const LinearPlan& plan,
                  const LinearParams& p, Workspace ws);

// mla_head_proj (ops/mla_head_proj.h) of the deployed profile as one strided-batched cuBLAS GEMM, the heads
// its batch: bf16 x and w with fp32 accumulation (every product exact, fp32 sums in an order the contract
// leaves open), cast once into y. Taken when math, x and w are bf16 and the token strides are at least a
// row (what cuBLAS's leading dimensions need); the fp32 kernel (attention_kernels.h) runs the rest.
bool mla_head_proj_takes_gemm(const MlaHeadProjParams& p);
Status mla_head_proj_gemm(cublasHandle_t cublas, const MlaHeadProjParams& p);

}  // namespace sieve::cuda
