// Attention: sparse attention over listed cache rows with a sink (ops/sparse_attention.h), QSA's pooling, expansion and sparse GQA (ops/qsa_pool.h, qsa_expand.h, qsa_sparse_gqa.h), DSA's output gate and per-head projection (ops/dsa_output_gate.h, mla_head_proj.h).
// Each launcher enqueues on `stream`; the backend has validated the params (cuda_backend.cpp), whose
// pointers are device addresses.
#pragma once

#include <cstddef>

#include <cuda_runtime_api.h>

#include "sieve/backends/backend.h"
#include "sieve/core/status.h"
#include "sieve/ops/sparse_attention.h"
#include "sieve/ops/qsa_pool.h"
#include "sieve/ops/qsa_expand.h"
#include "sieve/ops/qsa_sparse_gqa.h"
#include "sieve/ops/dsa_output_gate.h"
#include "sieve/ops/mla_head_proj.h"

namespace sieve::cuda {

// The kernel sparse_attention runs for these params: the generic one (any format, f32 q), the mma.sync
// tensor-core one (bf16 q, fp8 records of the shapes it takes), or the warpgroup (wgmma) one (the real
// DeepSeek-V4 and V3.2 / Hy4 shapes, at any batch). Host logic only: it needs no GPU.
enum class SparseAttentionPath { generic, mma_sync, wgmma };
SparseAttentionPath sparse_attention_path(const SparseAttentionParams& p);

size_t sparse_attention_workspace_size(const SparseAttentionParams& p);
Status sparse_attention(const SparseAttentionParams& p, Workspace ws, cudaStream_t stream);
Status qsa_pool(const QsaPoolParams& p, cudaStream_t stream);
Status qsa_expand(const QsaExpandParams& p, cudaStream_t stream);
size_t qsa_sparse_gqa_workspace_size(const QsaSparseGqaParams& p);
Status qsa_sparse_gqa(const QsaSparseGqaParams& p, Workspace ws, cudaStream_t stream);
Status dsa_output_gate(const DsaOutputGateParams& p, cudaStream_t stream);
size_t mla_head_proj_workspace_size(const MlaHeadProjParams& p);
Status mla_head_proj(const MlaHeadProjParams& p, Workspace ws, cudaStream_t stream);

}  // namespace sieve::cuda
