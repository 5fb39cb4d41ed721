// The cpu backend's sparse attention (ops/sparse_attention.h): validation, the work split over the thread
// pool and the workspace, around two register-tiled kernels chosen by the layout:
//   MQA path  v_dim = qk_dim (K = V), main and extra lists of f32 | fp8_model1 rows: dsv4_kernels.h
//             sparse_mqa_block (DeepSeek-V4, deepseek_v4.md §3.8)
//   MLA path  otherwise: V = the first v_dim values, the main list only, f32 | fp8_v32 entries:
//             dsa_kernels.h sparse_mla_heads (DSA on MLA, dsa_mla.md §2.5, §2.8)
// Other combinations have no cpu kernel (unsupported). Internal to backends/cpu; cpu_backend.cpp forwards
// its Backend methods here.
#pragma once

#include <cstddef>

#include "sieve/backends/backend.h"
#include "backends/cpu/dsa_kernels.h"
#include "backends/cpu/dsv4_kernels.h"
#include "core/thread_pool.h"
#include "sieve/ops/sparse_attention.h"

namespace sieve::cpu {

// The kernels of the backend's ISA level: the MQA path's table and the MLA path's table.
struct SparseAttentionKernels {
    const CpuDsv4Kernels* mqa;
    const DsaCpuKernels* mla;
};

size_t sparse_attention_workspace_size(const SparseAttentionKernels& k, const ThreadPool& pool,
                                       const SparseAttentionParams& p);
Status sparse_attention(const SparseAttentionKernels& k, ThreadPool& pool, const SparseAttentionParams& p,
                        Workspace ws);

}  // namespace sieve::cpu
