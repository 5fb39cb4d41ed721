// Kernel bodies of RMSNorm and LayerNorm rows (ops/rms_norm.h, ops/layer_norm.h).
// A part of kernels_impl.inl, which includes it inside namespace sieve::cpu::<isa>::{anonymous} once per
// ISA (simd.h "ODR safety"); not a standalone header.

// Σ v² over one row, four independent vector accumulators (order differs from ref: tolerance).
template <bool XB>
float row_sum_squares(const void* x, int64_t n) {
    VF a0 = vf_zero(), a1 = vf_zero(), a2 = vf_zero(), a3 = vf_zero();
    int64_t i = 0;
    for (; i + 4 * kLanes <= n; i += 4 * kLanes) {
        const VF v0 = vf_load_row(x, XB, i), v1 = vf_load_row(x, XB, i + kLanes);
        const VF v2 = vf_load_row(x, XB, i + 2 * kLanes), v3 = vf_load_row(x, XB, i + 3 * kLanes);
        a0 = vf_fma(v0, v0, a0);
        a1 = vf_fma(v1, v1, a1);
        a2 = vf_fma(v2, v2, a2);
        a3 = vf_fma(v3, v3, a3);
    }
    for (; i + kLanes <= n; i += kLanes) {
        const VF v = vf_load_row(x, XB, i);
        a0 = vf_fma(v, v, a0);
    }
    float sum = vf_sum(vf_add(vf_add(a0, a1), vf_add(a2, a3)));
    for (; i < n; ++i) {
        const float v = s_load(x, XB, i);
        sum += v * v;
    }
    return sum;
}

template <bool XB>
float row_sum(const void* x, int64_t n) {
    VF a0 = vf_zero(), a1 = vf_zero();
    int64_t i = 0;
    for (; i + 2 * kLanes <= n; i += 2 * kLanes) {
        a0 = vf_add(a0, vf_load_row(x, XB, i));
        a1 = vf_add(a1, vf_load_row(x, XB, i + kLanes));
    }
    for (; i + kLanes <= n; i += kLanes) a0 = vf_add(a0, vf_load_row(x, XB, i));
    float sum = vf_sum(vf_add(a0, a1));
    for (; i < n; ++i) sum += s_load(x, XB, i);
    return sum;
}

template <bool XB>
float row_sum_sq_dev(const void* x, int64_t n, float mean) {
    const VF m = vf_set1(mean);
    VF a0 = vf_zero(), a1 = vf_zero();
    int64_t i = 0;
    for (; i + 2 * kLanes <= n; i += 2 * kLanes) {
        const VF d0 = vf_sub(vf_load_row(x, XB, i), m), d1 = vf_sub(vf_load_row(x, XB, i + kLanes), m);
        a0 = vf_fma(d0, d0, a0);
        a1 = vf_fma(d1, d1, a1);
    }
    for (; i + kLanes <= n; i += kLanes) {
        const VF d = vf_sub(vf_load_row(x, XB, i), m);
        a0 = vf_fma(d, d, a0);
    }
    float sum = vf_sum(vf_add(a0, a1));
    for (; i < n; ++i) {
        const float d = s_load(x, XB, i) - mean;
        sum += d * d;
    }
    return sum;
}

// y_i = (x_i · inv) · g_i, g by mode (ops/rms_norm.h).
template <bool XB, bool YB, RmsNormWeight M>
void rms_norm_row(const void* x, void* y, const float* w, int64_t n, float eps) {
    const float ms = row_sum_squares<XB>(x, n) / static_cast<float>(n);
    const float inv = 1.0f / __builtin_sqrtf(ms + eps);
    const VF vinv = vf_set1(inv), one = vf_set1(1.0f);
    int64_t i = 0;
    for (; i + kLanes <= n; i += kLanes) {
        VF v = vf_mul(vf_load_row(x, XB, i), vinv);
        if constexpr (M == RmsNormWeight::multiply) v = vf_mul(v, vf_load(w + i));
        if constexpr (M == RmsNormWeight::one_plus) v = vf_mul(v, vf_add(one, vf_load(w + i)));
        vf_store_row(y, YB, i, v);
    }
    for (; i < n; ++i) {
        float v = s_load(x, XB, i) * inv;
        if constexpr (M == RmsNormWeight::multiply) v = v * w[i];
        if constexpr (M == RmsNormWeight::one_plus) v = v * (1.0f + w[i]);
        s_store(y, YB, i, v);
    }
}

