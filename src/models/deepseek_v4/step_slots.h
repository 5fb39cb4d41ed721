// The slot lists of a DeepSeek-V4 step, built on the host once per step (deepseek_v4.md §5 "Batch
// metadata"; step_plan.h uploads them): where each token's rows go and which cache rows each token reads,
// resolved through a cache group's block tables (kv/paged_cache.h: slot = block_table[entry / B] · B +
// entry % B). An entry the step needs but the runtime did not keep resident is an internal error naming
// the cache, request and entry. And how a layer binds its storage in a group.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "sieve/core/status.h"
#include "sieve/kv/step_batch.h"
#include "sieve/ops/cache_store.h"
#include "sieve/ops/cache_view.h"

namespace sieve::dsv4 {

// Which cache group a layer uses and its storage in it.
struct CacheBinding {
    std::string group;       // CacheGroupDesc name
    int64_t layer_slot = 0;  // the layer's storage in the group
};

struct BoundCache {
    CacheView view;       // the layer's storage in the group
    int64_t n_slots = 0;  // the group's n_slots(): the bound of every slot into `view`
};
Expected<BoundCache> bind_cache(const StepBatch& batch, const CacheBinding& binding);

// The store of n_rows rows x [n_rows, layout.dim] (row stride x_row_stride, x_type) into entries slots
// [n_rows] of `cache`: every V4 cache of records (window, compressed, indexer keys). FP8 rows are rounded to
// bf16 first: vLLM quantizes the bf16 row (§3.2 "bf16 round-trip + UE8M0 FP8 quant", §4.3).
CacheStoreParams record_store(const void* x, DType x_type, int64_t x_row_stride, int64_t n_rows, const int32_t* slots,
                              const BoundCache& cache, const CacheRecordLayout& layout);

// token_slots (kv/step_batch.h) gives each token's own slot (SWA rows, compressor state rows).

// out[t, j] = slot of position p_t − window + 1 + j, −1 for positions < 0: the sliding window, oldest
// first, the token itself last (§3.2: w entries including the query's own token).
// out: [n_tokens, window]
Status window_slots(const StepBatch& batch, const CacheGroup& cache, int64_t window, int32_t* out);

// Tokens that complete a compressed entry ((p + 1) mod m = 0, §3.4 "Post-processing").
int64_t count_emissions(const StepBatch& batch, int64_t ratio);

// For each emitting token (in token order), entry k = (p + 1)/m − 1:
//   gather[e, j]      = state slot of position p − coff·m + 1 + j (−1 below 0), j < coff·m   [n_emit, coff·m]
//   entry_slots[e]    = slot of entry k in the destination cache                               [n_emit]
//   entry_positions[e] = k·m, the RoPE position of the entry (§3.4)                             [n_emit]
Status emission_slots(const StepBatch& batch, const CacheGroup& state, const CacheGroup& dest, int64_t ratio,
                      bool overlap, int32_t* gather, int32_t* entry_slots, int64_t* entry_positions);

// Checks that every entry a token of the step may read, k < ⌊(p_t + 1)/m⌋ (§3.5, §3.6), is resident:
// entries 0 … ⌊end/m⌋ − 1 of each request. Errors as the lists above.
Status check_visible_entries(const StepBatch& batch, const CacheGroup& cache, int64_t ratio);

// The most entries a request of the step holds after it: max_r ⌊end_r/m⌋.
int64_t max_request_entries(const StepBatch& batch, int64_t ratio);

}  // namespace sieve::dsv4
