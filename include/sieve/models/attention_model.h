// The interface every family's model implements for the runtime: which layers it runs, which
// cache groups it needs, and the forward of one layer over one step's tokens.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "sieve/core/stage_timer.h"
#include "sieve/core/status.h"
#include "sieve/kv/cache_spec.h"
#include "sieve/kv/step_batch.h"

namespace sieve {

class Backend;

// A cache group the model needs: layers with the same kind of cache share block tables
// (kv/paged_cache.h); each of them keeps its own storage, addressed by its layer slot: its place in
// `layers` (0 .. n_layers() − 1).
struct CacheGroupDesc {
    std::string name;
    CacheSpec spec;
    int64_t block_size = 64;      // entries per block
    std::vector<int64_t> layers;  // the model layers in the group, in slot order

    int64_t n_layers() const { return static_cast<int64_t>(layers.size()); }
};

// Sees (and may replace) each token's sparse selection before attention uses it: `sieve check`
// compares it with the reference's and substitutes the reference's choice for exact-tie tokens
// (specs/golden_format.md "Exact score ties").
class SelectionObserver {
public:
    virtual ~SelectionObserver() = default;
    // selected: [width] the indices the layer chose, valid ones ascending, then −1 (in/out); in the
    // index space of the reference's top-k (golden_format.md: compressed-entry ids for DeepSeek-V4
    // CSA, token positions for DSA and QSA).
    // scores: [n_scored] the score of every scored candidate, or empty when the layer took every
    // candidate without scoring (short-context path). Index i of `selected` has score
    // scores[i / tokens_per_score] (QSA scores groups of tokens; everyone else passes 1); an index
    // past the scored range (QSA's open tail) has no score.
    virtual void on_selection(int64_t layer, RequestId request, int64_t position, std::span<int32_t> selected,
                              std::span<const float> scores, int64_t tokens_per_score) = 0;
    // Whether the observer reads the scores: when not, a model reads none back and passes empty `scores`.
    virtual bool wants_scores() const { return true; }
};

class AttentionModel {
public:
    virtual ~AttentionModel() = default;

    virtual std::string model_type() const = 0;
    // The backend the model was loaded for: its weights live there, and so must the caches and
    // activations the runtime hands to forward().
    virtual Backend& backend() const = 0;
    virtual int64_t hidden_size() const = 0;
    virtual int64_t max_position_embeddings() const = 0;
    // The model's layer indices that sieve runs, in order. forward() takes a position in this list.
    virtual std::vector<int64_t> layers() const = 0;
    virtual std::vector<CacheGroupDesc> cache_groups() const = 0;

    // Plans the step before any of its layers runs (DESIGN.md, one plan per step): the metadata its layers
    // share (positions, block tables, slot lists) is built on the host and uploaded to the backend once,
    // so that forward() only enqueues ops. Called once per step, with the batch every forward() of the
    // step then receives; a model that plans nothing keeps the default.
    virtual Status plan_step(const StepBatch& batch) {
        (void)batch;
        return Status::ok();
    }

    // Runs layer `layer_pos` (index into layers()) for every token of the step, after plan_step(batch).
    // input, output: [batch.n_tokens(), hidden_size()] f32. Caches of the step's requests are
    // reserved for entries up to each request's end(). A failure is the model's (unsupported
    // configuration, internal error): the runtime fails the whole step with it.
    virtual Status forward(int64_t layer_pos, const StepBatch& batch, const float* input, float* output,
                           StageTimes* times) = 0;

    // nullptr to stop observing. The observer must outlive the forward calls it is set for.
    virtual void set_selection_observer(SelectionObserver* observer) { (void)observer; }

    // Drops any per-request state the model keeps outside the caches.
    virtual void release_request(RequestId) {}

    // Bytes of scratch the model holds: activation buffers and op workspaces, grown on demand to the
    // largest step so far (`sieve run` states them next to weights and caches).
    virtual int64_t workspace_bytes() const { return 0; }
};

}  // namespace sieve
