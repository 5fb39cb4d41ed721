#include "models/dsa_mla/linear_runner.h"

#include <algorithm>

namespace sieve::dsa_mla {

Status LinearRunner::run(Backend& backend, WorkspaceBuffer& scratch, const void* x, DType x_type, int64_t x_row_stride,
                         void* y, DType y_type, int64_t y_row_stride, int64_t n_tokens) const {
    LinearParams p;
    p.x = x;
    p.y = y;
    p.n_tokens = n_tokens;
    p.x_row_stride = x_row_stride;
    p.y_row_stride = y_row_stride;
    p.x_type = x_type;
    p.y_type = y_type;
    if (n_tokens == 0) return Status::ok();
    auto same = [&](const LinearPlan& plan) {
        return plan.n_tokens == n_tokens && plan.x_row_stride == x_row_stride && plan.y_row_stride == y_row_stride &&
               plan.x_type == x_type && plan.y_type == y_type;
    };
    auto it = std::find_if(plans_.begin(), plans_.end(), same);
    if (it == plans_.end()) {
        SIEVE_ASSIGN_OR_RETURN(LinearPlan plan, backend.linear_plan(*prepared_, p));
        if (plans_.size() >= kMaxPlans) plans_.erase(plans_.begin());
        plans_.push_back(std::move(plan));
        it = plans_.end() - 1;
    }
    SIEVE_ASSIGN_OR_RETURN(const Workspace ws, scratch.workspace(backend, it->workspace_bytes, "the linear workspace"));
    return backend.linear(*prepared_, *it, p, ws);
}

}  // namespace sieve::dsa_mla
