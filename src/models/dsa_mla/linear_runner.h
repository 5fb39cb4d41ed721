// One prepared linear layer of a DSA-on-MLA model plus the plans the backend made for the batch
// shapes seen so far (plans are per shape, backends/backend.h; a small cache keeps the hot path free
// of re-planning between steps of the same size).
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "backends/backend.h"
#include "core/tensor.h"
#include "models/workspace_buffer.h"

namespace sieve::dsa_mla {

class LinearRunner {
public:
    LinearRunner() = default;
    LinearRunner(std::unique_ptr<PreparedLinear> prepared) : prepared_(std::move(prepared)) {}
    bool empty() const { return prepared_ == nullptr; }
    const PreparedLinear& prepared() const { return *prepared_; }
    int64_t out_features() const { return prepared_->out_features(); }
    int64_t in_features() const { return prepared_->in_features(); }

    // y[t, :] = x[t, :]·Wᵀ for n_tokens rows (ops/linear.h), planning the shape on first use.
    // The plan cache is not part of the layer's value: run() is const (one forward at a time per model).
    Status run(Backend& backend, WorkspaceBuffer& scratch, const void* x, DType x_type, int64_t x_row_stride, void* y,
               DType y_type, int64_t y_row_stride, int64_t n_tokens) const;

private:
    std::unique_ptr<PreparedLinear> prepared_;
    mutable std::vector<LinearPlan> plans_;  // most recent last; at most kMaxPlans
    static constexpr size_t kMaxPlans = 8;
};

}  // namespace sieve::dsa_mla
