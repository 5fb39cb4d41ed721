#include "runtime/engine.h"

#include <algorithm>
#include <chrono>

namespace sieve {

Expected<std::unique_ptr<Engine>> Engine::create(AttentionModel& model, EngineOptions options) {
    if (options.scheduler.max_tokens_per_step < 1)
        return invalid_argument_error("token budget per step {} must be at least 1", options.scheduler.max_tokens_per_step);
    std::unique_ptr<Engine> engine(new Engine(model, std::move(options)));
    for (const CacheGroupDesc& d : model.cache_groups()) {
        int64_t blocks = engine->options_.blocks_per_group;
        if (blocks <= 0) {
            // Enough for the token budget plus one partial block per step request.
            const int64_t entries = engine->options_.cache_budget_tokens / d.spec.tokens_per_entry;
            blocks = (entries + d.block_size - 1) / d.block_size + engine->options_.scheduler.max_requests_per_step;
        }
        SIEVE_ASSIGN_OR_RETURN(auto group, CacheGroup::create(d.name, d.spec, d.block_size, blocks, d.n_layers));
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
    } else if (n_tokens > model_.max_position_embeddings()) {
        e.status = RequestStatus::failed;
        e.error = invalid_argument_error("request {} has {} tokens, more than max_position_embeddings = {} of {}", id,
                                         n_tokens, model_.max_position_embeddings(), model_.model_type());
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
    const int64_t hidden = model_.hidden_size();
    const size_t n = static_cast<size_t>(batch.n_tokens() * hidden);
    buffer_a_.resize(n);
    buffer_b_.resize(n);

    const auto start = std::chrono::steady_clock::now();
    const std::vector<int64_t> layers = model_.layers();
    float* in = buffer_a_.data();
    float* out = buffer_b_.data();
    for (size_t l = 0; l < layers.size(); ++l) {
        if (l == 0 || !options_.chain_layers)
            for (int64_t t = 0; t < batch.n_tokens(); ++t)
                requests_.at(batch.request_of_token(t)).io->input(static_cast<int64_t>(l), batch.positions[t], in + t * hidden);
        Status s = model_.forward(static_cast<int64_t>(l), batch, in, out, &stats_.stages);
        if (!s.is_ok()) {
            s = s.with_context(fmt::format("layer {}", layers[l]));
            for (const StepRequest& r : admitted) fail(r.id, s);
            return s;
        }
        for (int64_t t = 0; t < batch.n_tokens(); ++t)
            requests_.at(batch.request_of_token(t)).io->output(static_cast<int64_t>(l), batch.positions[t], out + t * hidden);
        std::swap(in, out);
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
