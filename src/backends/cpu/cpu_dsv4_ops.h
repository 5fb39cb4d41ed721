// The cpu backend's DeepSeek-V4 ops (ops/compressor.h, ops/indexer_scores.h): validation, threading and
// workspace handling around the per-ISA kernels of dsv4_kernels.h (indexer scores; the sparse attention's
// MQA kernel is dispatched by cpu_sparse_attention.cpp) and the portable code of cpu_dsv4_ops.cpp
// (compressor state and pooling: a few rows per step, memory-bound). The cache stores and loads are cpu_cache_ops.h's.
// Internal to backends/cpu; cpu_backend.cpp forwards its Backend methods here.
#pragma once

#include <cstddef>

#include "backends/backend.h"
#include "backends/cpu/dsv4_kernels.h"
#include "backends/cpu/kernels.h"
#include "core/cpu_features.h"
#include "core/thread_pool.h"
#include "ops/cache_record.h"
#include "ops/compressor.h"
#include "ops/indexer_scores.h"

namespace sieve::cpu {

// A cache of f32, fp8_model1 or fp8_row_scale records as the kernels of dsv4_kernels.h read it (the formats
// their callers' validate() admitted; ops/cache_record.h layouts, precomputed): the sparse attention's MQA
// path and the indexer scores.
RecordCache record_cache(const CacheView& v, const CacheRecordLayout& l);

// The table of an ISA level (avx512_bf16 uses the avx512 one: these kernels need no bf16 dot).
const CpuDsv4Kernels& dsv4_kernels_for(Isa isa);

Status dsv4_compressor_state_store(ThreadPool& pool, const CompressorStateStoreParams& p);
Status dsv4_compressor_pool(ThreadPool& pool, const CompressorPoolParams& p);

size_t dsv4_indexer_scores_workspace_size(const ThreadPool& pool, const IndexerScoresParams& p);
// `base`: the backend's main kernel table, whose streaming top-k (kernels.h TopkStream) makes the fused
// selection (ops/indexer_scores.h).
Status dsv4_indexer_scores(const CpuDsv4Kernels& k, const CpuKernels& base, ThreadPool& pool,
                           const IndexerScoresParams& p, Workspace ws);

}  // namespace sieve::cpu
