// Builds each step under a token budget, as vLLM's scheduler does with chunked prefill: first one
// token for every request in its decode phase (with speculative decoding, that token and up to
// draft_tokens draft tokens after it: a verification step), then prefill chunks in arrival order until
// the budget is used. A request's first `prompt_tokens` tokens are its prompt (prefilled in chunks);
// the rest run in decode steps.
#pragma once

#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <vector>

#include "sieve/kv/step_batch.h"

namespace sieve {

struct SchedulerOptions {
    int64_t max_tokens_per_step = 2048;  // token budget of one step
    int64_t max_requests_per_step = 256;
    // Largest prefill chunk of one request in one step (0: only the budget limits it).
    int64_t max_prefill_chunk = 0;
    // Optional: the chunk a prefilling request gets, given what is left of its prompt and of the
    // budget (e.g. randomized chunk sizes for schedule-invariance tests). Must return 1..limit.
    std::function<int64_t(RequestId, int64_t limit)> chunk_policy;
    // Draft tokens a decoding request verifies per step (0: plain decode), never past its last token.
    int64_t draft_tokens = 0;
};

class Scheduler {
public:
    explicit Scheduler(SchedulerOptions options) : options_(std::move(options)) {}

    // Queues a request of `n_tokens` tokens whose first `prompt_tokens` are its prompt.
    void add(RequestId id, int64_t n_tokens, int64_t prompt_tokens);
    // The requests of the next step (empty when nothing is left).
    std::vector<StepRequest> next_step() const;
    // Records that the step ran for these requests (a verification step's n_tokens: the tokens it kept);
    // finished ones leave the queue.
    void complete(const std::vector<StepRequest>& step);
    // Drops a request (rejected or failed); its tokens are not scheduled again.
    void remove(RequestId id);
    // A request that has not run yet holds its first `tokens` tokens already (a cached prefix, fewer than its
    // prompt): its first step starts there.
    void start_at(RequestId id, int64_t tokens);

    bool done() const { return order_.empty(); }
    int64_t tokens_done(RequestId id) const;

private:
    struct Progress {
        int64_t n_tokens = 0;
        int64_t prompt_tokens = 0;
        int64_t done = 0;
    };
    SchedulerOptions options_;
    std::deque<RequestId> order_;  // arrival order
    std::map<RequestId, Progress> progress_;
};

}  // namespace sieve
