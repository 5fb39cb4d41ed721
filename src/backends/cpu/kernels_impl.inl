// Kernel bodies of the cpu backend, written once over simd.h and compiled once per ISA by
// kernels_<isa>.cpp, which defines SIEVE_CPU_TABLE (the table's name), SIEVE_CPU_ISA_NAME and
// SIEVE_CPU_ISA_NS before including this file. The kernels live in namespace sieve::cpu::<isa> (so
// profiles name op, dtype template arguments and ISA: sieve::cpu::avx512::…::rms_norm_rows_t<true, …>)
// inside an anonymous namespace (see simd.h, "ODR safety"). Semantics: the ops/*.h contracts; where a
// comment says "bit-identical to ref", the conformance tests compare bytes.
#include "backends/cpu/kernels.h"
#include "backends/cpu/simd.h"

#if !defined(SIEVE_CPU_TABLE) || !defined(SIEVE_CPU_ISA_NAME) || !defined(SIEVE_CPU_ISA_NS)
#error "define SIEVE_CPU_TABLE, SIEVE_CPU_ISA_NAME and SIEVE_CPU_ISA_NS before including kernels_impl.inl"
#endif

namespace sieve::cpu::SIEVE_CPU_ISA_NS {
namespace {

// ================================ RMSNorm / LayerNorm =============================================

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

// ======================================== RoPE ====================================================

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

// =================================== FP8 quantization =============================================

// e4m3 codes of finite values already clamped to ±448 (bit-identical to core f32_to_fp8_e4m3).
inline VI vi_e4m3_encode(VF v) {
    const VI bits = vi_bits(v);
    const VI a = vi_and(bits, vi_set1(0x7fffffff));
    const VI sign = vi_and(vi_shr<24>(bits), vi_set1(0x80));
    const VI sub = vi_cvt_rne(vf_mul(vf_from_bits(a), vf_set1(512.0f)));  // |v| < 2^-6: RNE(|v|·2^9)
    const VI r = vi_add(a, vi_add(vi_set1(0x7ffff), vi_and(vi_shr<20>(a), vi_set1(1))));
    const VI normal = vi_sub(vi_shr<20>(r), vi_set1(120 << 3));  // 3 mantissa bits, RNE; rebias 127 → 7
    const uint32_t is_sub = vi_lt_mask(a, vi_set1(0x3c800000));
    return vi_or(vi_select(is_sub, sub, normal), sign);
}

// f32 lanes rounded to bf16 and widened back (RNE, NaN kept quiet with its sign: core f32_to_bf16).
inline VF vf_round_bf16(VF v) {
    const VI u = vi_bits(v);
    const VI nan = vi_or(u, vi_set1(0x00400000));
    const VI rounded = vi_add(u, vi_add(vi_set1(0x7fff), vi_and(vi_shr<16>(u), vi_set1(1))));
    const uint32_t is_nan = vi_lt_mask(vi_set1(0x7f800000), vi_and(u, vi_set1(0x7fffffff)));
    return vf_from_bits(vi_and(vi_select(is_nan, nan, rounded), vi_set1(static_cast<int32_t>(0xffff0000u))));
}

// Element i (lanes i.. i + kLanes) of the values a group quantizes: x widened, and an f32 x rounded to bf16
// first when RB (ops/cache_store.h round_bf16).
template <bool XB, bool RB>
inline VF vf_load_quant(const void* x, int64_t i) {
    const VF v = vf_load_row(x, XB, i);
    if constexpr (RB && !XB) return vf_round_bf16(v);
    return v;
}
template <bool XB, bool RB>
inline float s_load_quant(const void* x, int64_t i) {
    const float v = s_load(x, XB, i);
    if constexpr (RB && !XB) return s_bf16_to_f32(s_f32_to_bf16(v));
    return v;
}

// The FP8 group quantizer of this backend (ops/quant_fp8.h rule, bit-identical to ref): values
// [g0, g0 + n) of x → e4m3 codes q[g0 + j], the ue8m0 byte *sb, the scale *sf and the dequantized values
// dq[g0 + j] (each output optional). Used by quant_fp8_rows and, through quant_fp8_group, by cache_store.
template <bool XB, bool DB, bool RB>
void quant_group(const void* x, int64_t n, uint8_t* q, uint8_t* sb, float* sf, void* dq, int64_t g0) {
    // amax through the integer order of |x| bits: finite ones compare like the floats, and any NaN or
    // infinity shows up as ≥ 0x7F800000.
    VI vmax = vi_set1(0);
    int64_t j = 0;
    for (; j + kLanes <= n; j += kLanes)
        vmax = vi_max(vmax, vi_and(vi_bits(vf_load_quant<XB, RB>(x, g0 + j)), vi_set1(0x7fffffff)));
    uint32_t amax_bits = static_cast<uint32_t>(vi_hmax(vmax));
    for (; j < n; ++j) {
        const uint32_t b = bits_of(s_load_quant<XB, RB>(x, g0 + j)) & 0x7fffffffu;
        if (b > amax_bits) amax_bits = b;
    }
    if (amax_bits >= 0x7f800000u) {  // NaN or infinity in the group: poisoned (ops/quant_fp8.h)
        const float nan = float_of(0x7fc00000u);
        if (sb) *sb = 0xff;
        if (sf) *sf = nan;
        for (j = 0; j < n; ++j) {
            const uint32_t b = bits_of(s_load_quant<XB, RB>(x, g0 + j));
            if (q) q[g0 + j] = static_cast<uint8_t>(0x7fu | ((b >> 24) & 0x80u));
            if (dq) s_store(dq, DB, g0 + j, nan);
        }
        return;
    }
    const float s = ue8m0_scale_for_amax(float_of(amax_bits));  // core: the reference's rounding of the scale
    const float inv_s = 1.0f / s;                               // exact: s is a power of two in [2^-22, 2^120]
    if (sb) *sb = static_cast<uint8_t>(bits_of(s) >> 23);       // the biased exponent of a normal power of two
    if (sf) *sf = s;
    const VF vinv = vf_set1(inv_s), vs = vf_set1(s), hi = vf_set1(448.0f), lo = vf_set1(-448.0f);
    for (j = 0; j + kLanes <= n; j += kLanes) {
        const VF v = vf_max(vf_min(vf_mul(vf_load_quant<XB, RB>(x, g0 + j), vinv), hi), lo);
        const VI code = vi_e4m3_encode(v);
        if (q) vi_store_u8(q + g0 + j, code);
        if (dq) vf_store_row(dq, DB, g0 + j, vf_mul(vf_e4m3_decode(vi_sar<24>(vi_shl<24>(code))), vs));  // exact
    }
    for (; j < n; ++j) {
        const float v = s_fmax(s_fmin(s_load_quant<XB, RB>(x, g0 + j) * inv_s, 448.0f), -448.0f);
        const uint8_t code = s_f32_to_e4m3_clamped(v);
        if (q) q[g0 + j] = code;
        if (dq) s_store(dq, DB, g0 + j, s_e4m3_decode(code) * s);
    }
}

template <bool XB, bool DB>
void quant_fp8_rows_t(const QuantFp8Params& p, int64_t r0, int64_t r1) {
    const int64_t n_groups = p.dim / p.group_size;
    for (int64_t r = r0; r < r1; ++r) {
        const int64_t t = r / p.n_heads, h = r % p.n_heads;
        const char* x = static_cast<const char*>(p.x) + (t * p.x_token_stride + h * p.x_head_stride) * (XB ? 2 : 4);
        uint8_t* q = p.q ? p.q + t * p.q_token_stride + h * p.q_head_stride : nullptr;
        const int64_t so = t * p.scale_token_stride + h * p.scale_head_stride;
        char* dq = p.dequant ? static_cast<char*>(p.dequant) +
                                   (t * p.dequant_token_stride + h * p.dequant_head_stride) * (DB ? 2 : 4)
                             : nullptr;
        for (int64_t g = 0; g < n_groups; ++g)
            quant_group<XB, DB, false>(x, p.group_size, q, p.scale_ue8m0 ? p.scale_ue8m0 + so + g : nullptr,
                                       p.scale_f32 ? p.scale_f32 + so + g : nullptr, dq, g * p.group_size);
    }
}

void quant_fp8_rows(const QuantFp8Params& p, int64_t r0, int64_t r1) {
    const bool xb = p.x_type == DType::bf16, db = p.dequant_type == DType::bf16;
    if (xb && db) return quant_fp8_rows_t<true, true>(p, r0, r1);
    if (xb) return quant_fp8_rows_t<true, false>(p, r0, r1);
    if (db) return quant_fp8_rows_t<false, true>(p, r0, r1);
    return quant_fp8_rows_t<false, false>(p, r0, r1);
}

float quant_fp8_group(const void* x, bool x_bf16, bool round_bf16, int64_t n, uint8_t* q) {
    float s = 0.0f;
    if (x_bf16)
        quant_group<true, false, false>(x, n, q, nullptr, &s, nullptr, 0);
    else if (round_bf16)
        quant_group<false, false, true>(x, n, q, nullptr, &s, nullptr, 0);
    else
        quant_group<false, false, false>(x, n, q, nullptr, &s, nullptr, 0);
    return s;
}

// ===================================== Hadamard ===================================================

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

// ====================================== Linear ====================================================

constexpr int kPanelVecs = static_cast<int>(kPanelCols) / kLanes;  // vectors per 16-column panel
#if defined(__AVX512F__)
// register tile: 8 rows × 2 panels = 16 zmm accumulators, so that one decoded weight vector serves 8
// rows (small decode batches are bound by the FP8 → bf16 decode, not by the dot products)
constexpr int kMaxRows = 8;
constexpr int kTilePanels = 2;
#elif defined(__AVX2__)
constexpr int kMaxRows = 4;    // 4 rows × 1 panel (2 ymm) = 8 accumulators
constexpr int kTilePanels = 1;
#else
constexpr int kMaxRows = 1;
constexpr int kTilePanels = 1;
#endif

#if defined(__AVX512BF16__)
// An fp8_pairs panel is read as one sequential stream, a 64-byte line per step, and a GEMV has nothing
// else to hide the DRAM latency behind. The hardware prefetcher restarts at every 4 KiB page, so each
// step also asks for the line a page ahead, into L2 (prefetcht1: prefetcht0 would hold the L1's few
// miss buffers). Measured with `sieve bench`, V4 decode at batch 1 and 4, three interleaved A/B rounds:
// projection and output stages 15–25 % faster; 2 and 8 KiB ahead, or none, were slower. The same
// prefetch on the bf16 panels (Hy4, QSA) measured within noise, so they go without.
constexpr int64_t kPanelPrefetchBytes = 4096;
inline void prefetch_panel_ahead(const void* line) {
    prefetch_l2(static_cast<const char*>(line) + kPanelPrefetchBytes);
}

// The fp8_pairs panels (kernels.h), packed only where AVX512_VBMI exists (cpu_linear.cpp): e4m3 → bf16 by
// two 128-entry byte tables (vpermi2b on the code's low 7 bits: the high and the low byte of the bf16 of
// the magnitude, subnormals included), the sign bit put back, the bytes unpacked low/high per 128-bit lane
// into pair 2g and pair 2g + 1 of the group (the pack's byte order makes that the word order of
// vdpbf16ps). 6 instructions per 64 weights where the arithmetic decode took 14: at 1–8 rows the FP8
// GEMV/GEMM was bound by the decode, not by the weight stream. Exact: each bf16 is the e4m3 value.
// Partial sums per 128-k block, then · S (a power of two: exact scaling).
// bf16 bits of the e4m3 magnitude c (7 bits), by integer arithmetic so that the tables are constants:
// this translation unit is compiled for AVX-512, and a table built at start-up would run its code on
// every processor.
constexpr uint16_t e4m3_magnitude_bf16(int c) {
    const int e = c >> 3, m = c & 7;
    if (e > 0) return static_cast<uint16_t>((e + 120) << 7 | m << 4);  // 2^(e−7)·(1 + m/8)
    if (m == 0) return 0;
    const int top = m >= 4 ? 2 : m >= 2 ? 1 : 0;  // subnormal m·2^-9 = 2^(top−9)·(m / 2^top)
    return static_cast<uint16_t>((top + 118) << 7 | ((m << (7 - top)) & 0x7f));
}
struct Fp8Tables {
    alignas(64) uint8_t hi[128] = {}, lo[128] = {};
    constexpr Fp8Tables() {
        for (int c = 0; c < 128; ++c) {
            hi[c] = static_cast<uint8_t>(e4m3_magnitude_bf16(c) >> 8);
            lo[c] = static_cast<uint8_t>(e4m3_magnitude_bf16(c) & 0xff);
        }
    }
};
constexpr Fp8Tables kFp8Tables{};

template <int MR, int NP>
__attribute__((target("avx512vbmi"))) void fp8_pairs_tile(const LinearKernelArgs& a, int64_t row0, int64_t panel0,
                                                          VF (&acc)[MR][NP * kPanelVecs]) {
    const __m512i hi0 = _mm512_load_si512(kFp8Tables.hi), hi1 = _mm512_load_si512(kFp8Tables.hi + 64);
    const __m512i lo0 = _mm512_load_si512(kFp8Tables.lo), lo1 = _mm512_load_si512(kFp8Tables.lo + 64);
    const __m512i sign = _mm512_set1_epi8(static_cast<char>(0x80));
    const uint8_t* w[NP];
    for (int p = 0; p < NP; ++p) w[p] = static_cast<const uint8_t*>(a.panels) + (panel0 + p) * a.panel_bytes;
    const int64_t K = a.k, n_kb = (K + 127) / 128, k2n = (K + 1) / 2;
    const float* scales = a.fp8_scale + (panel0 * kPanelCols / 128) * n_kb;
    for (int64_t kb = 0; kb < n_kb; ++kb) {
        __m512 part[MR][NP];
        for (int r = 0; r < MR; ++r)
            for (int p = 0; p < NP; ++p) part[r][p] = _mm512_setzero_ps();
        const int64_t k2e = s_min(k2n, (kb + 1) * 64);
        for (int64_t k2 = kb * 64; k2 < k2e; k2 += 2) {  // a group: pairs k2 and k2 + 1 (kb·64 is even)
            __m512i wa[NP], wb[NP];
            for (int p = 0; p < NP; ++p) {
                const __m512i codes = _mm512_loadu_si512(w[p] + (k2 / 2) * 64);
                prefetch_panel_ahead(w[p] + (k2 / 2) * 64);
                const __m512i hi = _mm512_ternarylogic_epi32(_mm512_permutex2var_epi8(hi0, codes, hi1), codes, sign, 0xf8);
                const __m512i lo = _mm512_permutex2var_epi8(lo0, codes, lo1);
                wa[p] = _mm512_unpacklo_epi8(lo, hi);
                wb[p] = _mm512_unpackhi_epi8(lo, hi);
            }
            const bool second = k2 + 1 < k2e;  // an odd K2 leaves the last group half full (zero bytes)
            for (int r = 0; r < MR; ++r) {
                const uint32_t* xr = a.x_pairs + (row0 + r) * a.x_pairs_stride;
                const __m512i xa = _mm512_set1_epi32(static_cast<int32_t>(xr[k2]));
                for (int p = 0; p < NP; ++p) part[r][p] = _mm512_dpbf16_ps(part[r][p], (__m512bh)wa[p], (__m512bh)xa);
                if (second) {
                    const __m512i xb = _mm512_set1_epi32(static_cast<int32_t>(xr[k2 + 1]));
                    for (int p = 0; p < NP; ++p) part[r][p] = _mm512_dpbf16_ps(part[r][p], (__m512bh)wb[p], (__m512bh)xb);
                }
            }
        }
        const __m512 sc = _mm512_set1_ps(scales[kb]);
        for (int r = 0; r < MR; ++r)
            for (int p = 0; p < NP; ++p) acc[r][p].v = _mm512_fmadd_ps(part[r][p], sc, acc[r][p].v);
    }
}
#endif

template <int MR, int NP, PanelFormat F>
void linear_register_tile(const LinearKernelArgs& a, int64_t row0, int64_t panel0) {
    VF acc[MR][NP * kPanelVecs];
    for (int r = 0; r < MR; ++r)
        for (int v = 0; v < NP * kPanelVecs; ++v) acc[r][v] = vf_zero();
    const float* xr[MR];
    for (int r = 0; r < MR; ++r) xr[r] = a.x + (row0 + r) * a.x_stride;
    const char* panel[NP];
    for (int p = 0; p < NP; ++p) panel[p] = static_cast<const char*>(a.panels) + (panel0 + p) * a.panel_bytes;
    const int64_t K = a.k;

    if constexpr (F == PanelFormat::f32) {
        const float* w[NP];
        for (int p = 0; p < NP; ++p) w[p] = reinterpret_cast<const float*>(panel[p]);
        for (int64_t k = 0; k < K; ++k) {
            VF wv[NP * kPanelVecs];
            for (int p = 0; p < NP; ++p)
                for (int v = 0; v < kPanelVecs; ++v) wv[p * kPanelVecs + v] = vf_load(w[p] + k * kPanelCols + v * kLanes);
            for (int r = 0; r < MR; ++r) {
                const VF xb = vf_set1(xr[r][k]);
                for (int v = 0; v < NP * kPanelVecs; ++v) acc[r][v] = vf_fma(wv[v], xb, acc[r][v]);
            }
        }
    } else if constexpr (F == PanelFormat::fp8) {
        // W = e4m3 · S per 128×128 block; the tile's panels share one row block (linear_rows), so S
        // scales the activation once per k instead of every weight: (x·S)·v, exact for power-of-two S.
        const uint8_t* w[NP];
        for (int p = 0; p < NP; ++p) w[p] = reinterpret_cast<const uint8_t*>(panel[p]);
        const int64_t n_kb = (K + 127) / 128;
        const float* scales = a.fp8_scale + (panel0 * kPanelCols / 128) * n_kb;
        for (int64_t kb = 0; kb < K; kb += 128) {
            const int64_t ke = s_min(K, kb + 128);
            const float sc = scales[kb / 128];
            for (int64_t k = kb; k < ke; ++k) {
                VF wv[NP * kPanelVecs];
                for (int p = 0; p < NP; ++p)
                    for (int v = 0; v < kPanelVecs; ++v)
                        wv[p * kPanelVecs + v] = vf_e4m3_decode(vi_load_i8(w[p] + k * kPanelCols + v * kLanes));
                for (int r = 0; r < MR; ++r) {
                    const VF xb = vf_set1(xr[r][k] * sc);
                    for (int v = 0; v < NP * kPanelVecs; ++v) acc[r][v] = vf_fma(wv[v], xb, acc[r][v]);
                }
            }
        }
    } else if constexpr (F == PanelFormat::fp8_pairs) {
#if defined(__AVX512BF16__)
        fp8_pairs_tile<MR, NP>(a, row0, panel0, acc);
#endif
    } else {  // bf16 pairs
        const int32_t* w[NP];
        for (int p = 0; p < NP; ++p) w[p] = reinterpret_cast<const int32_t*>(panel[p]);
#if defined(__AVX512BF16__)
        if (a.dpbf16) {
            const int64_t k2n = (K + 1) / 2;
            for (int64_t k2 = 0; k2 < k2n; ++k2) {
                __m512i wv[NP];
                for (int p = 0; p < NP; ++p) wv[p] = _mm512_loadu_si512(w[p] + k2 * kPanelCols);
                for (int r = 0; r < MR; ++r) {
                    const __m512i xp = _mm512_set1_epi32(static_cast<int32_t>(a.x_pairs[(row0 + r) * a.x_pairs_stride + k2]));
                    for (int p = 0; p < NP; ++p)
                        acc[r][p].v = _mm512_dpbf16_ps(acc[r][p].v, (__m512bh)wv[p], (__m512bh)xp);
                }
            }
        } else
#endif
        {
            const VI hi_mask = vi_set1(static_cast<int32_t>(0xffff0000u));
            for (int64_t k = 0; k < K; k += 2) {
                const bool has_odd = k + 1 < K;
                VF we[NP * kPanelVecs], wo[NP * kPanelVecs];
                for (int p = 0; p < NP; ++p)
                    for (int v = 0; v < kPanelVecs; ++v) {
                        const VI pair = vi_load(w[p] + (k / 2) * kPanelCols + v * kLanes);
                        we[p * kPanelVecs + v] = vf_from_bits(vi_shl<16>(pair));
                        wo[p * kPanelVecs + v] = vf_from_bits(vi_and(pair, hi_mask));
                    }
                for (int r = 0; r < MR; ++r) {
                    const VF x0 = vf_set1(xr[r][k]);
                    const VF x1 = vf_set1(has_odd ? xr[r][k + 1] : 0.0f);
                    for (int v = 0; v < NP * kPanelVecs; ++v) {
                        acc[r][v] = vf_fma(we[v], x0, acc[r][v]);
                        acc[r][v] = vf_fma(wo[v], x1, acc[r][v]);
                    }
                }
            }
        }
    }
    // y = acc + bias, cast once; the last panel may be partial.
    for (int r = 0; r < MR; ++r) {
        const int64_t yrow = (row0 + r) * a.y_stride;
        for (int p = 0; p < NP; ++p) {
            for (int v = 0; v < kPanelVecs; ++v) {
                const int64_t col = (panel0 + p) * kPanelCols + v * kLanes;
                VF out = acc[r][p * kPanelVecs + v];
                if (col + kLanes <= a.n) {
                    if (a.bias) out = vf_add(out, vf_load(a.bias + col));
                    vf_store_row(a.y, a.y_bf16, yrow + col, out);
                } else if (col < a.n) {
                    float lanes[kLanes];
                    vf_store(lanes, out);
                    for (int l = 0; l < kLanes && col + l < a.n; ++l)
                        s_store(a.y, a.y_bf16, yrow + col + l, a.bias ? lanes[l] + a.bias[col + l] : lanes[l]);
                }
            }
        }
    }
}

template <int MR, PanelFormat F>
void linear_rows(const LinearKernelArgs& a, int64_t row0, int64_t p0, int64_t p1) {
    int64_t p = p0;
    for (; p + kTilePanels <= p1; p += kTilePanels) {
        // fp8 tiles must not straddle a 128-row scale block (they do not when p is a multiple of
        // kTilePanels, as the dispatcher's tasks are); any other tile goes panel by panel
        if ((F == PanelFormat::fp8 || F == PanelFormat::fp8_pairs) &&
            (p * kPanelCols) / 128 != ((p + kTilePanels) * kPanelCols - 1) / 128) {
            for (int64_t q = p; q < p + kTilePanels; ++q) linear_register_tile<MR, 1, F>(a, row0, q);
            continue;
        }
        linear_register_tile<MR, kTilePanels, F>(a, row0, p);
    }
    for (; p < p1; ++p) linear_register_tile<MR, 1, F>(a, row0, p);
}

template <PanelFormat F>
void linear_tile_t(const LinearKernelArgs& a, int64_t r0, int64_t r1, int64_t p0, int64_t p1) {
    int64_t r = r0;
    for (; r + kMaxRows <= r1; r += kMaxRows) linear_rows<kMaxRows, F>(a, r, p0, p1);
    if constexpr (kMaxRows > 4) {
        if (r + 4 <= r1) {
            linear_rows<4, F>(a, r, p0, p1);
            r += 4;
        }
    }
    if constexpr (kMaxRows > 1) {
        switch (r1 - r) {
            case 1: linear_rows<1, F>(a, r, p0, p1); break;
            case 2: if constexpr (kMaxRows > 2) linear_rows<2, F>(a, r, p0, p1); break;
            case 3: if constexpr (kMaxRows > 3) linear_rows<3, F>(a, r, p0, p1); break;
            default: break;
        }
    }
}

void linear_tile(const LinearKernelArgs& a, int64_t r0, int64_t r1, int64_t p0, int64_t p1) {
    switch (a.format) {
        case PanelFormat::f32: return linear_tile_t<PanelFormat::f32>(a, r0, r1, p0, p1);
        case PanelFormat::bf16_pairs: return linear_tile_t<PanelFormat::bf16_pairs>(a, r0, r1, p0, p1);
        case PanelFormat::fp8: return linear_tile_t<PanelFormat::fp8>(a, r0, r1, p0, p1);
        case PanelFormat::fp8_pairs:
#if defined(__AVX512BF16__)
            return linear_tile_t<PanelFormat::fp8_pairs>(a, r0, r1, p0, p1);
#else
            __builtin_trap();  // packed only for the avx512_bf16 table (cpu_linear.cpp)
#endif
    }
}

void linear_convert_x(const void* x, bool x_bf16, int64_t x_stride, bool round_bf16, int64_t k, float* out,
                      int64_t out_stride, int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) {
        const char* xr = static_cast<const char*>(x) + r * x_stride * (x_bf16 ? 2 : 4);
        float* o = out + r * out_stride;
        int64_t i = 0;
        if (x_bf16 || !round_bf16) {  // widening is exact, and bf16 values need no rounding
            for (; i + kLanes <= k; i += kLanes) vf_store(o + i, vf_load_row(xr, x_bf16, i));
            for (; i < k; ++i) o[i] = s_load(xr, x_bf16, i);
        } else {  // f32 → bf16 (RNE, as core) → f32
            const float* xf = reinterpret_cast<const float*>(xr);
            for (; i + kLanes <= k; i += kLanes) vf_store(o + i, vf_round_bf16(vf_load(xf + i)));
            for (; i < k; ++i) o[i] = s_bf16_to_f32(s_f32_to_bf16(xf[i]));
        }
    }
}

void linear_convert_x_pairs(const void* x, bool x_bf16, int64_t x_stride, int64_t k, uint32_t* out,
                            int64_t out_stride, int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) {
        const char* xr = static_cast<const char*>(x) + r * x_stride * (x_bf16 ? 2 : 4);
        uint32_t* o = out + r * out_stride;
        for (int64_t j = 0; 2 * j < k; ++j) {
            const uint32_t lo = x_bf16 ? static_cast<const uint16_t*>(static_cast<const void*>(xr))[2 * j]
                                       : s_f32_to_bf16(reinterpret_cast<const float*>(xr)[2 * j]);
            uint32_t hi = 0;
            if (2 * j + 1 < k)
                hi = x_bf16 ? static_cast<const uint16_t*>(static_cast<const void*>(xr))[2 * j + 1]
                            : s_f32_to_bf16(reinterpret_cast<const float*>(xr)[2 * j + 1]);
            o[j] = lo | (hi << 16);
        }
    }
}

