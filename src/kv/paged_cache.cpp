#include "sieve/kv/paged_cache.h"

#include <algorithm>

#include "core/assert.h"

namespace sieve {

CacheGroup::CacheGroup(Backend& backend, std::string name, CacheSpec spec, int64_t block_size, int64_t num_blocks,
                       int64_t n_layers)
    : backend_(backend),
      name_(std::move(name)),
      spec_(std::move(spec)),
      block_size_(block_size),
      // Blocks start at 64-byte boundaries, as kernels' vector loads of a block's first entry expect.
      block_bytes_((block_size * spec_.entry_bytes + static_cast<int64_t>(kBufferAlignment) - 1) /
                   static_cast<int64_t>(kBufferAlignment) * static_cast<int64_t>(kBufferAlignment)),
      n_layers_(n_layers),
      allocator_(num_blocks) {}

Expected<std::unique_ptr<CacheGroup>> CacheGroup::create(Backend& backend, std::string name, CacheSpec spec,
                                                         int64_t block_size, int64_t num_blocks, int64_t n_layers) {
    if (block_size <= 0 || num_blocks < 0 || n_layers < 0 || spec.entry_bytes <= 0 || spec.tokens_per_entry <= 0)
        return invalid_argument_error("cache {}: block size {}, {} blocks, {} layers, entry {} B: invalid geometry",
                                      name, block_size, num_blocks, n_layers, spec.entry_bytes);
    std::unique_ptr<CacheGroup> group(
        new CacheGroup(backend, std::move(name), std::move(spec), block_size, num_blocks, n_layers));
    const int64_t bytes = group->block_bytes_ * std::max<int64_t>(num_blocks, 1);
    for (int64_t l = 0; l < n_layers; ++l) {
        SIEVE_ASSIGN_OR_RETURN(auto buffer,
                               backend.buffer_alloc(static_cast<size_t>(bytes), BufferUsage::cache,
                                                    fmt::format("cache {} layer {}", group->name_, l)));
        group->storage_.push_back(std::move(buffer));
    }
    return group;
}

Expected<std::unique_ptr<CacheGroup>> CacheGroup::adopt(Backend& backend, std::string name, CacheSpec spec,
                                                        int64_t block_size, int64_t num_blocks, int64_t block_bytes,
                                                        std::vector<std::unique_ptr<DeviceBuffer>> layers) {
    if (block_size <= 0 || num_blocks <= 0 || num_blocks > INT32_MAX || spec.entry_bytes <= 0 ||
        spec.tokens_per_entry <= 0)
        return invalid_argument_error("cache {}: block size {}, {} blocks, entry {} B: invalid geometry", name,
                                      block_size, num_blocks, spec.entry_bytes);
    if (block_bytes < block_size * spec.entry_bytes || block_bytes % static_cast<int64_t>(kBufferAlignment) != 0)
        return invalid_argument_error(
            "cache {}: blocks of {} bytes; {} entries of {} B need at least {}, in a multiple of {} bytes", name,
            block_bytes, block_size, spec.entry_bytes, block_size * spec.entry_bytes, kBufferAlignment);
    const auto n_layers = static_cast<int64_t>(layers.size());
    std::unique_ptr<CacheGroup> group(
        new CacheGroup(backend, std::move(name), std::move(spec), block_size, num_blocks, n_layers));
    group->block_bytes_ = block_bytes;
    group->adopted_ = true;
    // The last block needs only its entries: an engine's view of one layer ends there.
    const int64_t needed = (num_blocks - 1) * block_bytes + block_size * group->spec_.entry_bytes;
    for (int64_t l = 0; l < n_layers; ++l) {
        const DeviceBuffer& b = *layers[static_cast<size_t>(l)];
        if (&b.device() != &backend.device() || static_cast<int64_t>(b.bytes()) < needed)
            return invalid_argument_error("cache {} layer {}: a buffer of {} bytes on {}, expected {} bytes on {}",
                                          group->name_, l, b.bytes(), b.device().name, needed, backend.device().name);
    }
    group->storage_ = std::move(layers);
    return group;
}

Status CacheGroup::set_block_table(RequestId request, std::vector<int32_t> table) {
    if (!adopted_)
        return invalid_argument_error("cache {}: its blocks are sieve's; only an adopted group takes a caller's table",
                                      name_);
    const int64_t n = allocator_.total_blocks();
    for (size_t i = 0; i < table.size(); ++i)
        if (table[i] < -1 || table[i] >= n)
            return invalid_argument_error("cache {}: request {}'s block table holds block {} at {}, expected −1 or a "
                                          "block in [0, {})",
                                          name_, request, table[i], i, n);
    tables_[request] = std::move(table);
    return Status::ok();
}

int64_t CacheGroup::storage_bytes() const { return block_bytes_ * allocator_.total_blocks() * n_layers_; }

CacheView CacheGroup::view(int64_t layer_slot) const {
    SIEVE_ASSERT(layer_slot >= 0 && layer_slot < n_layers_);
    return CacheView{storage_[static_cast<size_t>(layer_slot)]->as<uint8_t>(), block_bytes_, block_size_,
                     spec_.entry_bytes};
}

Status CacheGroup::copy_block(int64_t layer_slot, int32_t dst_block, int32_t src_block) {
    SIEVE_ASSERT(layer_slot >= 0 && layer_slot < n_layers_);
    const int64_t n = allocator_.total_blocks();
    if (dst_block < 0 || dst_block >= n || src_block < 0 || src_block >= n)
        return invalid_argument_error("cache {}: copy of block {} over block {}, expected blocks in [0, {})", name_,
                                      src_block, dst_block, n);
    if (dst_block == src_block) return Status::ok();
    DeviceBuffer& storage = *storage_[static_cast<size_t>(layer_slot)];
    const auto bytes = static_cast<size_t>(block_bytes_);
    return backend_.buffer_copy(storage, static_cast<size_t>(dst_block) * bytes, storage,
                                static_cast<size_t>(src_block) * bytes, bytes);
}

Status CacheGroup::share_blocks(RequestId request, const std::vector<int32_t>& blocks) {
    if (adopted_) return invalid_argument_error("cache {}: an adopted group's blocks are the caller's to share", name_);
    if (has_request(request))
        return invalid_argument_error("cache {}: request {} already holds blocks; shared blocks start a request", name_,
                                      request);
    for (int32_t b : blocks)
        if (b < -1 || b >= allocator_.total_blocks() || (b >= 0 && allocator_.references(b) == 0))
            return invalid_argument_error("cache {}: block {} is not in use; only blocks in use can be shared", name_, b);
    for (int32_t b : blocks)
        if (b >= 0) allocator_.retain(b);
    tables_[request] = blocks;
    return Status::ok();
}

Status CacheGroup::reserve(RequestId request, int64_t n_entries) {
    std::vector<int32_t>& table = tables_[request];
    const int64_t blocks_needed = (n_entries + block_size_ - 1) / block_size_;
    if (adopted_) {
        if (static_cast<int64_t>(table.size()) < blocks_needed)
            return invalid_argument_error("cache {}: request {}'s block table has {} blocks; its {} entries need {}",
                                          name_, request, table.size(), n_entries, blocks_needed);
        return Status::ok();
    }
    const size_t old_size = table.size();
    while (static_cast<int64_t>(table.size()) < blocks_needed) {
        auto block = allocator_.allocate(name_);
        if (!block) {
            for (size_t i = old_size; i < table.size(); ++i) allocator_.free(table[i]);
            table.resize(old_size);
            return block.status();
        }
        table.push_back(*block);
    }
    return Status::ok();
}

void CacheGroup::release_before(RequestId request, int64_t first_needed_entry) {
    auto it = tables_.find(request);
    if (it == tables_.end() || adopted_) return;
    const int64_t whole_blocks = std::min<int64_t>(first_needed_entry / block_size_, it->second.size());
    // Released blocks are always a prefix of the table (only this call releases, and it releases a
    // prefix), so walk back from the last block to free until the first released one: each call
    // costs the blocks it frees, not the whole history (a long decode calls this every step).
    for (int64_t b = whole_blocks - 1; b >= 0; --b) {
        int32_t& block = it->second[static_cast<size_t>(b)];
        if (block < 0) break;
        allocator_.free(block);
        block = -1;
    }
}

void CacheGroup::free_request(RequestId request) {
    auto it = tables_.find(request);
    if (it == tables_.end()) return;
    if (!adopted_)
        for (int32_t block : it->second)
            if (block >= 0) allocator_.free(block);
    tables_.erase(it);
}

int64_t CacheGroup::slot(RequestId request, int64_t entry) const {
    auto it = tables_.find(request);
    if (it == tables_.end() || entry < 0) return -1;
    const int64_t b = entry / block_size_;
    if (b >= static_cast<int64_t>(it->second.size())) return -1;
    const int32_t block = it->second[static_cast<size_t>(b)];
    return block < 0 ? -1 : static_cast<int64_t>(block) * block_size_ + entry % block_size_;
}

const std::vector<int32_t>& CacheGroup::block_table(RequestId request) const {
    static const std::vector<int32_t> kEmpty;
    auto it = tables_.find(request);
    return it == tables_.end() ? kEmpty : it->second;
}

}  // namespace sieve
