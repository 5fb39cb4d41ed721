// Kernel bodies of the Walsh-Hadamard transform of rows (ops/hadamard.h).
// A part of kernels_impl.inl, which includes it inside namespace sieve::cpu::<isa>::{anonymous} once per
// ISA (simd.h "ODR safety"); not a standalone header.

// Butterflies over h = 1, 2, 4, … on an fp32 row (bit-identical to ref: same pairs, same order).
void hadamard_f32_inplace(float* v, int64_t n) {
    int64_t h = 1;
    if constexpr (kLanes > 1) {
        if (n >= kLanes) {
            for (int64_t j = 0; j < n; j += kLanes) {
                VF a = vf_load(v + j);
                for (int hh = 1; hh < kLanes; hh *= 2) a = vf_butterfly(a, hh);
                vf_store(v + j, a);
            }
            h = kLanes;
            for (; h < n; h *= 2) {
                for (int64_t b = 0; b < n; b += 2 * h) {
                    for (int64_t j = b; j < b + h; j += kLanes) {
                        const VF a = vf_load(v + j), c = vf_load(v + j + h);
                        vf_store(v + j, vf_add(a, c));
                        vf_store(v + j + h, vf_sub(a, c));
                    }
                }
            }
            return;
        }
    }
    for (; h < n; h *= 2) {
        for (int64_t b = 0; b < n; b += 2 * h) {
            for (int64_t j = b; j < b + h; ++j) {
                const float a = v[j], c = v[j + h];
                v[j] = a + c;
                v[j + h] = a - c;
            }
        }
    }
}

template <bool XB, bool YB>
void hadamard_rows_t(const HadamardParams& p, int64_t r0, int64_t r1) {
    float buf[kHadamardMaxDim];
    const int64_t n = p.dim;
    const VF vs = vf_set1(p.scale);
    for (int64_t r = r0; r < r1; ++r) {
        const int64_t t = r / p.n_heads, h = r % p.n_heads;
        const char* x = static_cast<const char*>(p.x) + (t * p.x_token_stride + h * p.x_head_stride) * (XB ? 2 : 4);
        char* y = static_cast<char*>(p.y) + (t * p.y_token_stride + h * p.y_head_stride) * (YB ? 2 : 4);
        int64_t i = 0;
        for (; i + kLanes <= n; i += kLanes) vf_store(buf + i, vf_load_row(x, XB, i));
        for (; i < n; ++i) buf[i] = s_load(x, XB, i);
        hadamard_f32_inplace(buf, n);
        for (i = 0; i + kLanes <= n; i += kLanes) vf_store_row(y, YB, i, vf_mul(vf_load(buf + i), vs));
        for (; i < n; ++i) s_store(y, YB, i, buf[i] * p.scale);
    }
}

void hadamard_rows(const HadamardParams& p, int64_t r0, int64_t r1) {
    const bool xb = p.x_type == DType::bf16, yb = p.y_type == DType::bf16;
    if (xb && yb) return hadamard_rows_t<true, true>(p, r0, r1);
    if (xb) return hadamard_rows_t<true, false>(p, r0, r1);
    if (yb) return hadamard_rows_t<false, true>(p, r0, r1);
    return hadamard_rows_t<false, false>(p, r0, r1);
}
