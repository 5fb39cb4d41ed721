// A grouped linear (ops/linear.h "Groups") run as one plain linear per group, for a backend without a
// batched kernel of its own: each group's weights prepared by that backend (rows g·out/G … of the stored
// weight, their bias and whole scale blocks), planned for the same batch shape and run in group order on
// the one workspace, group g reading x's values g·K … and writing outputs g·out/G …: the values of G
// separate linears.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "sieve/backends/backend.h"

namespace sieve {

class GroupedPreparedLinear final : public PreparedLinear {
public:
    using PrepareOne = std::function<Expected<std::unique_ptr<PreparedLinear>>(const LinearWeights&)>;
    // w.groups > 1 (validated); prepare_one is the backend's own linear_prepare for a plain linear.
    static Expected<std::unique_ptr<PreparedLinear>> prepare(const LinearWeights& w, const PrepareOne& prepare_one);

    size_t bytes() const override;
    std::string describe() const override;
    const PreparedLinear& group(int64_t g) const { return *groups_[static_cast<size_t>(g)]; }

private:
    explicit GroupedPreparedLinear(const LinearWeights& w);
    std::vector<std::unique_ptr<PreparedLinear>> groups_;
};

// linear_plan and linear of `backend` for a GroupedPreparedLinear it prepared: a plan per group (kept in the
// plan's state; the workspace is the largest of theirs), then the groups run in order.
Expected<LinearPlan> grouped_linear_plan(Backend& backend, const GroupedPreparedLinear& w, const LinearParams& shape);
Status grouped_linear(Backend& backend, const GroupedPreparedLinear& w, const LinearPlan& plan, const LinearParams& p,
                      Workspace ws);

}  // namespace sieve
