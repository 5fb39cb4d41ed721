// The cache pools of one model: a CacheGroup per group the model declares, sized for a token budget,
// and the per-request bookkeeping every caller of the model repeats around a step: reserve the entries
// a step writes, then let windowed caches release what the next token no longer sees, and free a
// request's blocks when it ends. The Engine and the LayerStepper both keep their caches here.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "sieve/core/status.h"
#include "sieve/kv/paged_cache.h"
#include "sieve/kv/step_batch.h"
#include "sieve/models/attention_model.h"
#include "sieve/runtime/prefix_cache.h"

namespace sieve {

struct CachePoolOptions {
    // Blocks per cache group; when 0, sized from cache_budget_tokens.
    int64_t blocks_per_group = 0;
    // Enough blocks for this many resident tokens per group (used when blocks_per_group is 0), plus one
    // partial block for each of max_requests_per_step requests.
    int64_t cache_budget_tokens = 1 << 16;
    int64_t max_requests_per_step = 64;
    // Upper bound on the bytes of all pools together (0: none), e.g. the machine's memory.
    int64_t max_cache_bytes = 0;
};

// One cache group over an inference engine's memory (CacheGroup::adopt): the group's name as the model
// declares it, and one buffer per layer of the group (Backend::buffer_wrap of the engine's tensors).
struct AdoptedCacheGroup {
    std::string name;
    int64_t num_blocks = 0;
    int64_t block_bytes = 0;  // the engine's block stride
    std::vector<std::unique_ptr<DeviceBuffer>> layers;
};

class CachePools {
public:
    // Sizes every pool before allocating any: options that would size a pool past what a block table
    // addresses (int32), past int64 or past max_cache_bytes are an error before any allocation.
    static Expected<std::unique_ptr<CachePools>> create(AttentionModel& model, const CachePoolOptions& options);

    // The pools over an engine's memory and blocks: one AdoptedCacheGroup for every group the model
    // declares (cache_groups(): each name once, with as many layers); the engine assigns the blocks
    // (set_block_table before each step).
    static Expected<std::unique_ptr<CachePools>> adopt(AttentionModel& model, std::vector<AdoptedCacheGroup> groups);
    bool adopted() const { return adopted_; }
    Status set_block_table(std::string_view group, RequestId id, std::vector<int32_t> table);

    const std::vector<std::unique_ptr<CacheGroup>>& groups() const { return groups_; }
    // The prefix cache over these pools (runtime/prefix_cache.h); nullptr over adopted pools, whose
    // engine shares prefixes through its own block tables.
    PrefixCache* prefix_cache() const { return prefix_.get(); }
    StepCaches step_caches() const;
    int64_t storage_bytes() const;

    // Makes the entries of every group addressable up to the request's end() (its tokens after the step),
    // evicting cached prefixes while a pool has no free block. All or nothing per group; the error names
    // the request and position.
    Status reserve(const StepRequest& r);
    // After a step in which request `id` reached `tokens_done` tokens: windowed caches free the blocks the
    // next token can no longer see.
    void after_step(RequestId id, int64_t tokens_done);
    void free_request(RequestId id);

private:
    std::vector<std::unique_ptr<CacheGroup>> groups_;
    std::unique_ptr<PrefixCache> prefix_;
    bool adopted_ = false;
};

}  // namespace sieve
