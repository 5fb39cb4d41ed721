// Strided [n_tokens, n_heads, dim] tensors in guarded buffers, for the row-wise op tests.
#pragma once

#include "harness.h"

namespace sieve::test {

struct RowsLayout {
    int64_t n_tokens = 0, n_heads = 1, dim = 0, token_stride = 0, head_stride = 0;
    int64_t extent() const { return rows_extent(n_tokens, n_heads, dim, token_stride, head_stride); }
    int64_t offset(int64_t t, int64_t h, int64_t i) const { return t * token_stride + h * head_stride + i; }
};

// Contiguous, or with random gaps between heads and tokens (never overlapping).
inline RowsLayout make_rows_layout(Rng& rng, int64_t n_tokens, int64_t n_heads, int64_t dim, bool padded) {
    RowsLayout l{n_tokens, n_heads, dim, 0, 0};
    l.head_stride = dim + (padded ? rng.integer(1, 9) : 0);
    l.token_stride = n_heads * l.head_stride + (padded ? rng.integer(1, 17) : 0);
    return l;
}

// A guarded buffer holding one strided view of dtype f32 | bf16 | u8 (poison outside the view).
struct RowsTensor {
    RowsLayout l;
    DType t = DType::f32;
    GuardedBuffer buf;

    RowsTensor(const RowsLayout& layout, DType type)
        : l(layout), t(type), buf(static_cast<size_t>(std::max<int64_t>(layout.extent(), 1)) * dtype_size(type)) {}
    size_t elem() const { return dtype_size(t); }
    void* data() { return buf.data(); }
    const void* data() const { return buf.data(); }
    float get(int64_t tk, int64_t h, int64_t i) const { return load_as_f32(buf.data(), t, l.offset(tk, h, i)); }
    template <typename Gen>
    void fill(Gen&& gen) {
        fill_rows(buf.data(), t, l.n_tokens, l.n_heads, l.dim, l.token_stride, l.head_stride, gen);
    }
    // The view's values in (token, head, i) order, widened to double.
    std::vector<double> values() const {
        std::vector<double> v;
        for (int64_t tk = 0; tk < l.n_tokens; ++tk)
            for (int64_t h = 0; h < l.n_heads; ++h)
                for (int64_t i = 0; i < l.dim; ++i) v.push_back(get(tk, h, i));
        return v;
    }
    // guards + nothing written outside the view
    testing::AssertionResult intact(const std::string& what) const {
        auto g = buf.guards_intact(what);
        if (!g) return g;
        return untouched_outside_rows(buf, l.n_tokens, l.n_heads, l.dim, l.token_stride, l.head_stride, elem(), what);
    }
    void copy_from(const RowsTensor& o) { std::memcpy(buf.data(), o.buf.data(), buf.bytes()); }
};

// What a (token, head) row of an attention output must hold in the non-finite input cases of the
// sparse-attention contracts: finite values, exact zeros (no valid row), NaN everywhere, or at least
// one non-finite value (infinite inputs, whose rows mix inf and NaN by position).
enum class RowExpect { finite, zero, nan, non_finite };

inline const char* row_expect_name(RowExpect e) {
    switch (e) {
        case RowExpect::finite: return "finite";
        case RowExpect::zero: return "zero";
        case RowExpect::nan: return "NaN";
        case RowExpect::non_finite: return "non-finite";
    }
    return "?";
}

inline testing::AssertionResult row_is(const RowsTensor& out, int64_t tk, int64_t h, RowExpect e, const std::string& what) {
    int64_t n_finite = 0, n_zero = 0, n_nan = 0;
    for (int64_t i = 0; i < out.l.dim; ++i) {
        const float v = out.get(tk, h, i);
        n_finite += std::isfinite(v);
        n_zero += v == 0.0f;
        n_nan += std::isnan(v);
    }
    const int64_t n = out.l.dim;
    const bool ok = e == RowExpect::finite ? n_finite == n
                  : e == RowExpect::zero   ? n_zero == n
                  : e == RowExpect::nan    ? n_nan == n
                                           : n_finite < n;
    if (ok) return testing::AssertionSuccess();
    return testing::AssertionFailure() << what << ": token " << tk << " head " << h << " should be "
                                       << row_expect_name(e) << ", has " << n_finite << " finite (" << n_zero
                                       << " zero), " << n_nan << " NaN of " << n << " values (first "
                                       << out.get(tk, h, 0) << ")";
}

}  // namespace sieve::test
