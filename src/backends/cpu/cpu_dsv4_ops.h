// The cpu backend's DeepSeek-V4 ops (ops/compressor.h): validation, threading and workspace handling
// around the portable code of cpu_dsv4_ops.cpp (compressor state and pooling: a few rows per step,
// memory-bound), and the table of its per-ISA kernels (dsv4_kernels.h: the sparse attention's MQA kernel,
// dispatched by cpu_sparse_attention.cpp). The cache stores and loads are cpu_cache_ops.h's.
// Internal to backends/cpu; cpu_backend.cpp forwards its Backend methods here.
#pragma once

#include <cstddef>

#include "sieve/backends/backend.h"
#include "backends/cpu/dsv4_kernels.h"
#include "backends/cpu/kernels.h"
#include "core/cpu_features.h"
#include "core/thread_pool.h"
#include "sieve/ops/cache_record.h"
#include "sieve/ops/compressor.h"

namespace sieve::cpu {

// A cache of f32 or fp8_model1 records as the kernels of dsv4_kernels.h read it (the formats the sparse
// attention's MQA path admits; ops/cache_record.h layouts, precomputed).
RecordCache record_cache(const CacheView& v, const CacheRecordLayout& l);

// The table of an ISA level (avx512_bf16 uses the avx512 one: these kernels need no bf16 dot).
const CpuDsv4Kernels& dsv4_kernels_for(Isa isa);

Status dsv4_compressor_state_store(ThreadPool& pool, const CompressorStateStoreParams& p);
Status dsv4_compressor_pool(ThreadPool& pool, const CompressorPoolParams& p);

}  // namespace sieve::cpu
