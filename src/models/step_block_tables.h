// A cache group's block tables for the requests of one step, packed the way ops read them
// (ops/block_tables.h BlockTables; deepseek_v4.md §5 "Batch metadata", qsa.md §6 "block_table"): built on
// the host once per step, then uploaded.
#pragma once

#include <cstdint>
#include <vector>

#include "kv/paged_cache.h"
#include "kv/step_batch.h"

namespace sieve {

// table = [n_requests, stride]: row q is the block table of batch.requests[q], −1 past its end. Returns
// the stride: the longest table of the step, at least 1.
int64_t pack_block_tables(const StepBatch& batch, const CacheGroup& group, std::vector<int32_t>& table);

}  // namespace sieve
