#include "models/dsa_mla/linear_runner.h"

#include <algorithm>

namespace sieve::dsa_mla {

Expected<void*> Scratch::get(size_t bytes) {
    if (bytes == 0) bytes = 1;
    if (static_cast<size_t>(buffer_.numel()) < bytes) {
        SIEVE_ASSIGN_OR_RETURN(buffer_, Tensor::zeros(DType::u8, {static_cast<int64_t>(bytes + bytes / 4)}));
    }
    return buffer_.data();
}

Workspace Scratch::workspace(size_t bytes) {
    if (bytes == 0) return {};
    auto p = get(bytes);
    return p ? Workspace{*p, bytes} : Workspace{};
}

Status LinearRunner::run(Backend& backend, Scratch& scratch, const void* x, DType x_type, int64_t x_row_stride,
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
    Workspace ws{};
    if (it->workspace_bytes > 0) {
        SIEVE_ASSIGN_OR_RETURN(void* data, scratch.get(it->workspace_bytes));
        ws = {data, it->workspace_bytes};
    }
    return backend.linear(*prepared_, *it, p, ws);
}

}  // namespace sieve::dsa_mla
