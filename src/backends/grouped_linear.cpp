#include "backends/grouped_linear.h"

#include <algorithm>

#include <fmt/format.h>

#include "sieve/ops/op_common.h"

namespace sieve {

GroupedPreparedLinear::GroupedPreparedLinear(const LinearWeights& w)
    : PreparedLinear(w.out_features, w.in_features, w.math, w.weight_type, w.groups) {}

Expected<std::unique_ptr<PreparedLinear>> GroupedPreparedLinear::prepare(const LinearWeights& w, const PrepareOne& prepare_one) {
    SIEVE_RETURN_IF_ERROR(validate_and_check_indices(w));
    if (w.groups < 2) return internal_error("grouped linear: {} group(s): a plain linear", w.groups);
    std::unique_ptr<GroupedPreparedLinear> grouped(new GroupedPreparedLinear(w));
    const int64_t rows = w.out_features / w.groups;
    const int64_t scale_cols = (w.in_features + kLinearFp8Block - 1) / kLinearFp8Block;
    for (int64_t g = 0; g < w.groups; ++g) {
        LinearWeights one = w;
        one.groups = 1;
        one.out_features = rows;
        one.weight = static_cast<const uint8_t*>(w.weight) + g * rows * w.weight_row_stride * static_cast<int64_t>(dtype_size(w.weight_type));
        if (w.block_scale != nullptr) one.block_scale = w.block_scale + (g * rows / kLinearFp8Block) * scale_cols;  // whole blocks (validate)
        if (w.bias != nullptr) one.bias = static_cast<const uint8_t*>(w.bias) + g * rows * static_cast<int64_t>(dtype_size(w.bias_type));
        SIEVE_ASSIGN_OR_RETURN(std::unique_ptr<PreparedLinear> prepared, prepare_one(one));
        grouped->groups_.push_back(std::move(prepared));
    }
    return std::unique_ptr<PreparedLinear>(std::move(grouped));
}

size_t GroupedPreparedLinear::bytes() const {
    size_t total = 0;
    for (const auto& g : groups_) total += g->bytes();
    return total;
}

std::string GroupedPreparedLinear::describe() const { return fmt::format("{} groups, each {}", groups(), groups_.front()->describe()); }

namespace {

using GroupPlans = std::vector<LinearPlan>;

// Group g's view of p: x's values g·K … and outputs g·out/G … of every row.
LinearParams group_params(const GroupedPreparedLinear& w, const LinearParams& p, int64_t g) {
    LinearParams q = p;
    const int64_t rows = w.out_features() / w.groups();
    if (p.x != nullptr) q.x = static_cast<const uint8_t*>(p.x) + g * w.in_features() * static_cast<int64_t>(dtype_size(p.x_type));
    if (p.y != nullptr) q.y = static_cast<uint8_t*>(p.y) + g * rows * static_cast<int64_t>(dtype_size(p.y_type));
    return q;
}

}  // namespace

Expected<LinearPlan> grouped_linear_plan(Backend& backend, const GroupedPreparedLinear& w, const LinearParams& shape) {
    SIEVE_RETURN_IF_ERROR(validate(shape, w.x_features(), w.out_features(), /*check_pointers=*/false));
    auto plans = std::make_shared<GroupPlans>();
    LinearPlan plan = LinearPlan::of_shape(shape);
    for (int64_t g = 0; g < w.groups(); ++g) {
        SIEVE_ASSIGN_OR_RETURN(LinearPlan one, backend.linear_plan(w.group(g), group_params(w, shape, g)));
        plan.workspace_bytes = std::max(plan.workspace_bytes, one.workspace_bytes);
        plans->push_back(std::move(one));
    }
    plan.kernel = fmt::format("{} per group ({} groups)", plans->front().kernel, w.groups());
    plan.state = std::move(plans);
    return plan;
}

Status grouped_linear(Backend& backend, const GroupedPreparedLinear& w, const LinearPlan& plan, const LinearParams& p,
                      Workspace ws) {
    SIEVE_RETURN_IF_ERROR(check_linear_plan(plan, p));
    SIEVE_RETURN_IF_ERROR(validate(p, w.x_features(), w.out_features()));
    const auto* plans = static_cast<const GroupPlans*>(plan.state.get());
    if (plans == nullptr || static_cast<int64_t>(plans->size()) != w.groups())
        return invalid_argument_error("grouped linear: the plan was not made for these {} groups", w.groups());
    for (int64_t g = 0; g < w.groups(); ++g)
        SIEVE_RETURN_IF_ERROR(backend.linear(w.group(g), (*plans)[static_cast<size_t>(g)], group_params(w, p, g), ws));
    return Status::ok();
}

}  // namespace sieve