void convert_f32_to_bf16_rows(const float* src, int64_t src_stride, uint16_t* dst, int64_t dst_stride, int64_t n,
                              int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) {
        const float* s = src + r * src_stride;
        uint16_t* d = dst + r * dst_stride;
        int64_t i = 0;
        for (; i + kLanes <= n; i += kLanes) vf_store_bf16(d + i, vf_load(s + i));
        for (; i < n; ++i) d[i] = s_f32_to_bf16(s[i]);
    }
}

// ======================================== Top-k ===================================================

// Ranking key of a score: a signed int whose order is the ranking order of ops/topk.h:
// sign-magnitude bits → two's complement (−0.0 and +0.0 both map to 0), and NaN → INT32_MIN, below −inf.
inline VI topk_rank_key(VF v) {
    const VI bits = vi_bits(v);
    const VI mag = vi_and(bits, vi_set1(0x7fffffff));
    VI key = vi_select(vi_lt_mask(bits, vi_set1(0)), vi_sub(vi_set1(0), mag), mag);
    return vi_select(vi_lt_mask(vi_set1(0x7f800000), mag), vi_set1(INT32_MIN), key);
}
inline int32_t s_topk_rank_key(float f) {
    const uint32_t bits = bits_of(f);
    const int32_t mag = static_cast<int32_t>(bits & 0x7fffffffu);
    if (mag > 0x7f800000) return INT32_MIN;
    return (bits >> 31) ? -mag : mag;
}

