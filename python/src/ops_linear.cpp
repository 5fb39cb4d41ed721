// Binding of the linear op (ops/linear.h) as an object: the weights are prepared once by the backend
// (packed, converted: backends/backend.h "prepare once, plan per shape"), then each call plans for its
// batch shape (the last plan is kept) and runs. python/sieve/ops.py builds Linear, GroupedLinear and
// DeepSeek-V4's output projection on it.
#include <memory>
#include <optional>
#include <string>

#include <nanobind/nanobind.h>
#include <nanobind/stl/optional.h>
#include <nanobind/stl/string.h>

#include "errors.h"
#include "op_backend.h"
#include "ops_bindings.h"
#include "sieve/ops/linear.h"
#include "tensor_arg.h"

namespace nb = nanobind;

namespace sieve::python {
namespace {

LinearMath parse_math(const std::string& s) {
    if (s == "f32") return LinearMath::f32;
    if (s == "bf16") return LinearMath::bf16;
    throw StatusError(invalid_argument_error("sieve.ops.Linear: math '{}', expected 'f32' (exact) or 'bf16' (deployed)", s));
}

class Linear {
public:
    Linear(const Array& weight_array, std::optional<Array> block_scale_array, std::optional<Array> bias_array,
           const std::string& math, int64_t groups)
        : backend_(current_op_backend()) {
        const char* op = "Linear";
        const TensorArg weight(op, "weight", weight_array);
        weight.expect_host();
        weight.expect_dtype({DType::f32, DType::bf16, DType::f8_e4m3}).expect_shape({-1, -1}, "out_features, in_features").expect_rows_contiguous();
        LinearWeights w;
        w.weight = weight.data();
        w.out_features = weight.dim(0);
        w.in_features = weight.dim(1);
        w.groups = groups;  // ops/linear.h "Groups"; validated by the backend's prepare
        w.weight_row_stride = weight.stride(0);
        w.weight_type = weight.dtype();
        w.math = parse_math(math);
        if (weight.dtype() == DType::f8_e4m3 && !block_scale_array)
            weight.fail("float8_e4m3fn weights need block_scale (one float32 multiplier per 128×128 block)");
        if (block_scale_array) {
            const TensorArg scale(op, "block_scale", *block_scale_array);
            scale.expect_host();
            if (weight.dtype() != DType::f8_e4m3) scale.fail("given for weights that are not float8_e4m3fn");
            const int64_t rows = (w.out_features + kLinearFp8Block - 1) / kLinearFp8Block;
            const int64_t cols = (w.in_features + kLinearFp8Block - 1) / kLinearFp8Block;
            scale.expect_dtype({DType::f32}).expect_shape({rows, cols}, "ceil(out/128), ceil(in/128)").expect_contiguous();
            w.block_scale = static_cast<const float*>(scale.data());
        }
        if (bias_array) {
            const TensorArg bias(op, "bias", *bias_array);
            bias.expect_host();
            bias.expect_dtype({DType::f32, DType::bf16}).expect_shape({w.out_features}, "out_features").expect_contiguous();
            w.bias = bias.data();
            w.bias_type = bias.dtype();
        }
        run_op_on(backend_, [&](Backend& b, const auto&) -> Status {
            auto prepared = b.linear_prepare(w);
            if (!prepared.has_value()) return prepared.status();
            weights_ = std::move(prepared).value();
            return Status::ok();
        });
    }

    // y[t] = x[t]·Wᵀ (+ b) for every row t of x (group by group for a grouped linear).
    void run(const Array& x_array, const Array& y_array) {
        const char* op = "Linear";
        const TensorArg x(op, "x", x_array), y(op, "out", y_array);
        x.expect_host();
        y.expect_host();
        x.expect_dtype({DType::f32, DType::bf16}).expect_shape({-1, weights_->x_features()}, "n_tokens, groups · in_features").expect_rows_contiguous();
        y.expect_dtype({DType::f32, DType::bf16}).expect_shape({x.dim(0), weights_->out_features()}, "n_tokens, out_features").expect_rows_contiguous();
        LinearParams p;
        p.x = x.data();
        p.y = y.data();
        p.n_tokens = x.dim(0);
        p.x_row_stride = x.stride(0);
        p.y_row_stride = y.stride(0);
        p.x_type = x.dtype();
        p.y_type = y.dtype();
        if (p.n_tokens == 0) return;
        run_op_on(backend_, [&](Backend& b, const auto& workspace) -> Status {
            if (!plan_ || !check_linear_plan(*plan_, p).is_ok()) {
                auto plan = b.linear_plan(*weights_, p);
                if (!plan.has_value()) return plan.status();
                plan_ = std::move(plan).value();
            }
            return b.linear(*weights_, *plan_, p, workspace(plan_->workspace_bytes));
        });
    }

    int64_t in_features() const { return weights_->in_features(); }
    int64_t out_features() const { return weights_->out_features(); }
    std::string describe() const { return weights_->describe(); }
    std::string backend() const { return backend_->name(); }

private:
    std::shared_ptr<Backend> backend_;  // the backend that prepared the weights: they run only there
    std::unique_ptr<PreparedLinear> weights_;
    std::optional<LinearPlan> plan_;    // the last batch shape's plan
};

}  // namespace

void bind_linear(nb::module_& ops) {
    nb::class_<Linear>(ops, "Linear")
        .def(nb::init<const Array&, std::optional<Array>, std::optional<Array>, const std::string&, int64_t>(), nb::arg("weight"),
             nb::arg("block_scale").none(), nb::arg("bias").none(), nb::arg("math"), nb::arg("groups") = 1)
        .def("run", &Linear::run, nb::arg("x"), nb::arg("out"))
        .def_prop_ro("in_features", &Linear::in_features)
        .def_prop_ro("out_features", &Linear::out_features)
        .def_prop_ro("backend", &Linear::backend)
        .def("describe", &Linear::describe);
}

}  // namespace sieve::python
