// Fixed-size block ids of one cache group: allocation, reference counts and accounting. Blocks are
// plain ids; the storage they index lives in the group's per-layer buffers (kv/paged_cache.h). A block
// has one reference per holder (a request's block table, the prefix cache) and returns to the free list
// when its last holder lets it go.
#pragma once

#include <cstdint>
#include <string_view>
#include <vector>

#include "sieve/core/status.h"

namespace sieve {

class BlockAllocator {
public:
    explicit BlockAllocator(int64_t num_blocks);

    // A free block id with one reference, or out_of_memory (naming `pool_name`) when none is left.
    Expected<int32_t> allocate(std::string_view pool_name);
    // Another holder of a block in use.
    void retain(int32_t block);
    // Drops one reference to a block in use; the last one frees it. Freeing a free or unknown id is a
    // bug (asserted).
    void free(int32_t block);

    int64_t total_blocks() const { return static_cast<int64_t>(references_.size()); }
    int64_t free_blocks() const { return static_cast<int64_t>(free_list_.size()); }
    int64_t used_blocks() const { return total_blocks() - free_blocks(); }
    int32_t references(int32_t block) const;  // 0 for a free block

private:
    std::vector<int32_t> free_list_;  // LIFO: recently freed blocks are reused first (warm cache)
    std::vector<int32_t> references_;
};

}  // namespace sieve
