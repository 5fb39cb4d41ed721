#include "sieve/ops/op_common.h"

#include <limits>
#include <string>

namespace sieve::op_check {

namespace {

bool mul_overflows(int64_t a, int64_t b, int64_t* out) { return __builtin_mul_overflow(a, b, out); }
bool add_overflows(int64_t a, int64_t b, int64_t* out) { return __builtin_add_overflow(a, b, out); }

}  // namespace

Status require_ptr(std::string_view op, std::string_view name, const void* p) {
    if (p == nullptr) return invalid_argument_error("{}: {} is null", op, name);
    return Status::ok();
}

Status require_at_least(std::string_view op, std::string_view name, int64_t value, int64_t min) {
    if (value < min) return invalid_argument_error("{}: {} = {}, expected ≥ {}", op, name, value, min);
    return Status::ok();
}

Status require_dtype(std::string_view op, std::string_view name, DType t,
                     std::initializer_list<DType> allowed) {
    for (DType a : allowed)
        if (a == t) return Status::ok();
    std::string list;
    for (DType a : allowed) {
        if (!list.empty()) list += ", ";
        list += dtype_name(a);
    }
    return invalid_argument_error("{}: {} = {}, expected one of {}", op, name, dtype_name(t), list);
}

Expected<int64_t> rows_extent(std::string_view op, std::string_view name, const RowsLayout& l,
                              size_t elem_size) {
    // Messages are formatted only on failure: validate() runs on every op call and must not allocate.
    const int64_t dims[3] = {l.n_tokens, l.n_heads, l.dim};
    const char* dim_names[3] = {"n_tokens", "n_heads", "dim"};
    for (int i = 0; i < 3; ++i)
        if (dims[i] < 0) return invalid_argument_error("{}: {} {} = {}, expected ≥ 0", op, name, dim_names[i], dims[i]);
    if (l.token_stride < 0)
        return invalid_argument_error("{}: {}_token_stride = {}, expected ≥ 0", op, name, l.token_stride);
    if (l.head_stride < 0)
        return invalid_argument_error("{}: {}_head_stride = {}, expected ≥ 0", op, name, l.head_stride);
    if (l.n_tokens == 0 || l.n_heads == 0 || l.dim == 0) return int64_t{0};
    int64_t a = 0, b = 0, extent = 0, bytes = 0;
    if (mul_overflows(l.n_tokens - 1, l.token_stride, &a) || mul_overflows(l.n_heads - 1, l.head_stride, &b) ||
        add_overflows(a, b, &extent) || add_overflows(extent, l.dim, &extent) ||
        mul_overflows(extent, static_cast<int64_t>(elem_size), &bytes))
        return invalid_argument_error(
            "{}: {} layout [{}, {}, {}] with strides ({}, {}) overflows int64", op, name, l.n_tokens, l.n_heads,
            l.dim, l.token_stride, l.head_stride);
    return extent;
}

Expected<int64_t> output_rows_extent(std::string_view op, std::string_view name, const RowsLayout& l,
                                     size_t elem_size) {
    SIEVE_ASSIGN_OR_RETURN(int64_t extent, rows_extent(op, name, l, elem_size));
    if (extent == 0) return extent;
    if (l.n_heads > 1 && l.head_stride < l.dim)
        return invalid_argument_error("{}: {}_head_stride = {} < dim {}: output rows overlap", op, name,
                                      l.head_stride, l.dim);
    const int64_t token_span = (l.n_heads - 1) * l.head_stride + l.dim;  // no overflow: extent fits
    if (l.n_tokens > 1 && l.token_stride < token_span)
        return invalid_argument_error(
            "{}: {}_token_stride = {} < {} (= (n_heads − 1)·head_stride + dim): output rows overlap", op, name,
            l.token_stride, token_span);
    return extent;
}

Status require_same_or_disjoint(std::string_view op, std::string_view a_name, const void* a,
                                int64_t a_bytes, std::string_view b_name, const void* b, int64_t b_bytes,
                                bool same_view) {
    if (a == nullptr || b == nullptr || a_bytes == 0 || b_bytes == 0) return Status::ok();
    const auto pa = reinterpret_cast<uintptr_t>(a);
    const auto pb = reinterpret_cast<uintptr_t>(b);
    const bool disjoint = pa + static_cast<uintptr_t>(a_bytes) <= pb || pb + static_cast<uintptr_t>(b_bytes) <= pa;
    if (disjoint) return Status::ok();
    if (pa == pb && same_view) return Status::ok();
    return invalid_argument_error(
        "{}: {} and {} overlap but are not the same view (in-place needs the same pointer, strides and dtype)",
        op, a_name, b_name);
}

Expected<int64_t> bytes_of(std::string_view op, std::string_view name, int64_t n, size_t elem_size) {
    int64_t bytes = 0;
    if (n < 0 || mul_overflows(n, static_cast<int64_t>(elem_size), &bytes))
        return invalid_argument_error("{}: {} with {} elements overflows int64", op, name, n);
    return bytes;
}

Expected<ScoreOutputsExtent> score_outputs_extent(std::string_view op, std::string_view cols_name, int64_t n_tokens,
                                                  int64_t n_cols, const float* scores, int64_t scores_row_stride,
                                                  const int32_t* selected, int64_t k, int64_t selected_row_stride) {
    ScoreOutputsExtent e;
    if (selected == nullptr || scores != nullptr) {
        SIEVE_ASSIGN_OR_RETURN(e.scores, output_rows_extent(op, "scores", {n_tokens, 1, n_cols, scores_row_stride, 0}, 4));
    }
    if (selected != nullptr) {
        SIEVE_RETURN_IF_ERROR(require_at_least(op, "k", k, 1));
        if (n_cols > INT32_MAX)
            return invalid_argument_error("{}: {} = {} does not fit the int32 selection", op, cols_name, n_cols);
        SIEVE_ASSIGN_OR_RETURN(e.selected, output_rows_extent(op, "selected", {n_tokens, 1, k, selected_row_stride, 0}, 4));
    }
    return e;
}

}  // namespace sieve::op_check
