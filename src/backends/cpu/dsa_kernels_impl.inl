// Kernel bodies of the DSA-on-MLA cpu ops (sparse MLA attention, indexer scores, per-head projection),
// written once over
// simd.h and compiled once per ISA by dsa_kernels_<isa>.cpp, which defines SIEVE_DSA_CPU_TABLE before
// including this file. Everything is in an anonymous namespace (simd.h, "ODR safety"): no std::, no
// core/dtype.h inline helpers, no CacheView member calls. Semantics: ops/sparse_mla.h, ops/dsa_indexer.h;
// fp32 accumulation in an order that differs from ref (the conformance tests derive tolerances).
#include "backends/cpu/dsa_kernels.h"
#include "backends/cpu/simd.h"

#ifndef SIEVE_DSA_CPU_TABLE
#error "define SIEVE_DSA_CPU_TABLE before including dsa_kernels_impl.inl"
#endif

namespace sieve::cpu {
namespace {

inline int64_t pad16(int64_t n) { return SIEVE_DSA_PAD16(n); }
inline float f_inf() { return float_of(0x7f800000u); }
inline float f_two120() { return float_of(0x7b800000u); }  // 2^120

// ---- e4m3 decoding (exact; the byte NaNs 0x7F / 0xFF decode to NaN) ---------------------------------

inline float s_e4m3_value(uint8_t b) {
    if ((b & 0x7fu) == 0x7fu) return float_of(0x7fc00000u | (static_cast<uint32_t>(b & 0x80u) << 24));
    return s_e4m3_scaled(b) * f_two120();  // value · 2^-120, then · 2^120: both exact
}

// kLanes e4m3 bytes → their values.
inline VF vf_e4m3_values(const uint8_t* p) {
    const VI code = vi_load_i8(p);  // sign-extended: bit 31 = the byte's sign
    const VF scaled = vf_from_bits(vi_and(vi_shl<20>(code), vi_set1(static_cast<int32_t>(0x87f00000u))));
    const VF v = vf_mul(scaled, vf_set1(f_two120()));
    const uint32_t nan = vi_eq_mask(vi_and(code, vi_set1(0x7f)), vi_set1(0x7f));
    if (nan == 0) return v;
    return vf_from_bits(vi_select(nan, vi_or(vi_and(code, vi_set1(static_cast<int32_t>(0x80000000u))), vi_set1(0x7fc00000)),
                                  vi_bits(v)));
}

// n values of a f32 or bf16 row → out (f32).
inline void load_row_f32(const void* x, bool bf16, int64_t n, float* out) {
    int64_t i = 0;
    for (; i + kLanes <= n; i += kLanes) vf_store(out + i, vf_load_row(x, bf16, i));
    for (; i < n; ++i) out[i] = s_load(x, bf16, i);
}

// Σ a_i·b_i, four vector accumulators.
inline float dot_f32(const float* a, const float* b, int64_t n) {
    VF a0 = vf_zero(), a1 = vf_zero(), a2 = vf_zero(), a3 = vf_zero();
    int64_t i = 0;
    for (; i + 4 * kLanes <= n; i += 4 * kLanes) {
        a0 = vf_fma(vf_load(a + i), vf_load(b + i), a0);
        a1 = vf_fma(vf_load(a + i + kLanes), vf_load(b + i + kLanes), a1);
        a2 = vf_fma(vf_load(a + i + 2 * kLanes), vf_load(b + i + 2 * kLanes), a2);
        a3 = vf_fma(vf_load(a + i + 3 * kLanes), vf_load(b + i + 3 * kLanes), a3);
    }
    for (; i + kLanes <= n; i += kLanes) a0 = vf_fma(vf_load(a + i), vf_load(b + i), a0);
    float sum = vf_sum(vf_add(vf_add(a0, a1), vf_add(a2, a3)));
    for (; i < n; ++i) sum += a[i] * b[i];
    return sum;
}

// ================================== sparse MLA attention ==========================================

// Entry `slot` of the latent cache → out [R + Dr] f32 (ops/sparse_mla.h dequant rule).
void sparse_mla_dequant(const SparseMlaAttentionParams& p, int64_t slot, float* out) {
    const CacheView& c = p.cache;
    const uint8_t* e = c.base + (slot / c.block_size) * c.block_bytes + (slot % c.block_size) * c.entry_bytes;
    const int64_t r = p.kv_lora_rank, dr = p.rope_dim;
    if (p.format == SparseMlaCacheFormat::f32) {
        float tmp;
        int64_t i = 0;
        for (; i + kLanes <= r + dr; i += kLanes) {
            VF v;
            __builtin_memcpy(&v, e + 4 * i, sizeof(VF));
            vf_store(out + i, v);
        }
        for (; i < r + dr; ++i) {
            __builtin_memcpy(&tmp, e + 4 * i, 4);
            out[i] = tmp;
        }
        return;
    }
    const int64_t g = r < 128 ? r : 128;  // sparse_mla_quant_group (§3.4)
    const uint8_t* scales = e + r;
    for (int64_t k = 0; k < r / g; ++k) {
        float s;
        __builtin_memcpy(&s, scales + 4 * k, 4);
        const VF vs = vf_set1(s);
        int64_t i = k * g;
        for (; i + kLanes <= (k + 1) * g; i += kLanes) vf_store(out + i, vf_mul(vf_e4m3_values(e + i), vs));
        for (; i < (k + 1) * g; ++i) out[i] = s_e4m3_value(e[i]) * s;
    }
    const uint8_t* rope = scales + 4 * (r / g);
    for (int64_t j = 0; j < dr; ++j) {
        uint16_t b;
        __builtin_memcpy(&b, rope + 2 * j, 2);
        out[r + j] = s_bf16_to_f32(b);
    }
}

// e^x for x ≤ 0 (softmax weights after subtracting the running max): x = n·ln2 + r, |r| ≤ ln2/2, e^r by its
// degree-7 Taylor polynomial (truncation < 6e-9 relative), 2^n through the exponent bits. Within ~2 ulp of
// expf; arguments below −87 give ≈ 2^-126 instead of a smaller subnormal (negligible next to the max term 1).
#if defined(__AVX512F__)
inline VF dsa_vf_from_int(VI a) { return {_mm512_cvtepi32_ps(a.v)}; }
#elif defined(__AVX2__)
inline VF dsa_vf_from_int(VI a) { return {_mm256_cvtepi32_ps(a.v)}; }
#else
inline VF dsa_vf_from_int(VI a) { return {static_cast<float>(a.v)}; }
#endif

inline VF vf_exp_nonpositive(VF x) {
    x = vf_max(x, vf_set1(-87.0f));
    const VI n = vi_cvt_rne(vf_mul(x, vf_set1(1.44269504088896341f)));
    const VF nf = dsa_vf_from_int(n);
    VF r = vf_sub(x, vf_mul(nf, vf_set1(0.693145751953125f)));  // ln2 split: hi (exact product) + lo
    r = vf_sub(r, vf_mul(nf, vf_set1(1.42860682030941723212e-6f)));
    VF e = vf_set1(1.0f / 5040.0f);
    e = vf_add(vf_mul(e, r), vf_set1(1.0f / 720.0f));
    e = vf_add(vf_mul(e, r), vf_set1(1.0f / 120.0f));
    e = vf_add(vf_mul(e, r), vf_set1(1.0f / 24.0f));
    e = vf_add(vf_mul(e, r), vf_set1(1.0f / 6.0f));
    e = vf_add(vf_mul(e, r), vf_set1(0.5f));
    e = vf_add(vf_mul(e, r), vf_set1(1.0f));
    e = vf_add(vf_mul(e, r), vf_set1(1.0f));
    return vf_mul(e, vf_from_bits(vi_shl<23>(vi_add(n, vi_set1(127)))));
}

// Logits of NH heads (rows of qf, stride dqk) × entries [j0, j0 + 2·kLanes) from the transposed chunk kt
// ([dqk, C]): lg[h, j] = scale · Σ_d q[h, d]·kt[d, j]. Register tile NH × 2 vectors.
template <int NH>
void mla_logits_tile(const float* qf, int64_t dqk, const float* kt, int64_t C, int64_t j0, float scale, float* lg) {
    VF acc[NH][2];
    for (int h = 0; h < NH; ++h) acc[h][0] = acc[h][1] = vf_zero();
    for (int64_t d = 0; d < dqk; ++d) {
        const VF k0 = vf_load(kt + d * C + j0), k1 = vf_load(kt + d * C + j0 + kLanes);
        for (int h = 0; h < NH; ++h) {
            const VF q = vf_set1(qf[h * dqk + d]);
            acc[h][0] = vf_fma(q, k0, acc[h][0]);
            acc[h][1] = vf_fma(q, k1, acc[h][1]);
        }
    }
    const VF vs = vf_set1(scale);
    for (int h = 0; h < NH; ++h) {
        vf_store(lg + h * C + j0, vf_mul(acc[h][0], vs));
        vf_store(lg + h * C + j0 + kLanes, vf_mul(acc[h][1], vs));
    }
}

// acc[h, r0 .. r0 + NV·kLanes) = acc·factor[h] + Σ_j w[h, j]·V[j, r] for NH heads over nc entries (V = the
// first R dims of the chunk's rows, stride dqk; w in lg, stride C). Register tile NH × NV vectors.
template <int NH, int NV>
void mla_pv_tile(const float* lg, int64_t C, const float* kc, int64_t dqk, int64_t nc, const float* factor, float* acc,
                 int64_t r, int64_t r0) {
    VF a[NH][NV];
    for (int h = 0; h < NH; ++h)
        for (int v = 0; v < NV; ++v) a[h][v] = vf_mul(vf_load(acc + h * r + r0 + v * kLanes), vf_set1(factor[h]));
    for (int64_t j = 0; j < nc; ++j) {
        VF vv[NV];
        for (int v = 0; v < NV; ++v) vv[v] = vf_load(kc + j * dqk + r0 + v * kLanes);
        for (int h = 0; h < NH; ++h) {
            const VF w = vf_set1(lg[h * C + j]);
            for (int v = 0; v < NV; ++v) a[h][v] = vf_fma(w, vv[v], a[h][v]);
        }
    }
    for (int h = 0; h < NH; ++h)
        for (int v = 0; v < NV; ++v) vf_store(acc + h * r + r0 + v * kLanes, a[h][v]);
}

// P·V of NH heads over one chunk: acc = acc·factor + Σ_j w_j·V_j, over every R dim.
template <int NH>
void mla_chunk_pv(const float* lg, int64_t C, const float* kc, int64_t dqk, int64_t nc, const float* factor, float* acc,
                  int64_t r) {
    int64_t r0 = 0;
    for (; r0 + 2 * kLanes <= r; r0 += 2 * kLanes) mla_pv_tile<NH, 2>(lg, C, kc, dqk, nc, factor, acc, r, r0);
    for (; r0 + kLanes <= r; r0 += kLanes) mla_pv_tile<NH, 1>(lg, C, kc, dqk, nc, factor, acc, r, r0);
    for (; r0 < r; ++r0)  // a tail below one vector (R not a multiple of the lane count)
        for (int h = 0; h < NH; ++h) {
            float s = acc[h * r + r0] * factor[h];
            for (int64_t j = 0; j < nc; ++j) s += lg[h * C + j] * kc[j * dqk + r0];
            acc[h * r + r0] = s;
        }
}

void sparse_mla_heads(const SparseMlaAttentionParams& p, int64_t t, int64_t h0, int64_t h1, float* scratch) {
    const int64_t r = p.kv_lora_rank, dqk = r + p.rope_dim, nh = h1 - h0, C = kSparseMlaChunk;
    float* qf = scratch;                   // [nh, dqk]
    float* kc = qf + pad16(nh * dqk);      // [C, dqk] dequantized entries
    float* kt = kc + pad16(C * dqk);       // [dqk, C] the same, transposed
    float* lg = kt + pad16(C * dqk);       // [nh, C] logits, then weights
    float* acc = lg + pad16(nh * C);       // [nh, R]
    float* mx = acc + pad16(nh * r);       // [nh] running max
    float* den = mx + pad16(nh);           // [nh] running denominator
    const bool qb = p.q_type == DType::bf16, ob = p.out_type == DType::bf16;
    const float inf = f_inf();
    for (int64_t h = 0; h < nh; ++h) {
        const char* q = static_cast<const char*>(p.q) + (t * p.q_token_stride + (h0 + h) * p.q_head_stride) * (qb ? 2 : 4);
        load_row_f32(q, qb, dqk, qf + h * dqk);
        // The sink starts the running max and contributes exp(σ − σ) = 1 to the denominator (§2.8).
        const float sink = p.sink ? p.sink[h0 + h] : -inf;
        mx[h] = sink;
        den[h] = sink > -inf ? 1.0f : 0.0f;
        for (int64_t i = 0; i < r; ++i) acc[h * r + i] = 0.0f;
    }
    const int32_t* row = p.slots + t * p.slots_row_stride;
    int64_t n_valid = 0;
    float factor[4];
    for (int64_t j = 0; j < p.topk;) {
        int64_t nc = 0;
        for (; j < p.topk && nc < C; ++j) {
            if (row[j] < 0) continue;
            sparse_mla_dequant(p, row[j], kc + nc * dqk);
            ++nc;
        }
        if (nc == 0) break;
        n_valid += nc;
        const int64_t nc_pad = (nc + 2 * kLanes - 1) / (2 * kLanes) * (2 * kLanes);  // ≤ C (C a multiple of 32)
        for (int64_t d = 0; d < dqk; ++d) {
            for (int64_t c = 0; c < nc; ++c) kt[d * C + c] = kc[c * dqk + d];
            for (int64_t c = nc; c < nc_pad; ++c) kt[d * C + c] = 0.0f;
        }
        for (int64_t hb = 0; hb < nh; hb += 4) {
            const int nb = nh - hb < 4 ? static_cast<int>(nh - hb) : 4;
            // Logits first (all heads of the block), then the online-softmax update, then P·V.
            for (int64_t j0 = 0; j0 < nc_pad; j0 += 2 * kLanes) {
                switch (nb) {
                    case 4: mla_logits_tile<4>(qf + hb * dqk, dqk, kt, C, j0, p.scale, lg + hb * C); break;
                    case 3: mla_logits_tile<3>(qf + hb * dqk, dqk, kt, C, j0, p.scale, lg + hb * C); break;
                    case 2: mla_logits_tile<2>(qf + hb * dqk, dqk, kt, C, j0, p.scale, lg + hb * C); break;
                    default: mla_logits_tile<1>(qf + hb * dqk, dqk, kt, C, j0, p.scale, lg + hb * C); break;
                }
            }
            for (int b = 0; b < nb; ++b) {
                const int64_t h = hb + b;
                float* lh = lg + h * C;
                if (mx[h] == inf) {  // σ = +inf: the output is 0; weights 0 keep acc at 0
                    for (int64_t c = 0; c < nc; ++c) lh[c] = 0.0f;
                    factor[b] = 0.0f;
                    continue;
                }
                float m = mx[h];
                for (int64_t c = 0; c < nc; ++c) m = s_fmax(m, lh[c]);
                VF vsum = vf_zero();
                const VF vm = vf_set1(m);
                int64_t c = 0;
                for (; c + kLanes <= nc; c += kLanes) {
                    const VF e = vf_exp_nonpositive(vf_sub(vf_load(lh + c), vm));
                    vf_store(lh + c, e);
                    vsum = vf_add(vsum, e);
                }
                float sum = vf_sum(vsum);
                for (; c < nc; ++c) {
                    lh[c] = __builtin_expf(lh[c] - m);
                    sum += lh[c];
                }
                factor[b] = mx[h] == -inf ? 0.0f : __builtin_expf(mx[h] - m);
                den[h] = den[h] * factor[b] + sum;
                mx[h] = m;
            }
            switch (nb) {
                case 4: mla_chunk_pv<4>(lg + hb * C, C, kc, dqk, nc, factor, acc + hb * r, r); break;
                case 3: mla_chunk_pv<3>(lg + hb * C, C, kc, dqk, nc, factor, acc + hb * r, r); break;
                case 2: mla_chunk_pv<2>(lg + hb * C, C, kc, dqk, nc, factor, acc + hb * r, r); break;
                default: mla_chunk_pv<1>(lg + hb * C, C, kc, dqk, nc, factor, acc + hb * r, r); break;
            }
        }
    }
    for (int64_t h = 0; h < nh; ++h) {
        char* o = static_cast<char*>(p.out) + (t * p.out_token_stride + (h0 + h) * p.out_head_stride) * (ob ? 2 : 4);
        const bool zero = n_valid == 0 || mx[h] == inf || !(den[h] > 0.0f);  // lonely q, σ = +inf
        const float inv = zero ? 0.0f : 1.0f / den[h];
        const float* ah = acc + h * r;
        const VF vinv = vf_set1(inv);
        int64_t i = 0;
        for (; i + kLanes <= r; i += kLanes) vf_store_row(o, ob, i, zero ? vf_zero() : vf_mul(vf_load(ah + i), vinv));
        for (; i < r; ++i) s_store(o, ob, i, zero ? 0.0f : ah[i] * inv);
    }
}

// ===================================== indexer scores =============================================

void indexer_scores_unit(const DsaIndexerScoresParams& p, int64_t t, int64_t u0, int64_t u1, float* scratch) {
    const int64_t hi = p.n_heads, di = p.head_dim;
    const bool fp8 = p.format == DsaIndexerKeyFormat::fp8_blocked;
    float* qf = scratch;                // [Hi, Di]
    float* w = qf + pad16(hi * di);     // [Hi]
    float* kt = w + pad16(hi);          // [Di, kLanes] transposed key tile
    float* ks = kt + pad16(di * 16);    // [kLanes] key scales
    float* out = p.scores + t * p.scores_row_stride;
    const int64_t n = p.n_keys[t];
    const int64_t end = u1 < n ? u1 : n;
    if (u0 < end) {
        for (int64_t j = 0; j < hi; ++j) {
            const int64_t qo = t * p.q_token_stride + j * p.q_head_stride;
            if (fp8) {
                const uint8_t* q8 = static_cast<const uint8_t*>(p.q) + qo;
                int64_t d = 0;
                for (; d + kLanes <= di; d += kLanes) vf_store(qf + j * di + d, vf_e4m3_values(q8 + d));
                for (; d < di; ++d) qf[j * di + d] = s_e4m3_value(q8[d]);
            } else {
                load_row_f32(static_cast<const float*>(p.q) + qo, false, di, qf + j * di);
            }
            // The head weight with every scale folded in (ops/dsa_indexer.h).
            w[j] = p.weights[t * p.weights_token_stride + j] * p.weight_scale;
            if (fp8) w[j] = w[j] * p.q_scale[t * p.q_scale_token_stride + j];
        }
    }
    const CacheView& c = p.keys;
    const int32_t* table = p.block_table + static_cast<int64_t>(p.token_seq[t]) * p.block_table_stride;
    const VF zero = vf_zero();
    for (int64_t u = u0; u < end; u += kLanes) {
        const int64_t nl = end - u < kLanes ? end - u : kLanes;
        for (int64_t l = 0; l < kLanes; ++l) {  // gather + transpose (lanes past nl: zeros)
            if (l >= nl) {
                for (int64_t d = 0; d < di; ++d) kt[d * kLanes + l] = 0.0f;
                ks[l] = 0.0f;
                continue;
            }
            const int64_t key = u + l;
            const int64_t slot = static_cast<int64_t>(table[key / c.block_size]) * c.block_size + key % c.block_size;
            const uint8_t* block = c.base + (slot / c.block_size) * c.block_bytes;
            const int64_t off = slot % c.block_size;
            if (fp8) {  // §3.3: values at off·Di, scale at B·Di + 4·off
                const uint8_t* k8 = block + off * di;
                for (int64_t d = 0; d < di; ++d) kt[d * kLanes + l] = s_e4m3_value(k8[d]);
                __builtin_memcpy(ks + l, block + c.block_size * di + 4 * off, 4);
            } else {
                const uint8_t* kf = block + off * c.entry_bytes;
                for (int64_t d = 0; d < di; ++d) __builtin_memcpy(kt + d * kLanes + l, kf + 4 * d, 4);
                ks[l] = 1.0f;
            }
        }
        VF sum = vf_zero();
        int64_t j = 0;
        for (; j + 4 <= hi; j += 4) {  // four heads share each key load
            const float* q0 = qf + j * di;
            VF a0 = vf_zero(), a1 = vf_zero(), a2 = vf_zero(), a3 = vf_zero();
            for (int64_t d = 0; d < di; ++d) {
                const VF k = vf_load(kt + d * kLanes);
                a0 = vf_fma(vf_set1(q0[d]), k, a0);
                a1 = vf_fma(vf_set1(q0[di + d]), k, a1);
                a2 = vf_fma(vf_set1(q0[2 * di + d]), k, a2);
                a3 = vf_fma(vf_set1(q0[3 * di + d]), k, a3);
            }
            sum = vf_fma(vf_set1(w[j]), vf_max(a0, zero), sum);
            sum = vf_fma(vf_set1(w[j + 1]), vf_max(a1, zero), sum);
            sum = vf_fma(vf_set1(w[j + 2]), vf_max(a2, zero), sum);
            sum = vf_fma(vf_set1(w[j + 3]), vf_max(a3, zero), sum);
        }
        for (; j < hi; ++j) {
            VF a = vf_zero();
            for (int64_t d = 0; d < di; ++d) a = vf_fma(vf_set1(qf[j * di + d]), vf_load(kt + d * kLanes), a);
            sum = vf_fma(vf_set1(w[j]), vf_max(a, zero), sum);
        }
        sum = vf_mul(sum, vf_load(ks));
        if (nl == kLanes) {
            vf_store(out + u, sum);
        } else {
            float lanes[16];
            vf_store(lanes, sum);
            for (int64_t l = 0; l < nl; ++l) out[u + l] = lanes[l];
        }
    }
    const int64_t tail = u0 > end ? u0 : end;
    for (int64_t u = tail; u < u1; ++u) out[u] = -f_inf();
}

// ================================= per-head projection ============================================

// NR token rows (converted to f32 in xs, row stride ld) × all outputs of head h. Register tile: NR rows ×
// 2 vectors of outputs; the weight rows [in, out] stream through once per output block.
template <int NR, bool WB, bool YB>
void head_proj_rows(const MlaHeadProjParams& p, int64_t h, int64_t t, const float* xs, int64_t ld) {
    const int64_t in = p.in_features, out = p.out_features;
    const char* w = static_cast<const char*>(p.w) + h * in * out * (WB ? 2 : 4);
    char* y = static_cast<char*>(p.y);
    auto y_at = [&](int r, int64_t o) { return (t + r) * p.y_token_stride + h * p.y_head_stride + o; };
    int64_t o = 0;
    for (; o + 2 * kLanes <= out; o += 2 * kLanes) {
        VF acc[NR][2];
        for (int r = 0; r < NR; ++r) acc[r][0] = acc[r][1] = vf_zero();
        for (int64_t k = 0; k < in; ++k) {
            const VF w0 = vf_load_row(w, WB, k * out + o), w1 = vf_load_row(w, WB, k * out + o + kLanes);
            for (int r = 0; r < NR; ++r) {
                const VF a = vf_set1(xs[r * ld + k]);
                acc[r][0] = vf_fma(a, w0, acc[r][0]);
                acc[r][1] = vf_fma(a, w1, acc[r][1]);
            }
        }
        for (int r = 0; r < NR; ++r) {
            vf_store_row(y, YB, y_at(r, o), acc[r][0]);
            vf_store_row(y, YB, y_at(r, o + kLanes), acc[r][1]);
        }
    }
    for (; o + kLanes <= out; o += kLanes) {
        VF acc[NR];
        for (int r = 0; r < NR; ++r) acc[r] = vf_zero();
        for (int64_t k = 0; k < in; ++k) {
            const VF w0 = vf_load_row(w, WB, k * out + o);
            for (int r = 0; r < NR; ++r) acc[r] = vf_fma(vf_set1(xs[r * ld + k]), w0, acc[r]);
        }
        for (int r = 0; r < NR; ++r) vf_store_row(y, YB, y_at(r, o), acc[r]);
    }
    for (; o < out; ++o)
        for (int r = 0; r < NR; ++r) {
            float acc = 0.0f;
            for (int64_t k = 0; k < in; ++k) acc += xs[r * ld + k] * s_load(w, WB, k * out + o);
            s_store(y, YB, y_at(r, o), acc);
        }
}

template <bool WB, bool YB>
void head_proj_tokens_t(const MlaHeadProjParams& p, int64_t h, int64_t t0, int64_t t1, float* scratch) {
    const int64_t in = p.in_features, ld = pad16(in);
    const bool xb = p.x_type == DType::bf16, round_x = p.math == LinearMath::bf16;
    for (int64_t t = t0; t < t1; t += 4) {
        const int nr = t1 - t < 4 ? static_cast<int>(t1 - t) : 4;
        for (int r = 0; r < nr; ++r) {
            const char* x = static_cast<const char*>(p.x) + ((t + r) * p.x_token_stride + h * p.x_head_stride) * (xb ? 2 : 4);
            load_row_f32(x, xb, in, scratch + r * ld);
            if (round_x)  // LinearMath::bf16: X = round_bf16(x) (ops/linear.h)
                for (int64_t i = 0; i < in; ++i) scratch[r * ld + i] = s_bf16_to_f32(s_f32_to_bf16(scratch[r * ld + i]));
        }
        switch (nr) {
            case 4: head_proj_rows<4, WB, YB>(p, h, t, scratch, ld); break;
            case 3: head_proj_rows<3, WB, YB>(p, h, t, scratch, ld); break;
            case 2: head_proj_rows<2, WB, YB>(p, h, t, scratch, ld); break;
            default: head_proj_rows<1, WB, YB>(p, h, t, scratch, ld); break;
        }
    }
}

void head_proj_tokens(const MlaHeadProjParams& p, int64_t h, int64_t t0, int64_t t1, float* scratch) {
    const bool wb = p.w_type == DType::bf16, yb = p.y_type == DType::bf16;
    if (wb && yb) return head_proj_tokens_t<true, true>(p, h, t0, t1, scratch);
    if (wb) return head_proj_tokens_t<true, false>(p, h, t0, t1, scratch);
    if (yb) return head_proj_tokens_t<false, true>(p, h, t0, t1, scratch);
    return head_proj_tokens_t<false, false>(p, h, t0, t1, scratch);
}

}  // namespace

extern const DsaCpuKernels SIEVE_DSA_CPU_TABLE;
const DsaCpuKernels SIEVE_DSA_CPU_TABLE = {
    SIEVE_CPU_ISA_NAME,
    sparse_mla_heads,
    indexer_scores_unit,
    head_proj_tokens,
};

}  // namespace sieve::cpu
