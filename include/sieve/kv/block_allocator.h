// Fixed-size block ids of one cache group: allocation, freeing and accounting. Blocks are plain
// ids; the storage they index lives in the group's per-layer buffers (kv/paged_cache.h).
#pragma once

#include <cstdint>
#include <vector>

#include "sieve/core/status.h"

namespace sieve {

class BlockAllocator {
public:
    explicit BlockAllocator(int64_t num_blocks);

    // A free block id, or out_of_memory (naming `pool_name`) when none is left.
    Expected<int32_t> allocate(std::string_view pool_name);
    // Returns a block allocated before; freeing twice or an unknown id is a bug (asserted).
    void free(int32_t block);

    int64_t total_blocks() const { return static_cast<int64_t>(in_use_.size()); }
    int64_t free_blocks() const { return static_cast<int64_t>(free_list_.size()); }
    int64_t used_blocks() const { return total_blocks() - free_blocks(); }

private:
    std::vector<int32_t> free_list_;  // LIFO: recently freed blocks are reused first (warm cache)
    std::vector<bool> in_use_;
};

}  // namespace sieve
