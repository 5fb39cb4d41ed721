#include "sieve/runtime/engine.h"

#include <algorithm>
#include <chrono>
#include <cstdint>

namespace sieve {

Expected<std::unique_ptr<Engine>> Engine::create(AttentionModel& model, EngineOptions options) {
    const SchedulerOptions& s = options.scheduler;
    if (s.max_tokens_per_step < 1)
        return invalid_argument_error("token budget per step {} must be at least 1", s.max_tokens_per_step);
    if (s.max_requests_per_step < 1)
        return invalid_argument_error("{} requests per step: must be at least 1", s.max_requests_per_step);
    if (s.max_prefill_chunk < 0)
        return invalid_argument_error("largest prefill chunk {}: must be at least 0 (0: no limit)",
                                      s.max_prefill_chunk);
    if (s.draft_tokens < 0) return invalid_argument_error("{} draft tokens per step: must be at least 0", s.draft_tokens);
    if (s.draft_tokens > 0 && !options.accepted_drafts)
        return invalid_argument_error("{} draft tokens per step need an acceptance (EngineOptions::accepted_drafts)",
                                      s.draft_tokens);
    CachePoolOptions pool_options;
    pool_options.blocks_per_group = options.blocks_per_group;
    pool_options.cache_budget_tokens = options.cache_budget_tokens;
    pool_options.max_requests_per_step = s.max_requests_per_step;
    pool_options.max_cache_bytes = options.max_cache_bytes;
    if (options.draft_model && s.draft_tokens == 0)
        return invalid_argument_error("a draft model without draft tokens (SchedulerOptions::draft_tokens is 0)");
    if (options.draft_model && options.draft_model->hidden_size() != model.hidden_size())
        return invalid_argument_error("the draft model's hidden size {} is not the model's {}",
                                      options.draft_model->hidden_size(), model.hidden_size());
    SIEVE_ASSIGN_OR_RETURN(auto pools, CachePools::create(model, pool_options));
    std::unique_ptr<LayerStepper> drafter;
    if (options.draft_model) {
        SIEVE_ASSIGN_OR_RETURN(drafter, LayerStepper::create(*options.draft_model, pool_options));
        SIEVE_RETURN_IF_ERROR(drafter->reuse_selections());
    }
    std::unique_ptr<Engine> engine(new Engine(model, std::move(options)));
    engine->pools_ = std::move(pools);
    engine->drafter_ = std::move(drafter);
    return engine;
}

Status Engine::add_request(RequestId id, int64_t n_tokens, int64_t prompt_tokens, RequestIo* io,
                           std::vector<uint64_t> prompt_chunk_keys) {
    if (requests_.count(id)) return invalid_argument_error("request id {} is already in use", id);
    Entry e;
    e.io = io;
    e.n_tokens = n_tokens;
    e.prompt_tokens = prompt_tokens;
    e.prefix_keys = std::move(prompt_chunk_keys);
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
    if (accepted && !e.prefix_keys.empty()) stats_.keyed_prompt_tokens += prompt_tokens;
    requests_[id] = std::move(e);
    if (accepted) scheduler_.add(id, n_tokens, prompt_tokens);
    return result;
}

// The plan of the next step, after every keyed request it would start has looked for a cached prefix of its
// prompt (leaving its last prompt token to run: its output is the prompt's): as late as possible, so that
// the prompts ahead of it have cached what they could. A hit starts the request there, and the step is
// planned again.
std::vector<StepRequest> Engine::plan_step() {
    PrefixCache* cache = pools_->prefix_cache();
    for (;;) {
        std::vector<StepRequest> plan = scheduler_.next_step();
        bool hit = false;
        for (const StepRequest& r : plan) {
            Entry& e = requests_.at(r.id);
            if (r.start > 0 || e.looked_for_prefix || e.prefix_keys.empty()) continue;
            e.looked_for_prefix = true;
            const Expected<int64_t> tokens = cache->attach(r.id, e.prefix_keys, e.prompt_tokens - 1);
            if (!tokens.has_value() || *tokens == 0) continue;
            e.done = *tokens;
            scheduler_.start_at(r.id, *tokens);
            stats_.prefix_hit_tokens += *tokens;
            ++stats_.prefix_hit_requests;
            hit = true;
        }
        if (!hit) return plan;
    }
}

void Engine::release(RequestId id) {
    pools_->free_request(id);
    model_.release_request(id);
    if (drafter_) drafter_->free_request(id);
}

void Engine::fail(RequestId id, Status why) {
    Entry& e = requests_.at(id);
    e.status = RequestStatus::failed;
    e.error = std::move(why);
    scheduler_.remove(id);
    release(id);
}

namespace {

// The drafts a step's request verifies: a decode of 1 + k tokens is the request's token and k drafts.
int64_t drafts_verified(const StepRequest& r) { return r.is_decode ? r.n_tokens - 1 : 0; }

}  // namespace

// The draft model follows the target: in each step it runs every request's tokens it has not run, up to the
// end of the request's chunk (prefill: the target's own tokens), or, for a request verifying k drafts after
// its token at `start` (a decode of 1 + k tokens), up to `start` (draft step 0) and then positions
// start + 1 … start + k − 1 one per step, reusing step 0's selections: the drafts these stand for are what the
// step verifies.
Status Engine::run_drafts(const std::vector<StepRequest>& step) {
    std::vector<StepRequest> step0;
    int64_t most = 0;
    for (const StepRequest& r : step) {
        const bool verifies = drafts_verified(r) > 0;
        const int64_t from = drafter_->tokens_done(r.id), to = verifies ? r.start + 1 : r.end();
        if (to > from) step0.push_back({r.id, from, to - from});
        most = std::max(most, drafts_verified(r));
    }
    if (step0.empty()) return Status::ok();
    const auto begin = std::chrono::steady_clock::now();
    SIEVE_RETURN_IF_ERROR(draft_step(std::move(step0)));
    for (int64_t j = 1; j < most; ++j) {
        std::vector<StepRequest> next;
        for (const StepRequest& r : step)
            if (drafts_verified(r) > j) {
                next.push_back({r.id, r.start + j, 1});
                next.back().reuse_selection = true;
            }
        stats_.draft_reused_tokens += static_cast<int64_t>(next.size());
        SIEVE_RETURN_IF_ERROR(draft_step(std::move(next)));
    }
    // Whatever the target keeps runs again in the next round's step 0, as the verified tokens it now is.
    for (const StepRequest& r : step)
        if (drafts_verified(r) > 0) SIEVE_RETURN_IF_ERROR(drafter_->rollback(r.id, r.start + 1));
    stats_.draft_seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - begin).count();
    return Status::ok();
}

