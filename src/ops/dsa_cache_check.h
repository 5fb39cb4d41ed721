// Checks of a paged cache view shared by the DSA-on-MLA cache ops (ops/sparse_mla.h,
// ops/dsa_indexer.h): the view's geometry agrees with the entry format and the slot count.
#pragma once

#include <cstdint>
#include <string_view>

#include "core/status.h"
#include "ops/cache_view.h"

namespace sieve::dsa_check {

// block_size ≥ 1, entry_bytes as the format says, block_bytes ≥ block_size · entry_bytes, n_slots a
// multiple of block_size whose byte extent fits int64, base non-null when n_slots > 0.
Status cache_view(std::string_view op, const CacheView& cache, int64_t expected_entry_bytes, int64_t n_slots);

}  // namespace sieve::dsa_check
