#include "sieve/kv/block_allocator.h"

#include "core/assert.h"

namespace sieve {

BlockAllocator::BlockAllocator(int64_t num_blocks) : in_use_(static_cast<size_t>(num_blocks), false) {
    SIEVE_ASSERT(num_blocks >= 0 && num_blocks <= INT32_MAX);
    free_list_.reserve(static_cast<size_t>(num_blocks));
    for (int64_t b = num_blocks; b-- > 0;) free_list_.push_back(static_cast<int32_t>(b));  // block 0 first
}

Expected<int32_t> BlockAllocator::allocate(std::string_view pool_name) {
    if (free_list_.empty())
        return out_of_memory_error("cache pool {} is exhausted ({} blocks, all in use)", pool_name, total_blocks());
    const int32_t b = free_list_.back();
    free_list_.pop_back();
    in_use_[static_cast<size_t>(b)] = true;
    return b;
}

void BlockAllocator::free(int32_t block) {
    SIEVE_ASSERT(block >= 0 && block < total_blocks(), "block id out of range");
    SIEVE_ASSERT(in_use_[static_cast<size_t>(block)], "block freed twice");
    in_use_[static_cast<size_t>(block)] = false;
    free_list_.push_back(block);
}

}  // namespace sieve
