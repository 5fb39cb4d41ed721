// The cpu backend's DSA-on-MLA ops (ops/dsa_output_gate.h, ops/mla_head_proj.h; the sparse attention's MLA
// kernel is dispatched by cpu_sparse_attention.cpp): validation, work split over the thread pool, workspace
// slots, and the gate (baseline code: byte-exact with ref through core's conversions). The heavy loops are the per-ISA kernels of dsa_kernels.h.
// The cache writes are cpu_cache_ops.h's. Internal to backends/cpu.
#pragma once

#include <cstddef>

#include "sieve/backends/backend.h"
#include "backends/cpu/dsa_kernels.h"
#include "backends/cpu/kernels.h"
#include "core/cpu_features.h"
#include "core/thread_pool.h"
#include "sieve/ops/dsa_output_gate.h"
#include "sieve/ops/mla_head_proj.h"

namespace sieve::cpu {

struct DsaCpuContext {
    const DsaCpuKernels* kernels;
    ThreadPool* pool;
};

const DsaCpuKernels& dsa_kernels_for(Isa isa);

Status dsa_output_gate(const DsaCpuContext& c, const DsaOutputGateParams& p);
size_t dsa_mla_head_proj_workspace_size(const DsaCpuContext& c, const MlaHeadProjParams& p);
Status dsa_mla_head_proj(const DsaCpuContext& c, const MlaHeadProjParams& p, Workspace ws);

}  // namespace sieve::cpu
