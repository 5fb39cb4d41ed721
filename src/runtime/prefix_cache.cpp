#include "sieve/runtime/prefix_cache.h"

#include <algorithm>
#include <numeric>

namespace sieve {

PrefixCache::PrefixCache(std::vector<CacheGroup*> groups) : groups_(std::move(groups)) {
    for (const CacheGroup* g : groups_)
        chunk_tokens_ = std::lcm(chunk_tokens_, g->block_size() * g->spec().tokens_per_entry);
}

PrefixCache::Chunk* PrefixCache::find(const std::vector<uint64_t>& keys, size_t i) {
    auto it = chunks_.find(keys[i]);
    if (it == chunks_.end()) return nullptr;
    Chunk& c = it->second;
    const bool continues = i == 0 ? c.first : !c.first && c.parent == keys[i - 1];
    return continues ? &c : nullptr;
}

void PrefixCache::touch(uint64_t key, Chunk& chunk) {
    if (chunk.children == 0) leaves_.erase({chunk.last_use, key});
    chunk.last_use = ++clock_;
    if (chunk.children == 0) leaves_.insert({chunk.last_use, key});
}

Expected<int64_t> PrefixCache::attach(RequestId request, const std::vector<uint64_t>& keys, int64_t max_tokens) {
    ++stats_.lookups;
    std::vector<Chunk*> run;  // chunk i is keys[i]'s
    while (run.size() < keys.size() && static_cast<int64_t>(run.size() + 1) * chunk_tokens_ <= max_tokens) {
        Chunk* c = find(keys, run.size());
        if (!c) break;
        run.push_back(c);
    }
    if (run.empty()) return 0;
    const int64_t tokens = static_cast<int64_t>(run.size()) * chunk_tokens_;
    for (size_t g = 0; g < groups_.size(); ++g) {
        CacheGroup& group = *groups_[g];
        const CacheSpec& spec = group.spec();
        std::vector<int32_t> table;
        for (const Chunk* c : run) table.insert(table.end(), c->blocks[g].begin(), c->blocks[g].end());
        if (spec.window_tokens > 0) {  // blocks wholly before what the first token sees stay with the cache
            const int64_t first_seen = std::max<int64_t>(0, tokens - spec.window_tokens) / spec.tokens_per_entry;
            std::fill(table.begin(), table.begin() + std::min<int64_t>(first_seen / group.block_size(), table.size()), -1);
        }
        const Status s = group.share_blocks(request, table);
        if (!s.is_ok()) {
            for (size_t k = 0; k < g; ++k) groups_[k]->free_request(request);
            return s;
        }
    }
    for (size_t i = 0; i < run.size(); ++i) touch(keys[i], *run[i]);
    ++stats_.hits;
    stats_.hit_tokens += tokens;
    return tokens;
}

size_t PrefixCache::publish(RequestId request, const std::vector<uint64_t>& keys, int64_t tokens, size_t from) {
    const size_t n = std::min<size_t>(keys.size(), static_cast<size_t>(std::max<int64_t>(0, tokens) / chunk_tokens_));
    if (from > n || (from > 0 && find(keys, from - 1) == nullptr)) from = 0;
    for (size_t i = from; i < n; ++i) {
        if (Chunk* c = find(keys, i)) {
            touch(keys[i], *c);
            continue;
        }
        if (chunks_.count(keys[i])) return i;  // the key names another prefix: the caller's keys collide
        Chunk chunk;
        chunk.first = i == 0;
        chunk.parent = i == 0 ? 0 : keys[i - 1];
        for (const CacheGroup* g : groups_) {
            const int64_t span = g->block_size() * g->spec().tokens_per_entry;  // tokens a block holds
            const int64_t begin = static_cast<int64_t>(i) * chunk_tokens_ / span, end = begin + chunk_tokens_ / span;
            const std::vector<int32_t>& table = g->block_table(request);
            if (static_cast<int64_t>(table.size()) < end) return i;
            std::vector<int32_t> blocks(table.begin() + begin, table.begin() + end);
            if (std::find(blocks.begin(), blocks.end(), -1) != blocks.end()) return i;  // released: the run ends here
            chunk.blocks.push_back(std::move(blocks));
        }
        for (size_t g = 0; g < groups_.size(); ++g)
            for (int32_t b : chunk.blocks[g]) groups_[g]->retain_block(b);
        if (i > 0) {
            Chunk& parent = chunks_.at(keys[i - 1]);
            if (parent.children++ == 0) leaves_.erase({parent.last_use, keys[i - 1]});
        }
        chunk.last_use = ++clock_;
        leaves_.insert({chunk.last_use, keys[i]});
        chunks_.emplace(keys[i], std::move(chunk));
        ++stats_.cached_chunks;
    }
    return n;
}

bool PrefixCache::evict_one() {
    if (leaves_.empty()) return false;
    const uint64_t key = leaves_.begin()->second;
    leaves_.erase(leaves_.begin());
    auto victim = chunks_.find(key);
    const Chunk& c = victim->second;
    for (size_t g = 0; g < groups_.size(); ++g)
        for (int32_t b : c.blocks[g]) groups_[g]->release_block(b);
    if (!c.first) {
        Chunk& parent = chunks_.at(c.parent);
        if (--parent.children == 0) leaves_.insert({parent.last_use, c.parent});
    }
    chunks_.erase(victim);
    --stats_.cached_chunks;
    ++stats_.evicted_chunks;
    return true;
}

}  // namespace sieve
