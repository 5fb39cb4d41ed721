#include "sieve/runtime/cache_pools.h"

#include <algorithm>

#include <fmt/format.h>

namespace sieve {

namespace {

// The blocks of a group's pool: blocks_per_group, or enough for the token budget plus one partial
// block per request of a step. A pool numbers its blocks with int32 (kv/block_allocator.h).
Expected<int64_t> pool_blocks(const CacheGroupDesc& d, const CachePoolOptions& o) {
    if (d.block_size < 1 || d.spec.tokens_per_entry < 1)
        return internal_error("cache group {}: block size {}, {} tokens per entry", d.name, d.block_size,
                              d.spec.tokens_per_entry);
    int64_t blocks = o.blocks_per_group;
    if (blocks == 0) {
        const int64_t entries = o.cache_budget_tokens / d.spec.tokens_per_entry;
        const int64_t budget_blocks = entries / d.block_size + (entries % d.block_size != 0);
        if (__builtin_add_overflow(budget_blocks, o.max_requests_per_step, &blocks)) blocks = INT64_MAX;
    }
    if (blocks > INT32_MAX)
        return out_of_memory_error("cache {}: {} blocks (a budget of {} tokens), more than the {} a pool can number",
                                   d.name, blocks, o.cache_budget_tokens, INT32_MAX);
    return blocks;
}

// The bytes of a group's pools, all layers, before kv/paged_cache aligns each block to 64 bytes.
Expected<int64_t> pool_bytes(const CacheGroupDesc& d, int64_t blocks) {
    int64_t bytes = 0;
    if (__builtin_mul_overflow(d.block_size, d.spec.entry_bytes, &bytes) ||
        __builtin_mul_overflow(bytes, std::max<int64_t>(blocks, 1), &bytes) ||
        __builtin_mul_overflow(bytes, d.n_layers(), &bytes))
        return out_of_memory_error(
            "cache {}: {} blocks of {} entries of {} B in {} layers: more bytes than int64 holds", d.name, blocks,
            d.block_size, d.spec.entry_bytes, d.n_layers());
    return bytes;
}

double gigabytes(int64_t bytes) { return static_cast<double>(bytes) / 1e9; }

}  // namespace

Expected<std::unique_ptr<CachePools>> CachePools::create(AttentionModel& model, const CachePoolOptions& options) {
    if (options.blocks_per_group < 0 || options.cache_budget_tokens < 0 || options.max_cache_bytes < 0 ||
        options.max_requests_per_step < 0)
        return invalid_argument_error(
            "{} blocks per group, a cache budget of {} tokens, {} requests per step, max_cache_bytes {}: none may be "
            "negative",
            options.blocks_per_group, options.cache_budget_tokens, options.max_requests_per_step,
            options.max_cache_bytes);
    const std::vector<CacheGroupDesc> descs = model.cache_groups();
    std::vector<int64_t> blocks;
    int64_t total_bytes = 0;
    for (const CacheGroupDesc& d : descs) {
        SIEVE_ASSIGN_OR_RETURN(const int64_t b, pool_blocks(d, options));
        SIEVE_ASSIGN_OR_RETURN(const int64_t bytes, pool_bytes(d, b));
        if (__builtin_add_overflow(total_bytes, bytes, &total_bytes))
            return out_of_memory_error("the cache pools need more bytes than int64 holds (a budget of {} tokens)",
                                       options.cache_budget_tokens);
        blocks.push_back(b);
    }
    if (options.max_cache_bytes > 0 && total_bytes > options.max_cache_bytes)
        return out_of_memory_error("the cache pools need {:.1f} GB (a budget of {} tokens in {} group(s)), more than "
                                   "max_cache_bytes = {:.1f} GB",
                                   gigabytes(total_bytes), options.cache_budget_tokens, descs.size(),
                                   gigabytes(options.max_cache_bytes));
    std::unique_ptr<CachePools> pools(new CachePools());
    for (size_t i = 0; i < descs.size(); ++i) {
        const CacheGroupDesc& d = descs[i];
        SIEVE_ASSIGN_OR_RETURN(auto group,
                               CacheGroup::create(model.backend(), d.name, d.spec, d.block_size, blocks[i], d.n_layers()));
        pools->groups_.push_back(std::move(group));
    }
    std::vector<CacheGroup*> groups;
    for (const auto& g : pools->groups_) groups.push_back(g.get());
    pools->prefix_ = std::make_unique<PrefixCache>(std::move(groups));
    return pools;
}

Expected<std::unique_ptr<CachePools>> CachePools::adopt(AttentionModel& model, std::vector<AdoptedCacheGroup> groups) {
    const std::vector<CacheGroupDesc> descs = model.cache_groups();
    std::unique_ptr<CachePools> pools(new CachePools());
    pools->adopted_ = true;
    for (const CacheGroupDesc& d : descs) {
        auto it = std::find_if(groups.begin(), groups.end(), [&](const AdoptedCacheGroup& g) { return g.name == d.name; });
        if (it == groups.end()) return invalid_argument_error("cache group {} of {}: no storage given", d.name, model.model_type());
        if (static_cast<int64_t>(it->layers.size()) != d.n_layers())
            return invalid_argument_error("cache group {}: {} layer buffers given, the model has {} layers in it", d.name,
                                          it->layers.size(), d.n_layers());
        SIEVE_ASSIGN_OR_RETURN(auto group, CacheGroup::adopt(model.backend(), d.name, d.spec, d.block_size,
                                                             it->num_blocks, it->block_bytes, std::move(it->layers)));
        pools->groups_.push_back(std::move(group));
        groups.erase(it);
    }
    if (!groups.empty())
        return invalid_argument_error("cache group {}: {} has no such group", groups.front().name, model.model_type());
    return pools;
}

Status CachePools::set_block_table(std::string_view group, RequestId id, std::vector<int32_t> table) {
    for (auto& g : groups_)
        if (g->name() == group) return g->set_block_table(id, std::move(table));
    return invalid_argument_error("no cache group {}", group);
}

StepCaches CachePools::step_caches() const {
    StepCaches caches;
    for (const auto& g : groups_) caches.groups.push_back(g.get());
    return caches;
}

int64_t CachePools::storage_bytes() const {
    int64_t bytes = 0;
    for (const auto& g : groups_) bytes += g->storage_bytes();
    return bytes;
}

Status CachePools::reserve(const StepRequest& r) {
    for (auto& g : groups_) {
        Status s = g->reserve(r.id, g->entries_for_tokens(r.end()));
        while (s.code() == StatusCode::out_of_memory && prefix_ && prefix_->evict_one())
            s = g->reserve(r.id, g->entries_for_tokens(r.end()));
        if (!s.is_ok()) return s.with_context(fmt::format("request {} at position {}", r.id, r.end()));
    }
    return Status::ok();
}

void CachePools::after_step(RequestId id, int64_t tokens_done) {
    for (auto& g : groups_) {
        const CacheSpec& spec = g->spec();
        if (spec.window_tokens > 0)
            g->release_before(id, std::max<int64_t>(0, tokens_done - spec.window_tokens) / spec.tokens_per_entry);
    }
}

void CachePools::free_request(RequestId id) {
    for (auto& g : groups_) g->free_request(id);
}

}  // namespace sieve