Status Engine::draft_step(std::vector<StepRequest> requests) {
    SIEVE_RETURN_IF_ERROR(drafter_->begin_step(std::move(requests)));
    const StepBatch& batch = drafter_->batch();
    AttentionModel& draft = drafter_->model();
    const int64_t hidden = draft.hidden_size(), n = batch.n_tokens();
    std::vector<float> in(static_cast<size_t>(n * hidden)), out(in.size());
    for (int64_t l = 0; l < static_cast<int64_t>(draft.layers().size()); ++l) {
        for (int64_t t = 0; t < n; ++t)
            requests_.at(batch.request_of_token(t)).io->draft_input(l, batch.positions[static_cast<size_t>(t)],
                                                                    in.data() + t * hidden);
        SIEVE_RETURN_IF_ERROR(drafter_->forward(l, in.data(), out.data()));
    }
    ++stats_.draft_steps;
    stats_.draft_model_tokens += n;
    return drafter_->end_step();
}

Expected<bool> Engine::step() {
    std::vector<StepRequest> plan = plan_step();
    if (plan.empty()) return false;
    // Reserve cache blocks; a request that cannot get them is rejected, the others go on.
    std::vector<StepRequest> admitted;
    for (const StepRequest& r : plan) {
        Status s = pools_->reserve(r);
        if (!s.is_ok()) {
            fail(r.id, s);
            continue;
        }
        requests_.at(r.id).status = RequestStatus::running;
        admitted.push_back(r);
    }
    if (admitted.empty()) return true;

    // Where each request's kept tokens end: a verification step keeps the request's token and the drafts
    // the target accepts.
    std::map<RequestId, int64_t> kept_end;
    for (const StepRequest& r : admitted) {
        const int64_t drafts = drafts_verified(r);
        kept_end[r.id] = r.start + (drafts > 0 ? 1 + std::clamp<int64_t>(options_.accepted_drafts(r.id, r.start, drafts), 0, drafts)
                                               : r.n_tokens);
    }

    const auto start = std::chrono::steady_clock::now();  // the step's time includes its drafts'
    if (drafter_)
        if (Status s = run_drafts(admitted); !s.is_ok()) {
            s = s.with_context("the draft model");
            for (const StepRequest& r : admitted) fail(r.id, s);
            return s;
        }

    const StepBatch batch = make_step_batch(admitted, pools_->step_caches());
    // RequestIo is per token; the runner moves the step's rows in one piece.
    struct TokenRows final : StepIo {
        Engine& engine;
        const StepBatch& batch;
        const std::map<RequestId, int64_t>& kept_end;
        int64_t hidden;
        TokenRows(Engine& e, const StepBatch& b, const std::map<RequestId, int64_t>& k, int64_t h)
            : engine(e), batch(b), kept_end(k), hidden(h) {}
        void input(int64_t layer_pos, std::span<float> rows) override {
            for (int64_t t = 0; t < batch.n_tokens(); ++t) {
                const RequestId id = batch.request_of_token(t);
                const int64_t p = batch.positions[static_cast<size_t>(t)];
                RequestIo& io = *engine.requests_.at(id).io;
                if (p < kept_end.at(id))
                    io.input(layer_pos, p, rows.data() + t * hidden);
                else
                    io.rejected_draft_input(layer_pos, p, rows.subspan(static_cast<size_t>(t * hidden), static_cast<size_t>(hidden)));
            }
        }
        void output(int64_t layer_pos, std::span<const float> rows) override {
            for (int64_t t = 0; t < batch.n_tokens(); ++t) {
                const RequestId id = batch.request_of_token(t);
                const int64_t p = batch.positions[static_cast<size_t>(t)];
                if (p < kept_end.at(id)) engine.requests_.at(id).io->output(layer_pos, p, rows.data() + t * hidden);
            }
        }
    } io(*this, batch, kept_end, model_.hidden_size());
    if (Status s = runner_.run(batch, io, options_.chain_layers, &stats_.stages); !s.is_ok()) {
        for (const StepRequest& r : admitted) fail(r.id, s);
        return s;
    }
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();

    bool any_prefill = false;
    for (StepRequest& r : admitted) {
        any_prefill |= !r.is_decode;
        const int64_t kept = kept_end.at(r.id) - r.start;
        if (r.is_decode) {
            stats_.drafted_tokens += r.n_tokens - 1;
            stats_.accepted_draft_tokens += kept - 1;
        }
        r.n_tokens = kept;  // rejected drafts: their rows are rewritten by the tokens that take their places
        (r.is_decode ? stats_.decode_tokens : stats_.prefill_tokens) += r.n_tokens;
    }
    (any_prefill ? stats_.prefill_seconds : stats_.decode_seconds) += seconds;
    ++stats_.steps;

    scheduler_.complete(admitted);
    for (const StepRequest& r : admitted) {
        Entry& e = requests_.at(r.id);
        e.done = r.end();
        // Its kept tokens are final: their chunks are cached before any block of them is let go.
        if (!e.prefix_keys.empty())
            e.cached_chunks = pools_->prefix_cache()->publish(r.id, e.prefix_keys, e.done, e.cached_chunks);
        if (e.done >= e.n_tokens) {
            e.status = RequestStatus::finished;
            release(r.id);
            continue;
        }
        pools_->after_step(r.id, e.done);  // windowed caches keep only what the next token can still see
    }
    return true;
}

void RequestIo::rejected_draft_input(int64_t layer_pos, int64_t position, std::span<float> row) {
    input(layer_pos, position, row.data());
    for (float& v : row) v += 1.0f;
}

void RequestIo::draft_input(int64_t, int64_t position, float* row) { input(0, position, row); }

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

const std::vector<std::unique_ptr<CacheGroup>>& Engine::draft_cache_groups() const {
    static const std::vector<std::unique_ptr<CacheGroup>> none;
    return drafter_ ? drafter_->caches().groups() : none;
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
