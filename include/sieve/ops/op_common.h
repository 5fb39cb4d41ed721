// Checks shared by the validate() functions of the op contracts: pointer presence, dims, dtype
// sets, strided row layouts (with int64 overflow checks), and output overlap. Every message
// starts with the op name and names the field and the values involved.
//
// Every op params struct P has two checks:
//   validate(p)       shapes, strides, dtypes, pointer presence, sizes and overflow, overlap. It never
//                     reads memory behind a pointer of p, so it runs on params whose arrays live in
//                     device memory.
//   check_indices(p)  the contents of p's index arrays (block tables, slot lists, top-k rows, lengths,
//                     positions): ranges, padding rules, residency of the blocks an op reads, and the
//                     checks that only apply when some entry is read. It reads those arrays, so it may
//                     only be called on host-readable memory: the ref and cpu backends call it on the
//                     op's params, a device backend on the host copies a step plan keeps before upload.
//                     It assumes validate(p) passed (it relies on the sizes and pointers validate checked).
// validate_and_check_indices(p) (below) runs both, in that order.
//
// Row layout convention used by the row-wise ops (norms, RoPE, quantization, Hadamard): a
// tensor [n_tokens, n_heads, dim] whose element (t, h, i) lives at
//   base[t · token_stride + h · head_stride + i]          (strides in elements, ≥ 0)
// i.e. the last dim is contiguous. n_heads = 1 gives plain rows. Inputs may overlap themselves
// (a stride of 0 broadcasts); outputs must not (each output element is written once).
#pragma once

#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <string_view>

#include "sieve/core/dtype.h"
#include "sieve/core/status.h"

namespace sieve::op_check {

// p != nullptr.
Status require_ptr(std::string_view op, std::string_view name, const void* p);
// value ≥ min.
Status require_at_least(std::string_view op, std::string_view name, int64_t value, int64_t min);
// t ∈ allowed; otherwise invalid_argument listing the allowed types.
Status require_dtype(std::string_view op, std::string_view name, DType t,
                     std::initializer_list<DType> allowed);

// A strided [n_tokens, n_heads, dim] layout (see the file comment).
struct RowsLayout {
    int64_t n_tokens = 0, n_heads = 0, dim = 0;
    int64_t token_stride = 0, head_stride = 0;
};

// Strides ≥ 0 and the byte extent of the layout fits in int64. Returns the extent in elements
// (one past the last element touched; 0 when the layout is empty).
Expected<int64_t> rows_extent(std::string_view op, std::string_view name, const RowsLayout& l,
                              size_t elem_size);
// As rows_extent, and no two rows share an element: head_stride ≥ dim (when n_heads > 1) and
// token_stride ≥ (n_heads − 1)·head_stride + dim (when n_tokens > 1).
Expected<int64_t> output_rows_extent(std::string_view op, std::string_view name, const RowsLayout& l,
                                     size_t elem_size);

// Two buffers may be the very same view (in-place: same pointer, same layout, same element
// size) or disjoint; a partial overlap is invalid_argument.
Status require_same_or_disjoint(std::string_view op, std::string_view a_name, const void* a,
                                int64_t a_bytes, std::string_view b_name, const void* b, int64_t b_bytes,
                                bool same_view);

// Byte size helper with overflow check: n elements of elem_size bytes.
Expected<int64_t> bytes_of(std::string_view op, std::string_view name, int64_t n, size_t elem_size);

// The outputs of an op with scores and an optional fused selection (ops/indexer_scores.h): f32 score
// rows [n_tokens, n_cols] (required unless selecting) and, when selecting, int32 picks [n_tokens, k] with k ≥ 1 and candidate indices (< n_cols, named cols_name) that fit int32.
// The extents are in elements, 0 for an output that is absent.
struct ScoreOutputsExtent {
    int64_t scores = 0, selected = 0;
};
Expected<ScoreOutputsExtent> score_outputs_extent(std::string_view op, std::string_view cols_name, int64_t n_tokens,
                                                  int64_t n_cols, const float* scores, int64_t scores_row_stride,
                                                  const int32_t* selected, int64_t k, int64_t selected_row_stride);

}  // namespace sieve::op_check

namespace sieve {

// validate(p), then check_indices(p): the full check of an op's params for a backend whose index
// arrays are host memory (ref, cpu). Extra arguments go to validate (linear's feature counts).
template <class P, class... Shape>
Status validate_and_check_indices(const P& p, const Shape&... shape) {
    SIEVE_RETURN_IF_ERROR(validate(p, shape...));
    return check_indices(p);
}

}  // namespace sieve
