// The ref backend: wires the scalar oracle functions of this folder into the Backend interface.
#include "backends/ref/ref_backend.h"

#include "backends/ref/ref_ops.h"

namespace sieve {

namespace {

class RefBackend final : public Backend {
public:
    const std::string& name() const override { return name_; }

    Expected<std::unique_ptr<PreparedLinear>> linear_prepare(const LinearWeights& w) override {
        return ref::linear_prepare(w);
    }
    Expected<LinearPlan> linear_plan(const PreparedLinear& w, const LinearParams& shape) override {
        SIEVE_RETURN_IF_ERROR(validate(shape, w.in_features(), w.out_features(), /*check_pointers=*/false));
        LinearPlan plan;
        plan.n_tokens = shape.n_tokens;
        plan.x_row_stride = shape.x_row_stride;
        plan.y_row_stride = shape.y_row_stride;
        plan.x_type = shape.x_type;
        plan.y_type = shape.y_type;
        plan.kernel = "linear_ref";
        return plan;
    }
    Status linear(const PreparedLinear& w, const LinearPlan& plan, const LinearParams& p, Workspace) override {
        SIEVE_RETURN_IF_ERROR(check_linear_plan(plan, p));
        const auto* prepared = dynamic_cast<const ref::RefPreparedLinear*>(&w);
        if (prepared == nullptr) return invalid_argument_error("ref linear: weights were prepared by another backend");
        return ref::linear(*prepared, p);
    }
    Status rms_norm(const RmsNormParams& p) override { return ref::rms_norm(p); }
    Status layer_norm(const LayerNormParams& p) override { return ref::layer_norm(p); }
    Status rope(const RopeParams& p) override { return ref::rope(p); }
    Status quant_fp8(const QuantFp8Params& p) override { return ref::quant_fp8(p); }
    Status hadamard(const HadamardParams& p) override { return ref::hadamard(p); }
    size_t topk_workspace_size(const TopkParams&) const override { return 0; }
    Status topk(const TopkParams& p, Workspace) override { return ref::topk(p); }

private:
    std::string name_ = "ref";
};

}  // namespace

std::unique_ptr<Backend> make_ref_backend() { return std::make_unique<RefBackend>(); }

}  // namespace sieve
