#include "sieve/kv/block_allocator.h"

#include "core/assert.h"

namespace sieve {

BlockAllocator::BlockAllocator(int64_t num_blocks) : references_(static_cast<size_t>(num_blocks), 0) {
    SIEVE_ASSERT(num_blocks >= 0 && num_blocks <= INT32_MAX);
    free_list_.reserve(static_cast<size_t>(num_blocks));
    for (int64_t b = num_blocks; b-- > 0;) free_list_.push_back(static_cast<int32_t>(b));  // block 0 first
}

Expected<int32_t> BlockAllocator::allocate(std::string_view pool_name) {
    if (free_list_.empty())
        return out_of_memory_error("cache pool {} is exhausted ({} blocks, all in use)", pool_name, total_blocks());
    const int32_t b = free_list_.back();
    free_list_.pop_back();
    references_[static_cast<size_t>(b)] = 1;
    return b;
}

void BlockAllocator::retain(int32_t block) {
    SIEVE_ASSERT(block >= 0 && block < total_blocks(), "block id out of range");
    SIEVE_ASSERT(references_[static_cast<size_t>(block)] > 0, "retain of a free block");
    ++references_[static_cast<size_t>(block)];
}

void BlockAllocator::free(int32_t block) {
    SIEVE_ASSERT(block >= 0 && block < total_blocks(), "block id out of range");
    int32_t& refs = references_[static_cast<size_t>(block)];
    SIEVE_ASSERT(refs > 0, "block freed twice");
    if (--refs == 0) free_list_.push_back(block);
}

int32_t BlockAllocator::references(int32_t block) const {
    SIEVE_ASSERT(block >= 0 && block < total_blocks(), "block id out of range");
    return references_[static_cast<size_t>(block)];
}

}  // namespace sieve
