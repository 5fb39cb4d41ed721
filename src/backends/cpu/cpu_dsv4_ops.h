// The cpu backend's DeepSeek-V4 ops (ops/sparse_mqa.h, ops/compressor.h): validation, threading and
// workspace handling around the per-ISA kernels of dsv4_kernels.h (attention) and the portable code of
// cpu_dsv4_ops.cpp (compressor state and pooling: a few rows per step, memory-bound). The cache stores and loads are cpu_cache_ops.h's.
// Internal to backends/cpu; cpu_backend.cpp forwards its Backend methods here.
#pragma once

#include <cstddef>

#include "backends/backend.h"
#include "backends/cpu/dsv4_kernels.h"
#include "backends/cpu/kernels.h"
#include "core/cpu_features.h"
#include "core/thread_pool.h"
#include "ops/compressor.h"
#include "ops/sparse_mqa.h"

namespace sieve::cpu {

// The table of an ISA level (avx512_bf16 uses the avx512 one: these kernels need no bf16 dot).
const CpuDsv4Kernels& dsv4_kernels_for(Isa isa);

Status dsv4_compressor_state_store(ThreadPool& pool, const CompressorStateStoreParams& p);
Status dsv4_compressor_pool(ThreadPool& pool, const CompressorPoolParams& p);

size_t dsv4_sparse_mqa_workspace_size(const ThreadPool& pool, const SparseMqaParams& p);
Status dsv4_sparse_mqa(const CpuDsv4Kernels& k, ThreadPool& pool, const SparseMqaParams& p, Workspace ws);

}  // namespace sieve::cpu
