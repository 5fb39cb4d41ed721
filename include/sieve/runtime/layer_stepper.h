// Steps a model's attention layers one at a time, for a caller that runs the rest of the network
// itself: an inference engine computes embeddings, MLP/MoE and sampling between two attention
// layers, decides which requests run in a step (its own scheduler) and calls sieve for attention
// only. The caches stay sieve's (CachePools); a request is known by the caller's id.
//
// One step:
//   begin_step(requests)       the step's requests, each continuing where its previous step stopped
//                              (start = the tokens it already ran: 0 for its first step, or where
//                              attach_prefix started it); reserves their cache entries and plans the
//                              step (AttentionModel::plan_step)
//   forward(layer_pos, …)      every layer the caller needs, in the model's order (layers()), once each
//   end_step()                 ends it; windowed caches keep what a token at the step's start still sees
//                              until the request's next step begins (a rollback may return there)
//   rollback(id, tokens)       optionally, after a verification step (or a draft model's draft steps,
//                              reuse_selections): the request keeps only the first
//                              `tokens` of its tokens (its rejected draft tokens leave no trace)
// and, before a request's first step, attach_prefix(id, keys, …) to start it after the longest prefix of
// its prompt that the prefix cache holds (runtime/prefix_cache.h), caching its own chunks as it runs,
// and free_request(id) when a request ends (or is dropped). Over adopted pools (CachePools::adopt: the
// engine's cache memory and blocks) a request lives for one step: the engine sets its block tables
// (set_block_table) before begin_step, its start is the engine's, and end_step forgets it. A failed
// begin_step or forward leaves no step open; the caller may free the step's requests or retry them from
// their last completed step (the failed step's cache writes are overwritten by the retry).
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string_view>
#include <vector>

#include "sieve/backends/backend.h"
#include "sieve/core/stage_timer.h"
#include "sieve/core/status.h"
#include "sieve/kv/step_batch.h"
#include "sieve/models/attention_model.h"
#include "sieve/runtime/cache_pools.h"

namespace sieve {

class SelectionReuse;

class LayerStepper {
public:
    static Expected<std::unique_ptr<LayerStepper>> create(AttentionModel& model, const CachePoolOptions& options);
    static std::unique_ptr<LayerStepper> create(AttentionModel& model, std::unique_ptr<CachePools> pools);

    AttentionModel& model() const { return model_; }
    const CachePools& caches() const { return *pools_; }
    // Adopted pools: a request's block table in `group` for the next step (CachePools::set_block_table).
    Status set_block_table(std::string_view group, RequestId id, std::vector<int32_t> table) {
        return pools_->set_block_table(group, id, std::move(table));
    }

    // Checked: ids distinct, n_tokens ≥ 1, start = the tokens the request already ran (0 for a new id;
    // over adopted pools any start), end() ≤ max_position_embeddings. Decodes (n_tokens 1 after a start > 0) may come in any order.
    Status begin_step(std::vector<StepRequest> requests);
    // Layer `layer_pos` (index into model().layers()) over the step's tokens, in begin_step's order of
    // requests: input and output [n_tokens, hidden_size] f32 rows in host memory. Layers run in order,
    // each once per step.
    Status forward(int64_t layer_pos, const float* input, float* output, StageTimes* times = nullptr);
    // The same, over rows already in the model backend's memory (an engine's activations on its GPU): input
    // and output [n_tokens, hidden_size] f32 there. It only enqueues the layer's ops on the backend's stream:
    // nothing waits for them and nothing is read back (unless a selection observer is set), so an engine can
    // record a whole step's layers into one graph (Backend::capture) and replay it. The output holds the
    // rows once the backend's work issued so far is done.
    Status forward_on_backend(int64_t layer_pos, const float* input, float* output);
    Status end_step();
    // After end_step, before request `id`'s next step: it keeps only the first `tokens` of the tokens it has
    // run — a verification step (the request's last token and its draft tokens) whose later drafts were
    // rejected — with `tokens` at least the start of its last step (on a draft model's stepper: of its last step
    // that did not reuse selections, so that the draft tokens after it are undone too; reuse_selections);
    // its next step starts at `tokens`. What
    // any kept position or later token reads is then as if the rejected tokens had never been seen: the
    // windowed caches still hold what a token at the last step's start sees, and the rows the rejected tokens
    // wrote (window and state rows, the compressed entries, indexer keys and pooled groups they completed) lie
    // at positions ≥ `tokens`, which no token reads before the tokens that take their places rewrite them.
    // Not over adopted pools (there the engine's positions and blocks decide every step).
    Status rollback(RequestId id, int64_t tokens);
    // Own pools, before request `id`'s first step: its prompt's chunks of caches().prefix_cache()->
    // chunk_tokens() tokens have these keys (key i names the prompt's first i + 1 chunks: a chained hash of
    // their token ids). The request takes the longest cached run of them that holds at most `max_tokens`
    // tokens (a caller that needs the last prompt token's output passes the prompt's length − 1), and the
    // call returns how many tokens that is: the request's first step starts there. From then on the
    // request's own chunks are cached as their tokens become final (at each begin_step and at
    // free_request), for the requests after it.
    Expected<int64_t> attach_prefix(RequestId id, std::vector<uint64_t> keys, int64_t max_tokens);
    // Ends request `id` (or drops it): caches its final chunks, then frees its blocks.
    void free_request(RequestId id);

    // Makes this the stepper of a draft model (the MTP layers, each with its own caches): from now on a step's
    // request may be a later draft token (StepRequest::reuse_selection, one token) that attends with the
    // selections its layers made for the request's last token of its last step that did not reuse (draft step
    // 0; top-k reuse, skip_topk: qsa.md §7) while the layers still update every side cache; and a rollback
    // may return to the start of that step, undoing all the draft tokens after it. The stepper becomes the
    // model's selection observer (AttentionModel::set_selection_observer) for its lifetime, so the layers
    // read their selections back each step. Not over adopted pools.
    Status reuse_selections();

    bool in_step() const { return batch_.has_value(); }
    const StepBatch& batch() const { return *batch_; }
    // Tokens the request has run (0 for an unknown id).
    int64_t tokens_done(RequestId id) const;

    ~LayerStepper();

private:
    LayerStepper(AttentionModel& model, std::unique_ptr<CachePools> pools);
    Status fail_step(Status why);
    Status check_next_layer(std::string_view call, int64_t layer_pos);

    AttentionModel& model_;
    std::unique_ptr<CachePools> pools_;
    std::map<RequestId, int64_t> done_;        // tokens run, per request
    // The start of each request's last step that did not reuse selections (rollback's floor).
    std::map<RequestId, int64_t> last_start_;
    std::unique_ptr<SelectionReuse> reuse_;  // reuse_selections()'s
    struct PrefixKeys {
        std::vector<uint64_t> keys;  // attach_prefix's
        size_t cached = 0;           // leading chunks cached (PrefixCache::publish)
    };
    std::map<RequestId, PrefixKeys> prefix_keys_;
    std::optional<StepBatch> batch_;
    int64_t next_layer_ = 0;
    std::unique_ptr<DeviceBuffer> rows_in_, rows_out_;  // the step's activations on the model's backend
};

}  // namespace sieve
