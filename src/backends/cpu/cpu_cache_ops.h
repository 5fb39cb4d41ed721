// The cpu backend's cache ops (ops/cache_store.h, ops/kv_load.h): validation and the row split over
// the thread pool around portable code that addresses entries through ops/cache_record.h and quantizes
// with the kernel table's FP8 group quantizer. A few rows per step, memory-bound. Internal to backends/cpu.
#pragma once

#include "backends/cpu/kernels.h"
#include "sieve/core/status.h"
#include "core/thread_pool.h"
#include "sieve/ops/cache_store.h"
#include "sieve/ops/kv_load.h"
#include "sieve/ops/selected_slots.h"

namespace sieve::cpu {

Status cache_store(const CpuKernels& k, ThreadPool& pool, const CacheStoreParams& p);
Status kv_load(ThreadPool& pool, const KvLoadParams& p);
Status selected_slots(ThreadPool& pool, const SelectedSlotsParams& p);

}  // namespace sieve::cpu