template <bool XB, bool YB, RmsNormWeight M>
void rms_norm_rows_t(const RmsNormParams& p, int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) {
        const int64_t t = r / p.n_heads, h = r % p.n_heads;
        const char* x = static_cast<const char*>(p.x) + (t * p.x_token_stride + h * p.x_head_stride) * (XB ? 2 : 4);
        char* y = static_cast<char*>(p.y) + (t * p.y_token_stride + h * p.y_head_stride) * (YB ? 2 : 4);
        rms_norm_row<XB, YB, M>(x, y, p.weight, p.dim, p.eps);
    }
}

template <bool XB, bool YB>
void rms_norm_rows_w(const RmsNormParams& p, int64_t r0, int64_t r1) {
    switch (p.weight_mode) {
        case RmsNormWeight::none: return rms_norm_rows_t<XB, YB, RmsNormWeight::none>(p, r0, r1);
        case RmsNormWeight::multiply: return rms_norm_rows_t<XB, YB, RmsNormWeight::multiply>(p, r0, r1);
        case RmsNormWeight::one_plus: return rms_norm_rows_t<XB, YB, RmsNormWeight::one_plus>(p, r0, r1);
    }
}

void rms_norm_rows(const RmsNormParams& p, int64_t r0, int64_t r1) {
    const bool xb = p.x_type == DType::bf16, yb = p.y_type == DType::bf16;
    if (xb && yb) return rms_norm_rows_w<true, true>(p, r0, r1);
    if (xb) return rms_norm_rows_w<true, false>(p, r0, r1);
    if (yb) return rms_norm_rows_w<false, true>(p, r0, r1);
    return rms_norm_rows_w<false, false>(p, r0, r1);
}

template <bool XB, bool YB>
void layer_norm_rows_t(const LayerNormParams& p, int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) {
        const int64_t t = r / p.n_heads, h = r % p.n_heads;
        const char* x = static_cast<const char*>(p.x) + (t * p.x_token_stride + h * p.x_head_stride) * (XB ? 2 : 4);
        char* y = static_cast<char*>(p.y) + (t * p.y_token_stride + h * p.y_head_stride) * (YB ? 2 : 4);
        const int64_t n = p.dim;
        const float mean = row_sum<XB>(x, n) / static_cast<float>(n);
        const float var = row_sum_sq_dev<XB>(x, n, mean) / static_cast<float>(n);
        const float inv = 1.0f / __builtin_sqrtf(var + p.eps);
        const VF vmean = vf_set1(mean), vinv = vf_set1(inv);
        int64_t i = 0;
        for (; i + kLanes <= n; i += kLanes) {
            VF v = vf_mul(vf_sub(vf_load_row(x, XB, i), vmean), vinv);
            if (p.weight) v = vf_mul(v, vf_load(p.weight + i));
            if (p.bias) v = vf_add(v, vf_load(p.bias + i));
            vf_store_row(y, YB, i, v);
        }
        for (; i < n; ++i) {
            float v = (s_load(x, XB, i) - mean) * inv;
            if (p.weight) v = v * p.weight[i];
            if (p.bias) v = v + p.bias[i];
            s_store(y, YB, i, v);
        }
    }
}

void layer_norm_rows(const LayerNormParams& p, int64_t r0, int64_t r1) {
    const bool xb = p.x_type == DType::bf16, yb = p.y_type == DType::bf16;
    if (xb && yb) return layer_norm_rows_t<true, true>(p, r0, r1);
    if (xb) return layer_norm_rows_t<true, false>(p, r0, r1);
    if (yb) return layer_norm_rows_t<false, true>(p, r0, r1);
    return layer_norm_rows_t<false, false>(p, r0, r1);
}
