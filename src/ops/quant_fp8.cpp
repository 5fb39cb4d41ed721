#include "sieve/ops/quant_fp8.h"

#include <array>

#include "sieve/ops/op_common.h"

namespace sieve {

Status validate(const QuantFp8Params& p) {
    constexpr std::string_view op = "quant_fp8";
    using namespace op_check;
    SIEVE_RETURN_IF_ERROR(require_dtype(op, "x_type", p.x_type, {DType::f32, DType::bf16}));
    SIEVE_RETURN_IF_ERROR(require_dtype(op, "dequant_type", p.dequant_type, {DType::f32, DType::bf16}));
    SIEVE_RETURN_IF_ERROR(require_at_least(op, "dim", p.dim, 1));
    SIEVE_RETURN_IF_ERROR(require_at_least(op, "group_size", p.group_size, 1));
    if (p.dim % p.group_size != 0)
        return invalid_argument_error("{}: dim {} is not a multiple of group_size {}", op, p.dim, p.group_size);
    if (!p.q && !p.scale_ue8m0 && !p.scale_f32 && !p.dequant)
        return invalid_argument_error("{}: no output (q, scale_ue8m0, scale_f32 and dequant are all null)", op);
    const int64_t n_groups = p.dim / p.group_size;
    const RowsLayout xl{p.n_tokens, p.n_heads, p.dim, p.x_token_stride, p.x_head_stride};
    SIEVE_ASSIGN_OR_RETURN(int64_t x_extent, rows_extent(op, "x", xl, dtype_size(p.x_type)));

    struct Output {
        std::string_view name;
        const void* ptr;
        int64_t bytes;
    };
    std::array<Output, 4> outputs{};
    size_t n_outputs = 0;
    auto add_output = [&](std::string_view name, const void* ptr, const RowsLayout& l, size_t elem) -> Status {
        if (ptr == nullptr) return Status::ok();
        SIEVE_ASSIGN_OR_RETURN(int64_t extent, output_rows_extent(op, name, l, elem));
        outputs[n_outputs++] = {name, ptr, extent * static_cast<int64_t>(elem)};
        return Status::ok();
    };
    SIEVE_RETURN_IF_ERROR(add_output("q", p.q, {p.n_tokens, p.n_heads, p.dim, p.q_token_stride, p.q_head_stride}, 1));
    const RowsLayout sl{p.n_tokens, p.n_heads, n_groups, p.scale_token_stride, p.scale_head_stride};
    SIEVE_RETURN_IF_ERROR(add_output("scale_ue8m0", p.scale_ue8m0, sl, 1));
    SIEVE_RETURN_IF_ERROR(add_output("scale", p.scale_f32, sl, 4));
    const RowsLayout dl{p.n_tokens, p.n_heads, p.dim, p.dequant_token_stride, p.dequant_head_stride};
    SIEVE_RETURN_IF_ERROR(add_output("dequant", p.dequant, dl, dtype_size(p.dequant_type)));
    if (x_extent == 0) return Status::ok();
    SIEVE_RETURN_IF_ERROR(require_ptr(op, "x", p.x));

    const int64_t x_bytes = x_extent * static_cast<int64_t>(dtype_size(p.x_type));
    for (size_t i = 0; i < n_outputs; ++i) {
        const bool in_place = outputs[i].ptr == p.dequant && p.dequant_type == p.x_type &&
                              p.dequant_token_stride == p.x_token_stride && p.dequant_head_stride == p.x_head_stride;
        SIEVE_RETURN_IF_ERROR(
            require_same_or_disjoint(op, "x", p.x, x_bytes, outputs[i].name, outputs[i].ptr, outputs[i].bytes, in_place));
        for (size_t j = i + 1; j < n_outputs; ++j)
            SIEVE_RETURN_IF_ERROR(require_same_or_disjoint(op, outputs[i].name, outputs[i].ptr, outputs[i].bytes,
                                                           outputs[j].name, outputs[j].ptr, outputs[j].bytes, false));
    }
    return Status::ok();
}

}  // namespace sieve
