// One prepared linear layer of a model with the plans its backend made for the batch shapes seen so far
// (backends/backend.h: prepare once at load, plan per shape, run without allocating in the backend). A
// small cache keeps the hot path free of re-planning between steps of the same size.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <tuple>

#include "sieve/backends/backend.h"
#include "sieve/core/status.h"
#include "models/workspace_buffer.h"

namespace sieve {

class PlannedLinear {
public:
    PlannedLinear() = default;
    // `name` (the checkpoint tensor) prefixes every error.
    static Expected<PlannedLinear> prepare(Backend& backend, const LinearWeights& w, std::string name);

    bool empty() const { return weights_ == nullptr; }
    int64_t out_features() const { return weights_->out_features(); }
    int64_t in_features() const { return weights_->in_features(); }
    const PreparedLinear& weights() const { return *weights_; }

    // The backend's plan for the batch shape of `shape` (pointers ignored), made on first use and kept.
    // The pointer stays valid until the next plan() of this linear.
    Expected<const LinearPlan*> plan(const LinearParams& shape) const;
    // y = x · Wᵀ (ops/linear.h) under a plan() of p's shape, with a workspace of plan.workspace_bytes.
    Status run(const LinearPlan& plan, const LinearParams& p, Workspace workspace) const;
    // y[t] = x[t] · Wᵀ for t < n_tokens (strides in elements): plan(), then run() with a workspace
    // from `workspace`.
    Status run(const void* x, DType x_type, int64_t x_stride, void* y, DType y_type, int64_t y_stride,
               int64_t n_tokens, WorkspaceBuffer& workspace) const;
    // The same with a workspace the caller carved: at least workspace_bytes() of the same shape.
    Status run(const void* x, DType x_type, int64_t x_stride, void* y, DType y_type, int64_t y_stride,
               int64_t n_tokens, Workspace workspace) const;
    // The workspace the plan of that shape needs (0 for no tokens).
    Expected<size_t> workspace_bytes(DType x_type, int64_t x_stride, DType y_type, int64_t y_stride,
                                     int64_t n_tokens) const;

private:
    Backend* backend_ = nullptr;
    std::shared_ptr<PreparedLinear> weights_;
    std::string name_;
    using PlanKey = std::tuple<int64_t, int64_t, int64_t, DType, DType>;
    mutable std::map<PlanKey, LinearPlan> plans_;  // a cache: plan() is logically const
};

}  // namespace sieve
