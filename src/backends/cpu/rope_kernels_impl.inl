// Kernel bodies of RoPE blocks of tokens × heads (ops/rope.h).
// A part of kernels_impl.inl, which includes it inside namespace sieve::cpu::<isa>::{anonymous} once per
// ISA (simd.h "ODR safety"); not a standalone header.

constexpr int64_t kRopeChunk = 128;  // pairs per cos/sin chunk (stack buffers, any rot_dim)
constexpr int64_t kRopePrefetchHeads = 6;

template <bool XB, bool YB>
void copy_span(const void* x, void* y, int64_t begin, int64_t end) {
    int64_t i = begin;
    for (; i + kLanes <= end; i += kLanes) vf_store_row(y, YB, i, vf_load_row(x, XB, i));
    for (; i < end; ++i) s_store(y, YB, i, s_load(x, XB, i));
}

// Bit-identical to ref: each product rounded, then the sum (ops/rope.h); no FMA.
template <bool XB, bool YB>
void rope_block_t(const RopeParams& p, int64_t t0, int64_t t1, int64_t h0, int64_t h1) {
    const int64_t half = p.rot_dim / 2;
    const int64_t start = p.slice == RopeSlice::first ? 0 : p.head_dim - p.rot_dim;
    const bool inv = p.inverse;
    float c[kRopeChunk], s[kRopeChunk];
    float cc[2 * kRopeChunk], ss[2 * kRopeChunk];  // interleaved: per-dim cos and ∓sin
    for (int64_t t = t0; t < t1; ++t) {
        const int64_t pos = p.positions_type == DType::i64 ? static_cast<const int64_t*>(p.positions)[t]
                                                           : static_cast<const int32_t*>(p.positions)[t];
        const char* xt = static_cast<const char*>(p.x) + t * p.x_token_stride * (XB ? 2 : 4);
        char* yt = static_cast<char*>(p.y) + t * p.y_token_stride * (YB ? 2 : 4);
        if (p.x != p.y || XB != YB) {  // dims outside the slice are copied (in place: already there)
            for (int64_t h = h0; h < h1; ++h) {
                const char* x = xt + h * p.x_head_stride * (XB ? 2 : 4);
                char* y = yt + h * p.y_head_stride * (YB ? 2 : 4);
                copy_span<XB, YB>(x, y, 0, start);
                copy_span<XB, YB>(x, y, start + p.rot_dim, p.head_dim);
            }
        }
        for (int64_t i0 = 0; i0 < half; i0 += kRopeChunk) {
            const int64_t nc = s_min(kRopeChunk, half - i0);
            rope_cos_sin(pos, p.inv_freq + i0, nc, p.attention_factor, c, s);  // the shared definition (ops)
            if (p.pairing == RopePairing::interleaved) {
                // lane 2i: y = x0·c + x1·(∓s), lane 2i+1: y = x1·c + x0·(±s)
                for (int64_t i = 0; i < nc; ++i) {
                    cc[2 * i] = c[i];
                    cc[2 * i + 1] = c[i];
                    ss[2 * i] = inv ? s[i] : -s[i];
                    ss[2 * i + 1] = inv ? -s[i] : s[i];
                }
            }
            for (int64_t h = h0; h < h1; ++h) {
                const char* x = xt + h * p.x_head_stride * (XB ? 2 : 4);
                char* y = yt + h * p.y_head_stride * (YB ? 2 : 4);
                if (h + kRopePrefetchHeads < h1) {  // the slice is a few cache lines per strided head row:
                    // fetch ahead, the hardware prefetcher does not follow the head stride far enough
                    const char* xn = x + kRopePrefetchHeads * p.x_head_stride * (XB ? 2 : 4);
                    char* yn = y + kRopePrefetchHeads * p.y_head_stride * (YB ? 2 : 4);
                    for (int64_t b = 0; b < 2 * nc * (XB ? 2 : 4); b += 64) prefetch_l1(xn + (start + i0) * (XB ? 2 : 4) + b);
                    for (int64_t b = 0; b < 2 * nc * (YB ? 2 : 4); b += 64) prefetch_l1(yn + (start + i0) * (YB ? 2 : 4) + b);
                }
                if (p.pairing == RopePairing::interleaved) {
                    const int64_t d0 = start + 2 * i0, nd = 2 * nc;
                    int64_t j = 0;
                    if constexpr (kLanes > 1) {
                        for (; j + kLanes <= nd; j += kLanes) {
                            const VF v = vf_load_row(x, XB, d0 + j);
                            const VF r = vf_add(vf_mul(v, vf_load(cc + j)), vf_mul(vf_swap_pairs(v), vf_load(ss + j)));
                            vf_store_row(y, YB, d0 + j, r);
                        }
                    }
                    for (; j < nd; j += 2) {
                        const float x0 = s_load(x, XB, d0 + j), x1 = s_load(x, XB, d0 + j + 1);
                        const float ci = c[j / 2], si = s[j / 2];
                        s_store(y, YB, d0 + j, inv ? x0 * ci + x1 * si : x0 * ci - x1 * si);
                        s_store(y, YB, d0 + j + 1, inv ? x1 * ci - x0 * si : x0 * si + x1 * ci);
                    }
                } else {
                    const int64_t lo = start + i0, hi = start + half + i0;
                    int64_t j = 0;
                    for (; j + kLanes <= nc; j += kLanes) {
                        const VF a = vf_load_row(x, XB, lo + j), b = vf_load_row(x, XB, hi + j);
                        const VF vc = vf_load(c + j), vs = vf_load(s + j);
                        VF r0, r1;
                        if (inv) {
                            r0 = vf_add(vf_mul(a, vc), vf_mul(b, vs));
                            r1 = vf_sub(vf_mul(b, vc), vf_mul(a, vs));
                        } else {
                            r0 = vf_sub(vf_mul(a, vc), vf_mul(b, vs));
                            r1 = vf_add(vf_mul(a, vs), vf_mul(b, vc));
                        }
                        vf_store_row(y, YB, lo + j, r0);
                        vf_store_row(y, YB, hi + j, r1);
                    }
                    for (; j < nc; ++j) {
                        const float x0 = s_load(x, XB, lo + j), x1 = s_load(x, XB, hi + j);
                        s_store(y, YB, lo + j, inv ? x0 * c[j] + x1 * s[j] : x0 * c[j] - x1 * s[j]);
                        s_store(y, YB, hi + j, inv ? x1 * c[j] - x0 * s[j] : x0 * s[j] + x1 * c[j]);
                    }
                }
            }
        }
    }
}

void rope_block(const RopeParams& p, int64_t t0, int64_t t1, int64_t h0, int64_t h1) {
    const bool xb = p.x_type == DType::bf16, yb = p.y_type == DType::bf16;
    if (xb && yb) return rope_block_t<true, true>(p, t0, t1, h0, h1);
    if (xb) return rope_block_t<true, false>(p, t0, t1, h0, h1);
    if (yb) return rope_block_t<false, true>(p, t0, t1, h0, h1);
    return rope_block_t<false, false>(p, t0, t1, h0, h1);
}
