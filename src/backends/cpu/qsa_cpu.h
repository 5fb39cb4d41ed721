// The cpu backend's QSA ops: validation, thread split and workspace carving around the per-ISA
// kernel table (qsa_kernels.h), plus the expansion (integer work, no vector kernel). Called by the
// CpuBackend methods; internal to backends/cpu.
#pragma once

#include <cstddef>

#include "sieve/backends/backend.h"
#include "core/cpu_features.h"
#include "core/thread_pool.h"
#include "sieve/ops/qsa_expand.h"
#include "sieve/ops/qsa_pool.h"
#include "sieve/ops/qsa_sparse_gqa.h"

namespace sieve::cpu {

struct QsaKernels;
const QsaKernels& qsa_kernels_for(Isa isa);

Status qsa_pool_run(const QsaKernels& k, ThreadPool& pool, const QsaPoolParams& p);
Status qsa_expand_run(ThreadPool& pool, const QsaExpandParams& p);
size_t qsa_sparse_gqa_workspace_size(const QsaKernels& k, const ThreadPool& pool, const QsaSparseGqaParams& p);
Status qsa_sparse_gqa_run(const QsaKernels& k, ThreadPool& pool, const QsaSparseGqaParams& p, Workspace ws);

}  // namespace sieve::cpu