// Keeps the best s->k of the buffered candidates (ties to the earlier one), in order; raises the
// admission threshold to (smallest kept key + 1).
// Radix select on u = key ^ 0x80000000 (unsigned order = key order) for the k-th largest u = T: keep
// every u > T and the first `quota` with u == T. Digits are 8 bits wide, starting at the highest bit on
// which the buffered keys differ (admitted keys share their top bits). Both passes are branchless:
// which bin or which entry is data-dependent and would mispredict.
void topk_stream_cut(TopkStream* s) {
    const int64_t n = s->count;
    if (n <= s->k) return;
    const int32_t* keys = s->keys;
    const uint32_t u0 = static_cast<uint32_t>(keys[0]) ^ 0x80000000u;
    uint32_t diff = 0;
    for (int64_t j = 0; j < n; ++j) diff |= (static_cast<uint32_t>(keys[j]) ^ 0x80000000u) ^ u0;
    uint32_t t = u0;
    int64_t need = s->k, quota = need;  // all keys equal: T = u0, keep the first k
    if (diff != 0) {
        const int top = 31 - __builtin_clz(diff);
        uint32_t prefix_mask = top == 31 ? 0u : ~((2u << top) - 1u);  // bits above top: equal in every key
        uint32_t prefix = u0 & prefix_mask;
        bool whole_bin = false;
        for (int shift = top - 7;; shift -= 8) {
            // digit = the 8 bits [shift, shift + 8) of u; a negative shift takes the low bits, left-aligned
            const int rs = shift > 0 ? shift : 0, ls = shift < 0 ? -shift : 0;
            const uint32_t digit_mask = (0xffu >> ls) << rs;
            uint32_t hist[257];  // bin 256 collects the entries outside the current prefix
            for (int d = 0; d < 257; ++d) hist[d] = 0;
            for (int64_t j = 0; j < n; ++j) {
                const uint32_t u = static_cast<uint32_t>(keys[j]) ^ 0x80000000u;
                const uint32_t digit = ((u >> rs) << ls) & 0xffu;
                ++hist[(u & prefix_mask) == prefix ? digit : 256u];
            }
            int64_t above = 0;
            int d = 255;
            for (; d > 0; --d) {
                if (above + static_cast<int64_t>(hist[d]) >= need) break;
                above += hist[d];
            }
            need -= above;
            prefix |= (static_cast<uint32_t>(d) >> ls) << rs;  // the digit back in its bit position
            prefix_mask |= digit_mask;
            if (static_cast<int64_t>(hist[d]) == need) {  // the whole bin is kept: keep every u ≥ prefix
                t = prefix - 1;  // prefix ≥ 1: else every entry would be kept, but n > k
                quota = 0;
                whole_bin = true;
                break;
            }
            if (shift <= 0) break;
        }
        if (!whole_bin) {
            t = prefix;  // all bits resolved
            quota = need;
        }
    }
    int64_t w = 0;
    int32_t kmin = INT32_MAX;
    int32_t* idx = s->idx;
    int32_t* out_keys = s->keys;
    for (int64_t j = 0; j < n; ++j) {  // stable, in place (w ≤ j), branchless
        const int32_t key = out_keys[j];
        const uint32_t u = static_cast<uint32_t>(key) ^ 0x80000000u;
        const int64_t tie = (u == t) & (quota > 0);
        const int64_t keep = (u > t) | tie;
        quota -= tie;
        out_keys[w] = key;
        idx[w] = idx[j];
        const int32_t candidate = keep ? key : INT32_MAX;
        kmin = candidate < kmin ? candidate : kmin;
        w += keep;
    }
    s->count = w;
    s->threshold = kmin + 1;  // kmin ≤ key(+inf) < INT32_MAX: no overflow
}

