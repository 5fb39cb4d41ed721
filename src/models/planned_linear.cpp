#include "models/planned_linear.h"

namespace sieve {

namespace {
// Plans kept per linear; steps of many different sizes (chunked prefill) would otherwise grow the map
// without bound. A plan is cheap to rebuild.
constexpr size_t kMaxPlans = 32;
}  // namespace

Expected<PlannedLinear> PlannedLinear::prepare(Backend& backend, const LinearWeights& w, std::string name) {
    auto prepared = backend.linear_prepare(w);
    if (!prepared.has_value()) return prepared.status().with_context(name);
    PlannedLinear r;
    r.backend_ = &backend;
    r.weights_ = std::shared_ptr<PreparedLinear>(std::move(prepared).value());
    r.name_ = std::move(name);
    return r;
}

Expected<const LinearPlan*> PlannedLinear::plan(const LinearParams& shape) const {
    if (weights_ == nullptr) return internal_error("linear {}: not prepared", name_);
    const PlanKey key{shape.n_tokens, shape.x_row_stride, shape.y_row_stride, shape.x_type, shape.y_type};
    auto it = plans_.find(key);
    if (it == plans_.end()) {
        auto plan = backend_->linear_plan(*weights_, shape);
        if (!plan.has_value()) return plan.status().with_context(name_);
        if (plans_.size() >= kMaxPlans) plans_.clear();
        it = plans_.emplace(key, std::move(plan).value()).first;
    }
    return &it->second;
}

Status PlannedLinear::run(const LinearPlan& plan, const LinearParams& p, Workspace workspace) const {
    if (weights_ == nullptr) return internal_error("linear {}: not prepared", name_);
    const Status s = backend_->linear(*weights_, plan, p, workspace);
    return s.is_ok() ? s : s.with_context(name_);
}

namespace {
LinearParams linear_params(const void* x, DType x_type, int64_t x_stride, void* y, DType y_type, int64_t y_stride,
                           int64_t n_tokens) {
    LinearParams p;
    p.x = x;
    p.y = y;
    p.n_tokens = n_tokens;
    p.x_row_stride = x_stride;
    p.y_row_stride = y_stride;
    p.x_type = x_type;
    p.y_type = y_type;
    return p;
}
}  // namespace

Status PlannedLinear::run(const void* x, DType x_type, int64_t x_stride, void* y, DType y_type, int64_t y_stride,
                          int64_t n_tokens, WorkspaceBuffer& workspace) const {
    if (n_tokens == 0) return Status::ok();
    SIEVE_ASSIGN_OR_RETURN(const size_t bytes, workspace_bytes(x_type, x_stride, y_type, y_stride, n_tokens));
    auto ws = workspace.workspace(*backend_, bytes, "the linear workspace");
    if (!ws) return ws.status().with_context(name_);
    return run(x, x_type, x_stride, y, y_type, y_stride, n_tokens, *ws);
}

Status PlannedLinear::run(const void* x, DType x_type, int64_t x_stride, void* y, DType y_type, int64_t y_stride,
                          int64_t n_tokens, Workspace workspace) const {
    if (n_tokens == 0) return Status::ok();
    const LinearParams p = linear_params(x, x_type, x_stride, y, y_type, y_stride, n_tokens);
    SIEVE_ASSIGN_OR_RETURN(const LinearPlan* plan, this->plan(p));
    return run(*plan, p, workspace);
}

Expected<size_t> PlannedLinear::workspace_bytes(DType x_type, int64_t x_stride, DType y_type, int64_t y_stride,
                                                int64_t n_tokens) const {
    if (n_tokens == 0) return size_t{0};
    SIEVE_ASSIGN_OR_RETURN(const LinearPlan* plan,
                           this->plan(linear_params(nullptr, x_type, x_stride, nullptr, y_type, y_stride, n_tokens)));
    return plan->workspace_bytes;
}

}  // namespace sieve
