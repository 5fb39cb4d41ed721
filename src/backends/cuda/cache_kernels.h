// The cache writes and reads (ops/cache_store.h, ops/kv_load.h) and DeepSeek-V4's compressor (ops/compressor.h), over paged caches of every record format (ops/cache_record.h).
// Each launcher enqueues on `stream`; the backend has validated the params (cuda_backend.cpp), whose
// pointers are device addresses.
#pragma once

#include <cstddef>

#include <cuda_runtime_api.h>

#include "sieve/backends/backend.h"
#include "sieve/core/status.h"
#include "sieve/ops/cache_store.h"
#include "sieve/ops/kv_load.h"
#include "sieve/ops/compressor.h"

namespace sieve::cuda {

Status cache_store(const CacheStoreParams& p, cudaStream_t stream);
Status kv_load(const KvLoadParams& p, cudaStream_t stream);
Status compressor_state_store(const CompressorStateStoreParams& p, cudaStream_t stream);
Status compressor_pool(const CompressorPoolParams& p, cudaStream_t stream);

}  // namespace sieve::cuda
