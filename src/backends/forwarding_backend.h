// A backend that runs every op on an inner backend, with one hook around each op call that sees (and
// may rewrite) the params' pointers and the workspace by field name (ops/op_pointers.h). What a
// checking device (backends/host_copy) and a test harness that moves host data to a device are made of,
// without each listing every op again.
//
// Linear weights pass through untouched: linear_prepare reads host weights by contract (backend.h) and
// the prepared weights stay the inner backend's. Memory and stream methods are the subclass's.
#pragma once

#include <array>
#include <cstddef>
#include <functional>
#include <memory>
#include <span>
#include <string_view>

#include "sieve/backends/backend.h"
#include "core/assert.h"
#include "sieve/ops/op_pointers.h"

namespace sieve {

class ForwardingBackend : public Backend {
public:
    struct PointerField {
        std::string_view name;  // "x", "cache.base", "workspace", ...
        const void* value;      // the address; the hook may replace it before calling run()
    };

    explicit ForwardingBackend(std::unique_ptr<Backend> inner) : inner_(std::move(inner)) {}
    Backend& inner() const { return *inner_; }

    size_t prepared_weight_bytes() const override { return inner_->prepared_weight_bytes(); }

    Expected<std::unique_ptr<PreparedLinear>> linear_prepare(const LinearWeights& w) override {
        return inner_->linear_prepare(w);
    }
    Expected<LinearPlan> linear_plan(const PreparedLinear& w, const LinearParams& shape) override {
        return inner_->linear_plan(w, shape);
    }
    Status linear(const PreparedLinear& w, const LinearPlan& plan, const LinearParams& p, Workspace ws) override {
        return forward("linear", p, &ws, [&](const LinearParams& q, Workspace v) { return inner_->linear(w, plan, q, v); });
    }

#define SIEVE_FORWARD_OP(op, Params)                                                             \
    Status op(const Params& p) override {                                                         \
        return forward(#op, p, nullptr, [&](const Params& q, Workspace) { return inner_->op(q); }); \
    }
#define SIEVE_FORWARD_OP_WS(op, Params)                                                                 \
    size_t op##_workspace_size(const Params& p) const override { return inner_->op##_workspace_size(p); } \
    Status op(const Params& p, Workspace ws) override {                                                  \
        return forward(#op, p, &ws, [&](const Params& q, Workspace v) { return inner_->op(q, v); });      \
    }
    SIEVE_FORWARD_OP(rms_norm, RmsNormParams)
    SIEVE_FORWARD_OP(layer_norm, LayerNormParams)
    SIEVE_FORWARD_OP(rope, RopeParams)
    SIEVE_FORWARD_OP(quant_fp8, QuantFp8Params)
    SIEVE_FORWARD_OP(hadamard, HadamardParams)
    SIEVE_FORWARD_OP(cache_store, CacheStoreParams)
    SIEVE_FORWARD_OP_WS(indexer_scores, IndexerScoresParams)
    SIEVE_FORWARD_OP(selected_slots, SelectedSlotsParams)
    SIEVE_FORWARD_OP_WS(topk, TopkParams)
    SIEVE_FORWARD_OP_WS(sparse_attention, SparseAttentionParams)
    SIEVE_FORWARD_OP(dsa_output_gate, DsaOutputGateParams)
    SIEVE_FORWARD_OP_WS(mla_head_proj, MlaHeadProjParams)
    SIEVE_FORWARD_OP(kv_load, KvLoadParams)
    SIEVE_FORWARD_OP(compressor_state_store, CompressorStateStoreParams)
    SIEVE_FORWARD_OP(compressor_pool, CompressorPoolParams)
    SIEVE_FORWARD_OP(qsa_pool, QsaPoolParams)
    SIEVE_FORWARD_OP(qsa_expand, QsaExpandParams)
    SIEVE_FORWARD_OP_WS(qsa_sparse_gqa, QsaSparseGqaParams)
#undef SIEVE_FORWARD_OP
#undef SIEVE_FORWARD_OP_WS

protected:
    // Called for every op with its pointer fields (the workspace last, named "workspace", for ops that
    // take one); run() calls the inner op with the fields' current values.
    virtual Status around_op(std::string_view op, std::span<PointerField> fields,
                             const std::function<Status()>& run) = 0;

private:
    static constexpr size_t kMaxFields = 12;

    template <typename Params, typename Run>
    Status forward(std::string_view op, const Params& p, const Workspace* ws, Run&& inner_op) {
        std::array<PointerField, kMaxFields> fields;
        size_t n = 0;
        for_each_pointer(p, [&](std::string_view name, const auto& ptr) {
            SIEVE_ASSERT(n < kMaxFields - 1, "ForwardingBackend: too many pointer fields");
            fields[n++] = {name, ptr};
        });
        if (ws != nullptr) fields[n++] = {"workspace", ws->data};
        const size_t n_fields = n;
        auto run = [&]() -> Status {
            Params q = p;
            size_t i = 0;
            for_each_pointer(q, [&](std::string_view, auto& ptr) {
                using Ptr = std::remove_reference_t<decltype(ptr)>;
                ptr = static_cast<Ptr>(const_cast<void*>(fields[i++].value));
            });
            Workspace w = ws != nullptr ? Workspace{const_cast<void*>(fields[i].value), ws->bytes} : Workspace{};
            return inner_op(q, w);
        };
        return around_op(op, std::span<PointerField>(fields.data(), n_fields), run);
    }

    std::unique_ptr<Backend> inner_;
};

}  // namespace sieve
