// Bindings of the row-wise ops: rope (ops/rope.h) and quant_fp8 (ops/quant_fp8.h). Each takes its
// outputs as arguments (python/sieve/ops.py allocates them) and checks every tensor before the op's
// own validate().
#include <optional>
#include <string>

#include <nanobind/nanobind.h>
#include <nanobind/stl/optional.h>
#include <nanobind/stl/string.h>

#include "errors.h"
#include "op_backend.h"
#include "ops_bindings.h"
#include "sieve/ops/quant_fp8.h"
#include "sieve/ops/rope.h"
#include "tensor_arg.h"

namespace nb = nanobind;

namespace sieve::python {
namespace {

RopePairing parse_pairing(const std::string& s) {
    if (s == "interleaved") return RopePairing::interleaved;
    if (s == "half_split") return RopePairing::half_split;
    throw StatusError(invalid_argument_error("sieve.ops.rope: pairing '{}', expected 'interleaved' or 'half_split'", s));
}

RopeSlice parse_slice(const std::string& s) {
    if (s == "first") return RopeSlice::first;
    if (s == "last") return RopeSlice::last;
    throw StatusError(invalid_argument_error("sieve.ops.rope: slice '{}', expected 'first' or 'last'", s));
}

void rope(const Array& x_array, const Array& out_array, const Array& positions_array, const Array& inv_freq_array,
          const std::string& pairing, const std::string& slice, bool inverse, float attention_factor) {
    const TensorArg x("rope", "x", x_array), out("rope", "out", out_array),
        positions("rope", "positions", positions_array), inv_freq("rope", "inv_freq", inv_freq_array);
    for (const TensorArg* t : {&x, &out, &positions, &inv_freq}) t->expect_host();
    x.expect_dtype({DType::f32, DType::bf16}).expect_shape({-1, -1, -1}, "n_tokens, n_heads, head_dim").expect_rows_contiguous();
    out.expect_dtype({DType::f32, DType::bf16}).expect_shape({x.dim(0), x.dim(1), x.dim(2)}, "x's shape").expect_rows_contiguous();
    positions.expect_dtype({DType::i64, DType::i32}).expect_shape({x.dim(0)}, "n_tokens").expect_contiguous();
    inv_freq.expect_dtype({DType::f32}).expect_shape({-1}, "rot_dim / 2").expect_contiguous();
    RopeParams p;
    p.x = x.data();
    p.y = out.data();
    p.positions = positions.data();
    p.inv_freq = static_cast<const float*>(inv_freq.data());
    p.n_tokens = x.dim(0);
    p.n_heads = x.dim(1);
    p.head_dim = x.dim(2);
    p.rot_dim = 2 * inv_freq.dim(0);
    p.x_token_stride = x.stride(0);
    p.x_head_stride = x.stride(1);
    p.y_token_stride = out.stride(0);
    p.y_head_stride = out.stride(1);
    p.attention_factor = attention_factor;
    p.pairing = parse_pairing(pairing);
    p.slice = parse_slice(slice);
    p.inverse = inverse;
    p.x_type = x.dtype();
    p.y_type = out.dtype();
    p.positions_type = positions.dtype();
    run_op([&](Backend& b, const auto&) { return b.rope(p); });
}

void rope_inv_freq(const Array& out_array, int64_t rot_dim, double base, std::optional<double> yarn_factor,
                   double original_max_position, double beta_fast, double beta_slow, bool truncate) {
    const TensorArg out("rope_inv_freq", "out", out_array);
    out.expect_host();
    out.expect_dtype({DType::f32}).expect_shape({rot_dim / 2}, "rot_dim / 2").expect_contiguous();
    RopeFrequencyConfig c;
    c.rot_dim = rot_dim;
    c.base = base;
    c.yarn = yarn_factor.has_value();
    if (c.yarn) c.yarn_params = RopeYarn{*yarn_factor, original_max_position, beta_fast, beta_slow, truncate};
    check(sieve::rope_inv_freq(c, static_cast<float*>(out.data())));
}

void quant_fp8(const Array& x_array, std::optional<Array> q_array, std::optional<Array> scale_ue8m0_array,
               std::optional<Array> scale_f32_array, std::optional<Array> dequant_array, int64_t group_size) {
    const TensorArg x("quant_fp8", "x", x_array);
    x.expect_host();
    x.expect_dtype({DType::f32, DType::bf16}).expect_shape({-1, -1, -1}, "n_tokens, n_heads, dim").expect_rows_contiguous();
    if (group_size <= 0 || x.dim(2) % group_size != 0)
        throw StatusError(invalid_argument_error("sieve.ops.quant_fp8: group_size {} does not divide dim {}", group_size, x.dim(2)));
    const int64_t n_groups = x.dim(2) / group_size;
    QuantFp8Params p;
    p.x = x.data();
    p.n_tokens = x.dim(0);
    p.n_heads = x.dim(1);
    p.dim = x.dim(2);
    p.group_size = group_size;
    p.x_token_stride = x.stride(0);
    p.x_head_stride = x.stride(1);
    p.x_type = x.dtype();
    if (q_array) {
        const TensorArg q("quant_fp8", "q", *q_array);
        q.expect_host();
        q.expect_dtype({DType::f8_e4m3, DType::u8}).expect_shape({x.dim(0), x.dim(1), x.dim(2)}, "x's shape").expect_rows_contiguous();
        p.q = static_cast<uint8_t*>(q.data());
        p.q_token_stride = q.stride(0);
        p.q_head_stride = q.stride(1);
    }
    // scale_ue8m0 and scale_f32 share one layout in the contract: both contiguous.
    if (scale_ue8m0_array) {
        const TensorArg s("quant_fp8", "scale_ue8m0", *scale_ue8m0_array);
        s.expect_host();
        s.expect_dtype({DType::f8_e8m0, DType::u8}).expect_shape({x.dim(0), x.dim(1), n_groups}, "n_tokens, n_heads, dim / group_size").expect_contiguous();
        p.scale_ue8m0 = static_cast<uint8_t*>(s.data());
    }
    if (scale_f32_array) {
        const TensorArg s("quant_fp8", "scale_f32", *scale_f32_array);
        s.expect_host();
        s.expect_dtype({DType::f32}).expect_shape({x.dim(0), x.dim(1), n_groups}, "n_tokens, n_heads, dim / group_size").expect_contiguous();
        p.scale_f32 = static_cast<float*>(s.data());
    }
    p.scale_token_stride = x.dim(1) * n_groups;
    p.scale_head_stride = n_groups;
    if (dequant_array) {
        const TensorArg d("quant_fp8", "dequant", *dequant_array);
        d.expect_host();
        d.expect_dtype({DType::f32, DType::bf16}).expect_shape({x.dim(0), x.dim(1), x.dim(2)}, "x's shape").expect_rows_contiguous();
        p.dequant = d.data();
        p.dequant_token_stride = d.stride(0);
        p.dequant_head_stride = d.stride(1);
        p.dequant_type = d.dtype();
    }
    run_op([&](Backend& b, const auto&) { return b.quant_fp8(p); });
}

}  // namespace

void bind_row_ops(nb::module_& ops) {
    ops.def("rope", &rope, nb::arg("x"), nb::arg("out"), nb::arg("positions"), nb::arg("inv_freq"), nb::arg("pairing"),
            nb::arg("slice"), nb::arg("inverse"), nb::arg("attention_factor"));
    ops.def("rope_inv_freq", &rope_inv_freq, nb::arg("out"), nb::arg("rot_dim"), nb::arg("base"),
            nb::arg("yarn_factor").none(), nb::arg("original_max_position"), nb::arg("beta_fast"),
            nb::arg("beta_slow"), nb::arg("truncate"));
    ops.def("quant_fp8", &quant_fp8, nb::arg("x"), nb::arg("q").none(), nb::arg("scale_ue8m0").none(),
            nb::arg("scale_f32").none(), nb::arg("dequant").none(), nb::arg("group_size"));
}

}  // namespace sieve::python
