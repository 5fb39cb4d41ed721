// One cache group: the layers that keep the same kind of cache (same CacheSpec) share a block
// allocator and per-request block tables; each layer has its own storage (vLLM's KV cache groups,
// specs/deepseek_v4.md §4.2, §5).
//
// Entries are numbered per request: entry e is position e for per-token caches, compressed entry
// k for caches with one entry per m tokens. A request's block table maps logical block e / B to a
// physical block (−1 once a windowed cache has released it). A windowed cache frees, after each
// step, the blocks whose entries all lie before the window that the next token can still see.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "sieve/backends/backend.h"
#include "sieve/core/status.h"
#include "sieve/kv/block_allocator.h"
#include "sieve/kv/cache_spec.h"
#include "sieve/ops/cache_view.h"

namespace sieve {

using RequestId = int64_t;

class CacheGroup {
public:
    // `n_layers` storages of `num_blocks` blocks of `block_size` entries, in buffers of `backend`
    // (zeroed: a kernel bug reading an unwritten slot sees zeros, not stale data).
    static Expected<std::unique_ptr<CacheGroup>> create(Backend& backend, std::string name, CacheSpec spec,
                                                        int64_t block_size, int64_t num_blocks, int64_t n_layers);

    // A group over storage and blocks an inference engine owns (its KV cache tensors and block tables,
    // as vLLM keeps them): `layers` [n_layers] are buffers of `backend` over the caller's memory
    // (Backend::buffer_wrap), each `num_blocks` blocks of `block_bytes` bytes (≥ block_size · entry_bytes,
    // a multiple of 64: the engine may interleave other pages between two blocks). The caller assigns the
    // blocks: set_block_table() installs a request's table for the coming step, reserve() only checks
    // that it covers the entries, release_before() leaves the blocks to the caller and free_request()
    // forgets the table.
    static Expected<std::unique_ptr<CacheGroup>> adopt(Backend& backend, std::string name, CacheSpec spec,
                                                       int64_t block_size, int64_t num_blocks, int64_t block_bytes,
                                                       std::vector<std::unique_ptr<DeviceBuffer>> layers);
    bool adopted() const { return adopted_; }
    // Adopted groups: request's block table (block ids in [0, num_blocks), −1 for a block the request
    // no longer needs), replacing any earlier one.
    Status set_block_table(RequestId request, std::vector<int32_t> table);

    const std::string& name() const { return name_; }
    const CacheSpec& spec() const { return spec_; }
    int64_t block_size() const { return block_size_; }
    int64_t block_bytes() const { return block_bytes_; }
    int64_t n_layers() const { return n_layers_; }
    const BlockAllocator& allocator() const { return allocator_; }
    int64_t storage_bytes() const;  // all layers
    // Slots of one layer's storage (num_blocks · block_size): every slot a cache op addresses is below.
    int64_t n_slots() const { return allocator_.total_blocks() * block_size_; }

    // The view of layer `layer_slot`'s storage (0 ≤ layer_slot < n_layers): device addresses.
    CacheView view(int64_t layer_slot) const;

    // Entries a request holds after it has seen `tokens` tokens (whole entries only).
    int64_t entries_for_tokens(int64_t tokens) const { return tokens / spec_.tokens_per_entry; }

    // Makes entries [0, n_entries) addressable (blocks already released stay released). All or
    // nothing: on out_of_memory no block stays allocated by this call. Adopted groups: checks that the
    // caller's table covers them.
    Status reserve(RequestId request, int64_t n_entries);
    // Windowed caches: frees the blocks whose entries all precede `first_needed_entry`.
    void release_before(RequestId request, int64_t first_needed_entry);
    // Frees every block of the request.
    void free_request(RequestId request);
    bool has_request(RequestId request) const { return tables_.count(request) != 0; }

    // Own pools: installs `blocks` (blocks in use, or −1 where the request needs none: windowed entries it
    // will never see) as the whole table of a request that holds none yet, the request becoming one more
    // holder of each (prefix caching: the blocks of a cached prefix). reserve() then adds blocks after them.
    Status share_blocks(RequestId request, const std::vector<int32_t>& blocks);
    // Own pools: another holder (the prefix cache) of a block in use, and the end of that hold.
    void retain_block(int32_t block) { allocator_.retain(block); }
    void release_block(int32_t block) { allocator_.free(block); }

    // Copies physical block `src_block` over `dst_block` in layer `layer_slot`'s storage, on the device.
    Status copy_block(int64_t layer_slot, int32_t dst_block, int32_t src_block);

    // Global slot of `entry`, −1 if it is not resident.
    int64_t slot(RequestId request, int64_t entry) const;
    const std::vector<int32_t>& block_table(RequestId request) const;

private:
    CacheGroup(Backend& backend, std::string name, CacheSpec spec, int64_t block_size, int64_t num_blocks,
               int64_t n_layers);

    Backend& backend_;
    std::string name_;
    CacheSpec spec_;
    int64_t block_size_;
    int64_t block_bytes_;
    int64_t n_layers_;
    BlockAllocator allocator_;  // adopted groups: only its size (the caller allocates)
    bool adopted_ = false;
    std::vector<std::unique_ptr<DeviceBuffer>> storage_;  // [n_layers]
    std::map<RequestId, std::vector<int32_t>> tables_;
};

}  // namespace sieve
