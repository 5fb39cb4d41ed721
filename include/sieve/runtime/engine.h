// The runner: takes requests, builds steps with the scheduler, reserves their cache blocks, runs
// the model's attention layers in order for each step and hands the outputs back.
//
// A request that cannot get cache blocks (pool exhausted) or is longer than the model's
// max_position_embeddings is rejected with a clear error; the other requests continue unharmed.
// Prefix caching (runtime/prefix_cache.h): a request added with its prompt's chunk keys starts, when it is
// first scheduled, after the longest cached prefix of its prompt, and its own chunks are cached as it runs.
// Options that would size pools past what a block table addresses, past int64 or past
// max_cache_bytes are an error of create(), before any pool is allocated.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <span>
#include <vector>

#include "sieve/core/stage_timer.h"
#include "sieve/core/status.h"
#include "sieve/kv/paged_cache.h"
#include "sieve/models/attention_model.h"
#include "sieve/runtime/cache_pools.h"
#include "sieve/runtime/layer_stepper.h"
#include "sieve/runtime/scheduler.h"
#include "sieve/runtime/step_runner.h"

namespace sieve {

// Where a request's per-token inputs come from and its outputs go.
class RequestIo {
public:
    virtual ~RequestIo() = default;
    // The input row [hidden] of the layer at `layer_pos` (of the model's layers()) for a token.
    // With chained layers only layer_pos 0 is asked.
    virtual void input(int64_t layer_pos, int64_t position, float* row) = 0;
    // The output row [hidden] of a layer for a token.
    virtual void output(int64_t layer_pos, int64_t position, const float* row) = 0;
    // Speculative decoding: the input row of a draft token the target rejects at `position` (what a wrong
    // guess brings; its outputs are dropped and it leaves no trace). By default the token's own input
    // with 1 added to every value.
    virtual void rejected_draft_input(int64_t layer_pos, int64_t position, std::span<float> row);
    // Speculative decoding with a draft model (EngineOptions::draft_model): the input row of its layer at
    // `layer_pos` (of the draft model's layers()) for a token. By default the target's first layer's input.
    virtual void draft_input(int64_t layer_pos, int64_t position, float* row);
};

struct EngineOptions {
    SchedulerOptions scheduler;
    // true: each layer's input is the previous layer's output (a stack); false: every layer's input
    // comes from RequestIo (teacher forcing, as golden fixtures capture them).
    bool chain_layers = false;
    // Blocks per cache group; when 0, sized from cache_budget_tokens.
    int64_t blocks_per_group = 0;
    // Enough blocks for this many resident tokens per group (used when blocks_per_group is 0).
    int64_t cache_budget_tokens = 1 << 16;
    // Upper bound on the bytes of all cache pools together (0: none), e.g. the machine's memory.
    int64_t max_cache_bytes = 0;
    // Speculative decoding (scheduler.draft_tokens > 0): how many of the `drafts` draft tokens that follow
    // a request's token at `position` the target accepts (a prefix, 0 … drafts). Required with drafts.
    std::function<int64_t(RequestId, int64_t position, int64_t drafts)> accepted_drafts;
    // Speculative decoding with a draft model (optional, with drafts): the checkpoint's MTP layers loaded as a
    // model of their own (ModelOptions::layers), with its own caches. Before each step the engine runs it over
    // the step's requests: their prefill chunks, and for a request that verifies drafts, draft step 0 over its
    // tokens up to its token before the drafts, then one step per further draft token, each reusing step 0's
    // top-k (LayerStepper::reuse_selections, skip_topk); after the step the draft model rolls back to that
    // token, so that the kept tokens run again in the next round's step 0. Its outputs stand for the drafts,
    // which the acceptance above judges. Must outlive the engine.
    AttentionModel* draft_model = nullptr;
};

enum class RequestStatus { queued, running, finished, failed };

struct EngineStats {
    int64_t steps = 0;
    int64_t prefill_tokens = 0;
    int64_t decode_tokens = 0;         // tokens decoded (a verification step's kept tokens)
    int64_t drafted_tokens = 0;        // draft tokens verified
    int64_t accepted_draft_tokens = 0; // of them accepted: each one a decode step the request did not run
    int64_t keyed_prompt_tokens = 0;   // prompt tokens of the requests added with chunk keys
    int64_t prefix_hit_tokens = 0;     // of them, the tokens a cached prefix gave (not prefilled)
    int64_t prefix_hit_requests = 0;   // requests that started after a cached prefix
    double prefill_seconds = 0;  // steps with any prefill token count here
    double decode_seconds = 0;   // steps of decodes only
    int64_t draft_steps = 0;      // steps of the draft model (EngineOptions::draft_model)
    int64_t draft_model_tokens = 0;  // tokens they ran
    int64_t draft_reused_tokens = 0; // of them, draft tokens that reused step 0's top-k
    double draft_seconds = 0;     // their time (also in the decode or prefill time of the step they served)
    StageTimes stages;
};

class Engine {
public:
    static Expected<std::unique_ptr<Engine>> create(AttentionModel& model, EngineOptions options);

