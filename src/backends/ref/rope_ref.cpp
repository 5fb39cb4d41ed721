// ref RoPE: the pair rule of ops/rope.h, one pair at a time.
#include "backends/ref/ref_ops.h"
#include "sieve/ops/op_common.h"
#include "sieve/ops/rope.h"

namespace sieve::ref {

Status rope(const RopeParams& p) {
    SIEVE_RETURN_IF_ERROR(validate_and_check_indices(p));
    const int64_t half = p.rot_dim / 2;
    const int64_t start = p.slice == RopeSlice::first ? 0 : p.head_dim - p.rot_dim;
    std::vector<float> cos_v(static_cast<size_t>(half)), sin_v(static_cast<size_t>(half));
    for (int64_t t = 0; t < p.n_tokens; ++t) {
        const int64_t pos = p.positions_type == DType::i64 ? static_cast<const int64_t*>(p.positions)[t]
                                                           : static_cast<const int32_t*>(p.positions)[t];
        rope_cos_sin(pos, p.inv_freq, half, p.attention_factor, cos_v.data(), sin_v.data());
        for (int64_t h = 0; h < p.n_heads; ++h) {
            const int64_t xo = t * p.x_token_stride + h * p.x_head_stride;
            const int64_t yo = t * p.y_token_stride + h * p.y_head_stride;
            for (int64_t i = 0; i < p.head_dim; ++i)  // dims outside the slice are copied
                if (i < start || i >= start + p.rot_dim) store(p.y, p.y_type, yo + i, load(p.x, p.x_type, xo + i));
            for (int64_t i = 0; i < half; ++i) {
                const int64_t i0 = start + (p.pairing == RopePairing::interleaved ? 2 * i : i);
                const int64_t i1 = start + (p.pairing == RopePairing::interleaved ? 2 * i + 1 : i + half);
                const float x0 = load(p.x, p.x_type, xo + i0), x1 = load(p.x, p.x_type, xo + i1);
                const float c = cos_v[static_cast<size_t>(i)], s = sin_v[static_cast<size_t>(i)];
                const float y0 = p.inverse ? x0 * c + x1 * s : x0 * c - x1 * s;
                const float y1 = p.inverse ? x1 * c - x0 * s : x0 * s + x1 * c;
                store(p.y, p.y_type, yo + i0, y0);
                store(p.y, p.y_type, yo + i1, y1);
            }
        }
    }
    return Status::ok();
}

}  // namespace sieve::ref
