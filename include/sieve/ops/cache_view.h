// How kernels see a paged cache: storage base (a device address of the backend's cache buffer), block
// geometry and global slot ids (DESIGN.md: "Caches are seen by kernels as plain views"). A slot is
//   slot = block_table[request][entry / block_size] · block_size + entry % block_size
// (kv/paged_cache.h). Some ops take slot lists (−1 = no entry), others a block table and request-local
// entries (indexer scores, QSA); the byte layout of an entry is ops/cache_record.h's.
#pragma once

#include <cstdint>

namespace sieve {

struct CacheView {
    uint8_t* base = nullptr;   // block 0
    int64_t block_bytes = 0;   // stride between blocks (≥ block_size · entry_bytes, 64-B aligned)
    int64_t block_size = 0;    // entries per block
    int64_t entry_bytes = 0;   // bytes of one entry (a row for plain layouts)

    bool empty() const { return base == nullptr; }
    // Address of a plain-row entry (entries stored one after another inside the block). Layouts
    // with a per-block structure (fp8_model1, fp8_row_scale: all data parts, then all scales) use ops/cache_record.h.
    uint8_t* row(int64_t slot) const {
        return base + (slot / block_size) * block_bytes + (slot % block_size) * entry_bytes;
    }
    uint8_t* block(int64_t slot) const { return base + (slot / block_size) * block_bytes; }
};

}  // namespace sieve
