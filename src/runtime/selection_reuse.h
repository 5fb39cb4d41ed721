// Top-k reuse across draft steps (skip_topk, specs/qsa.md §7; the same rule for every layer that selects
// with an indexer): a draft model's stepper records, per request and layer, the selection made for the
// request's last token of a step that selected anew (draft step 0), and hands it to the request's later
// draft tokens (StepRequest::reuse_selection) in place of what their layers select. It does so as the
// model's selection observer (models/attention_model.h), so it works for every family and backend: the
// layers compute and store everything as usual (indexer keys, compressor state, QSA's raw-key ring and
// pooled groups), and only the rows attention reads are replaced.
#pragma once

#include <cstdint>
#include <map>
#include <span>
#include <vector>

#include "sieve/core/status.h"
#include "sieve/kv/step_batch.h"
#include "sieve/models/attention_model.h"

namespace sieve {

class SelectionReuse : public SelectionObserver {
public:
    // The step about to run (its requests' reuse flags and last positions).
    void begin_step(const StepBatch& batch);
    // The step ran: the selections recorded for its requests that selected anew become the ones to reuse.
    void end_step();
    // The first error of the step's layers (a reusing token whose layer recorded no selection, or a row
    // too narrow for the recorded one), ok otherwise. A step with an error must fail: its reusing rows
    // were not replaced.
    const Status& step_error() const { return error_; }

    // Whether request `id` has selections to reuse, and the position of the token that made them.
    bool has(RequestId id) const { return kept_.count(id) != 0; }
    int64_t position(RequestId id) const { return kept_.at(id).position; }
    void drop(RequestId id) { kept_.erase(id); }

    void on_selection(int64_t layer, RequestId request, int64_t position, std::span<int32_t> selected,
                      std::span<const float> scores, int64_t tokens_per_score) override;
    bool wants_scores() const override { return false; }  // rows only: no score readback

private:
    struct Kept {
        int64_t position = 0;                          // the token whose selections these are
        std::map<int64_t, std::vector<int32_t>> rows;  // per layer: its row without the trailing −1s
    };
    struct InStep {
        bool reuse = false;
        int64_t last = 0;  // the request's last position in the step
    };
    std::map<RequestId, Kept> kept_;
    std::map<RequestId, Kept> recorded_;  // this step's, for the requests that select anew
    std::map<RequestId, InStep> step_;
    Status error_;
};

}  // namespace sieve