void topk_stream_push(TopkStream* s, const float* scores, int64_t n, int64_t base) {
    int64_t i = 0;
    VI threshold = vi_set1(s->threshold);
    for (; i + kLanes <= n; i += kLanes) {
        const VI key = topk_rank_key(vf_load(scores + i));
        const uint32_t admit = vi_ge_mask(key, threshold);
        if (!admit) continue;
        if (s->capacity - s->count < kLanes) {
            topk_stream_cut(s);
            // a cut leaves k entries and capacity ≥ k + kTopkStreamSlack; anything else is a bug: stop
            // loudly rather than spin
            if (s->capacity - s->count < kLanes) __builtin_trap();
            threshold = vi_set1(s->threshold);
            // re-test this vector against the raised threshold
            i -= kLanes;
            continue;
        }
        const VI idx = vi_add(vi_iota(), vi_set1(static_cast<int32_t>(base + i)));
        vi_compress_store(s->keys + s->count, admit, key);
        s->count += vi_compress_store(s->idx + s->count, admit, idx);
    }
    for (; i < n; ++i) {
        const int32_t key = s_topk_rank_key(scores[i]);
        if (key < s->threshold) continue;
        if (s->count == s->capacity) {
            topk_stream_cut(s);
            if (s->count == s->capacity) __builtin_trap();
            if (key < s->threshold) continue;
        }
        s->keys[s->count] = key;
        s->idx[s->count] = static_cast<int32_t>(base + i);
        ++s->count;
    }
}