    // Queues a request of `n_tokens` tokens whose first `prompt_tokens` (0 ≤ prompt_tokens ≤ n_tokens)
    // are its prompt; `io` must outlive it. Errors (too long, duplicate id) reject it at once.
    // `prompt_chunk_keys` (optional): the keys of the prompt's chunks of prefix_chunk_tokens() tokens (key i
    // names the prompt's first i + 1 chunks: a chained hash of their tokens), for prefix caching.
    Status add_request(RequestId id, int64_t n_tokens, int64_t prompt_tokens, RequestIo* io,
                       std::vector<uint64_t> prompt_chunk_keys = {});
    // The tokens of a prompt chunk that prefix caching keys.
    int64_t prefix_chunk_tokens() const { return pools_->prefix_cache()->chunk_tokens(); }
    // Runs one step; false when nothing was left to run. An error is the model's and fails every
    // request of that step.
    Expected<bool> step();
    // Runs steps until every request finished or failed; `on_step` (optional) after each step.
    Status run(const std::function<void(const Engine&)>& on_step = {});

    RequestStatus status(RequestId id) const;
    // Why a failed request failed.
    Status error(RequestId id) const;
    const EngineStats& stats() const { return stats_; }
    const std::vector<std::unique_ptr<CacheGroup>>& cache_groups() const { return pools_->groups(); }
    // The draft model's (EngineOptions::draft_model; none without one).
    const std::vector<std::unique_ptr<CacheGroup>>& draft_cache_groups() const;
    int64_t pending_requests() const;
    int64_t tokens_done(RequestId id) const;

private:
    Engine(AttentionModel& model, EngineOptions options)
        : model_(model), options_(std::move(options)), scheduler_(options_.scheduler), runner_(model) {}
    void fail(RequestId id, Status why);
    // Ends request `id` in the caches, the model and the draft model.
    void release(RequestId id);
    std::vector<StepRequest> plan_step();
    // The draft model's steps for the step's verifications (EngineOptions::draft_model).
    Status run_drafts(const std::vector<StepRequest>& step);
    Status draft_step(std::vector<StepRequest> requests);

    struct Entry {
        RequestIo* io = nullptr;
        int64_t n_tokens = 0;
        int64_t prompt_tokens = 0;
        std::vector<uint64_t> prefix_keys;
        bool looked_for_prefix = false;
        size_t cached_chunks = 0;  // leading prompt chunks cached (PrefixCache::publish)
        int64_t done = 0;
        RequestStatus status = RequestStatus::queued;
        Status error;
    };
    AttentionModel& model_;
    EngineOptions options_;
    Scheduler scheduler_;
    std::unique_ptr<CachePools> pools_;
    std::unique_ptr<LayerStepper> drafter_;  // over EngineOptions::draft_model, reusing selections
    std::map<RequestId, Entry> requests_;
    EngineStats stats_;
    StepRunner runner_;
};

}  // namespace sieve
