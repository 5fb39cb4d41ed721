#include "sieve/runtime/scheduler.h"

#include <algorithm>

#include "core/assert.h"

namespace sieve {

void Scheduler::add(RequestId id, int64_t n_tokens, int64_t prompt_tokens) {
    SIEVE_ASSERT(!progress_.count(id), "request id added twice");
    SIEVE_ASSERT(n_tokens >= 0 && prompt_tokens >= 0);
    // A request always starts with a prefill of at least one token.
    progress_[id] = Progress{n_tokens, std::clamp<int64_t>(prompt_tokens, std::min<int64_t>(1, n_tokens), n_tokens), 0};
    if (n_tokens > 0) order_.push_back(id);
}

std::vector<StepRequest> Scheduler::next_step() const {
    std::vector<StepRequest> step;
    int64_t budget = options_.max_tokens_per_step;
    // Decodes first: one token each, and the drafts the budget still allows after it.
    for (RequestId id : order_) {
        const Progress& p = progress_.at(id);
        if (p.done < p.prompt_tokens) continue;
        if (budget < 1 || static_cast<int64_t>(step.size()) >= options_.max_requests_per_step) break;
        const int64_t drafts = std::min({options_.draft_tokens, p.n_tokens - p.done - 1, budget - 1});
        step.push_back({id, p.done, 1 + drafts, true});
        budget -= 1 + drafts;
    }
    // Then prefill chunks, in arrival order.
    for (RequestId id : order_) {
        const Progress& p = progress_.at(id);
        if (p.done >= p.prompt_tokens) continue;
        if (budget < 1 || static_cast<int64_t>(step.size()) >= options_.max_requests_per_step) break;
        int64_t limit = std::min(p.prompt_tokens - p.done, budget);
        if (options_.max_prefill_chunk > 0) limit = std::min(limit, options_.max_prefill_chunk);
        int64_t chunk = limit;
        if (options_.chunk_policy) {
            chunk = options_.chunk_policy(id, limit);
            SIEVE_ASSERT(chunk >= 1 && chunk <= limit, "chunk_policy returned a chunk outside [1, limit]");
        }
        step.push_back({id, p.done, chunk, false});
        budget -= chunk;
    }
    return step;
}

void Scheduler::complete(const std::vector<StepRequest>& step) {
    for (const StepRequest& s : step) {
        auto it = progress_.find(s.id);
        if (it == progress_.end()) continue;
        SIEVE_ASSERT(it->second.done == s.start, "step does not continue the request");
        it->second.done += s.n_tokens;
        if (it->second.done >= it->second.n_tokens) remove(s.id);
    }
}

void Scheduler::remove(RequestId id) {
    order_.erase(std::remove(order_.begin(), order_.end(), id), order_.end());
    progress_.erase(id);
}

void Scheduler::start_at(RequestId id, int64_t tokens) {
    Progress& p = progress_.at(id);
    SIEVE_ASSERT(p.done == 0 && tokens >= 0 && tokens < p.prompt_tokens, "a cached prefix starts a request inside its prompt");
    p.done = tokens;
}

int64_t Scheduler::tokens_done(RequestId id) const {
    auto it = progress_.find(id);
    return it == progress_.end() ? -1 : it->second.done;
}

}  // namespace sieve