int64_t topk_stream_finish(TopkStream* s, int32_t* out) {
    topk_stream_cut(s);
    for (int64_t j = 0; j < s->count; ++j) out[j] = s->idx[j];
    return s->count;
}

}  // namespace
}  // namespace sieve::cpu::SIEVE_CPU_ISA_NS

namespace sieve::cpu {

extern const CpuKernels SIEVE_CPU_TABLE = {
    .isa_name = SIEVE_CPU_ISA_NAME,
    .rms_norm_rows = SIEVE_CPU_ISA_NS::rms_norm_rows,
    .layer_norm_rows = SIEVE_CPU_ISA_NS::layer_norm_rows,
    .quant_fp8_rows = SIEVE_CPU_ISA_NS::quant_fp8_rows,
    .quant_fp8_group = SIEVE_CPU_ISA_NS::quant_fp8_group,
    .hadamard_rows = SIEVE_CPU_ISA_NS::hadamard_rows,
    .rope_block = SIEVE_CPU_ISA_NS::rope_block,
    .linear_tile = SIEVE_CPU_ISA_NS::linear_tile,
    .linear_convert_x = SIEVE_CPU_ISA_NS::linear_convert_x,
    .linear_convert_x_pairs = SIEVE_CPU_ISA_NS::linear_convert_x_pairs,
    .convert_f32_to_bf16_rows = SIEVE_CPU_ISA_NS::convert_f32_to_bf16_rows,
    .topk_stream_push = SIEVE_CPU_ISA_NS::topk_stream_push,
    .topk_stream_finish = SIEVE_CPU_ISA_NS::topk_stream_finish,
};

}  // namespace sieve::cpu
