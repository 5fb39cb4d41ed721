#include "sieve/runtime/engine.h"

#include <algorithm>
#include <chrono>
#include <cstdint>

namespace sieve {

namespace {

// The blocks of a group's pool: blocks_per_group, or enough for the token budget plus one partial
// block per request of a step. A pool numbers its blocks with int32 (kv/block_allocator.h).
Expected<int64_t> pool_blocks(const CacheGroupDesc& d, const EngineOptions& o) {
    if (d.block_size < 1 || d.spec.tokens_per_entry < 1)
        return internal_error("cache group {}: block size {}, {} tokens per entry", d.name, d.block_size,
                              d.spec.tokens_per_entry);
    int64_t blocks = o.blocks_per_group;
    if (blocks == 0) {
        const int64_t entries = o.cache_budget_tokens / d.spec.tokens_per_entry;
        const int64_t budget_blocks = entries / d.block_size + (entries % d.block_size != 0);
        if (__builtin_add_overflow(budget_blocks, o.scheduler.max_requests_per_step, &blocks)) blocks = INT64_MAX;
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
        __builtin_mul_overflow(bytes, d.n_layers, &bytes))
        return out_of_memory_error(
            "cache {}: {} blocks of {} entries of {} B in {} layers: more bytes than int64 holds", d.name, blocks,
            d.block_size, d.spec.entry_bytes, d.n_layers);
    return bytes;
}

double gigabytes(int64_t bytes) { return static_cast<double>(bytes) / 1e9; }

}  // namespace

Expected<std::unique_ptr<Engine>> Engine::create(AttentionModel& model, EngineOptions options) {
    const SchedulerOptions& s = options.scheduler;
    if (s.max_tokens_per_step < 1)
        return invalid_argument_error("token budget per step {} must be at least 1", s.max_tokens_per_step);
    if (s.max_requests_per_step < 1)
        return invalid_argument_error("{} requests per step: must be at least 1", s.max_requests_per_step);
    if (s.max_prefill_chunk < 0)
        return invalid_argument_error("largest prefill chunk {}: must be at least 0 (0: no limit)",
                                      s.max_prefill_chunk);
    if (options.blocks_per_group < 0 || options.cache_budget_tokens < 0 || options.max_cache_bytes < 0)
        return invalid_argument_error("{} blocks per group, a cache budget of {} tokens, max_cache_bytes {}: none may "
                                      "be negative",
                                      options.blocks_per_group, options.cache_budget_tokens, options.max_cache_bytes);
    // Every pool is sized before the first is allocated: a workload too large fails as a whole.
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
    std::unique_ptr<Engine> engine(new Engine(model, std::move(options)));
    for (size_t i = 0; i < descs.size(); ++i) {
        const CacheGroupDesc& d = descs[i];
        SIEVE_ASSIGN_OR_RETURN(auto group,
                               CacheGroup::create(model.backend(), d.name, d.spec, d.block_size, blocks[i], d.n_layers));
        engine->groups_.push_back(std::move(group));
    }
    return engine;
}

Status Engine::add_request(RequestId id, int64_t n_tokens, int64_t prompt_tokens, RequestIo* io) {
    if (requests_.count(id)) return invalid_argument_error("request id {} is already in use", id);
    Entry e;
    e.io = io;
    e.n_tokens = n_tokens;
    if (n_tokens < 1) {
        e.status = RequestStatus::failed;
        e.error = invalid_argument_error("request {} has {} tokens; it needs at least 1", id, n_tokens);
    } else if (prompt_tokens < 0 || prompt_tokens > n_tokens) {
        e.status = RequestStatus::failed;
        e.error = invalid_argument_error("request {}: a prompt of {} tokens, expected 0 to its {} tokens", id,
                                         prompt_tokens, n_tokens);
    } else if (n_tokens > model_.max_position_embeddings()) {
        e.status = RequestStatus::failed;
        e.error = invalid_argument_error(
            "request {} has {} tokens ({} prompt + {} decode), more than max_position_embeddings = {} of {}", id,
            n_tokens, prompt_tokens, n_tokens - prompt_tokens, model_.max_position_embeddings(), model_.model_type());
    }
    const Status result = e.error;
    const bool accepted = e.status != RequestStatus::failed;
    requests_[id] = std::move(e);
    if (accepted) scheduler_.add(id, n_tokens, prompt_tokens);
    return result;
}

void Engine::fail(RequestId id, Status why) {
    Entry& e = requests_.at(id);
    e.status = RequestStatus::failed;
    e.error = std::move(why);
    scheduler_.remove(id);
    for (auto& g : groups_) g->free_request(id);
    model_.release_request(id);
}

Status Engine::reserve(const StepRequest& r) {
    for (auto& g : groups_) {
        Status s = g->reserve(r.id, g->entries_for_tokens(r.end()));
        if (!s.is_ok()) return s.with_context(fmt::format("request {} at position {}", r.id, r.end()));
    }
    return Status::ok();
}

Expected<bool> Engine::step() {
    std::vector<StepRequest> plan = scheduler_.next_step();
    if (plan.empty()) return false;
    // Reserve cache blocks; a request that cannot get them is rejected, the others go on.
    std::vector<StepRequest> admitted;
    for (const StepRequest& r : plan) {
        Status s = reserve(r);
        if (!s.is_ok()) {
            fail(r.id, s);
            continue;
        }
        requests_.at(r.id).status = RequestStatus::running;
        admitted.push_back(r);
    }
    if (admitted.empty()) return true;

    StepCaches caches;
    for (auto& g : groups_) caches.groups.push_back(g.get());
    const StepBatch batch = make_step_batch(admitted, std::move(caches));
    // RequestIo is per token; the runner moves the step's rows in one piece.
    struct TokenRows final : StepIo {
        Engine& engine;
        const StepBatch& batch;
        int64_t hidden;
        TokenRows(Engine& e, const StepBatch& b, int64_t h) : engine(e), batch(b), hidden(h) {}
        void input(int64_t layer_pos, std::span<float> rows) override {
            for (int64_t t = 0; t < batch.n_tokens(); ++t)
                engine.requests_.at(batch.request_of_token(t))
                    .io->input(layer_pos, batch.positions[static_cast<size_t>(t)], rows.data() + t * hidden);
        }
        void output(int64_t layer_pos, std::span<const float> rows) override {
            for (int64_t t = 0; t < batch.n_tokens(); ++t)
                engine.requests_.at(batch.request_of_token(t))
                    .io->output(layer_pos, batch.positions[static_cast<size_t>(t)], rows.data() + t * hidden);
        }
    } io(*this, batch, model_.hidden_size());
    const auto start = std::chrono::steady_clock::now();
    if (Status s = runner_.run(batch, io, options_.chain_layers, &stats_.stages); !s.is_ok()) {
        for (const StepRequest& r : admitted) fail(r.id, s);
        return s;
    }
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();

    bool any_prefill = false;
    for (const StepRequest& r : admitted) {
        any_prefill |= !r.is_decode;
        (r.is_decode ? stats_.decode_tokens : stats_.prefill_tokens) += r.n_tokens;
    }
    (any_prefill ? stats_.prefill_seconds : stats_.decode_seconds) += seconds;
    ++stats_.steps;

    scheduler_.complete(admitted);
    for (const StepRequest& r : admitted) {
        Entry& e = requests_.at(r.id);
        e.done = r.end();
        if (e.done >= e.n_tokens) {
            e.status = RequestStatus::finished;
            for (auto& g : groups_) g->free_request(r.id);
            model_.release_request(r.id);
            continue;
        }
        // Windowed caches keep only what the next token can still see.
        for (auto& g : groups_) {
            const CacheSpec& spec = g->spec();
            if (spec.window_tokens > 0)
                g->release_before(r.id, std::max<int64_t>(0, e.done - spec.window_tokens) / spec.tokens_per_entry);
        }
    }
    return true;
}

Status Engine::run(const std::function<void(const Engine&)>& on_step) {
    for (;;) {
        SIEVE_ASSIGN_OR_RETURN(bool ran, step());
        if (!ran) return Status::ok();
        if (on_step) on_step(*this);
    }
}

RequestStatus Engine::status(RequestId id) const {
    auto it = requests_.find(id);
    return it == requests_.end() ? RequestStatus::failed : it->second.status;
}

Status Engine::error(RequestId id) const {
    auto it = requests_.find(id);
    if (it == requests_.end()) return not_found_error("no request {}", id);
    return it->second.error;
}

int64_t Engine::pending_requests() const {
    int64_t n = 0;
    for (const auto& [id, e] : requests_) n += e.status == RequestStatus::queued || e.status == RequestStatus::running;
    return n;
}

int64_t Engine::tokens_done(RequestId id) const {
    auto it = requests_.find(id);
    return it == requests_.end() ? 0 : it->second.done;
}

}  // namespace sieve
