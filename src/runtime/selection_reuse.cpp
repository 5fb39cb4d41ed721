#include "runtime/selection_reuse.h"

#include <algorithm>

namespace sieve {

void SelectionReuse::begin_step(const StepBatch& batch) {
    step_.clear();
    recorded_.clear();
    error_ = Status::ok();
    for (const StepRequest& r : batch.requests) {
        step_[r.id] = {r.reuse_selection, r.end() - 1};
        if (!r.reuse_selection) recorded_[r.id].position = r.end() - 1;
    }
}

void SelectionReuse::end_step() {
    // A request that selected anew replaces what it kept, also with no rows at all (a model without
    // indexer layers: its draft tokens have nothing to reuse).
    for (auto& [id, kept] : recorded_) kept_[id] = std::move(kept);
    recorded_.clear();
    step_.clear();
}

void SelectionReuse::on_selection(int64_t layer, RequestId request, int64_t position, std::span<int32_t> selected,
                                  std::span<const float>, int64_t) {
    const auto in_step = step_.find(request);
    if (in_step == step_.end()) {
        if (error_.is_ok()) error_ = internal_error("selection reuse: request {} is not in the step", request);
        return;
    }
    if (!in_step->second.reuse) {
        if (position != in_step->second.last) return;
        const auto end = std::find(selected.begin(), selected.end(), -1);
        recorded_[request].rows[layer].assign(selected.begin(), end);
        return;
    }
    const auto kept = kept_.find(request);
    const auto row = kept == kept_.end() ? decltype(kept->second.rows)::const_iterator{} : kept->second.rows.find(layer);
    if (kept == kept_.end() || row == kept->second.rows.end()) {
        // LayerStepper::begin_step lets a request reuse only after a step that selected anew, and every
        // layer selects in every step: a missing row is a bug, never a silent fresh selection.
        if (error_.is_ok())
            error_ = internal_error("layer {} has no selection of request {} to reuse at position {}", layer, request,
                                    position);
        return;
    }
    if (row->second.size() > selected.size()) {
        if (error_.is_ok())
            error_ = internal_error("layer {}: request {}'s reused selection has {} entries, the row at position {} "
                                    "holds {}",
                                    layer, request, row->second.size(), position, selected.size());
        return;
    }
    std::fill(std::copy(row->second.begin(), row->second.end(), selected.begin()), selected.end(), -1);
}

}  // namespace sieve
