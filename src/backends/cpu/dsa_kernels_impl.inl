// Kernel bodies of the DSA-on-MLA cpu ops (sparse MLA attention, per-head projection),
// written once over
// simd.h and compiled once per ISA by dsa_kernels_<isa>.cpp, which defines SIEVE_DSA_CPU_TABLE before
// including this file. Everything is in an anonymous namespace (simd.h, "ODR safety"): no std::, no
// core/dtype.h inline helpers, no CacheView member calls. Semantics: ops/sparse_attention.h, ops/mla_head_proj.h;
// fp32 accumulation in an order that differs from ref (the conformance tests derive tolerances).
#include "backends/cpu/dsa_kernels.h"
#include "backends/cpu/simd.h"
// The chunked attention tiles (logits, P·V, exp, chunk transposition), shared with DeepSeek-V4's sparse MQA.
#include "backends/cpu/attention_kernels_impl.inl"

#ifndef SIEVE_DSA_CPU_TABLE
#error "define SIEVE_DSA_CPU_TABLE before including dsa_kernels_impl.inl"
#endif

#ifndef SIEVE_CPU_ISA_NS
#error "define SIEVE_CPU_ISA_NS (the ISA namespace of the kernels: scalar, avx2, ...) first"
#endif

// The kernels live in namespace sieve::cpu::<isa>, so that a profile names the ISA of every kernel,
// and inside an anonymous namespace (simd.h, "ODR safety").
namespace sieve::cpu::SIEVE_CPU_ISA_NS {
namespace {

inline int64_t pad16(int64_t n) { return SIEVE_DSA_PAD16(n); }
inline float f_inf() { return float_of(0x7f800000u); }

// e4m3 decoding: s_e4m3_value / vf_e4m3_values (simd.h).

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

// Entry `slot` of the main list's cache → out [qk_dim] f32 (ops/kv_load.h's rule for f32 and fp8_v32 records:
// R = qk_dim − rope_dim e4m3 values, their fp32 scales, rope_dim bf16 values; ops/cache_record.h).
void sparse_mla_dequant(const SparseAttentionParams& p, int64_t slot, float* out) {
    const CacheView& c = p.main.cache;
    const uint8_t* e = c.base + (slot / c.block_size) * c.block_bytes + (slot % c.block_size) * c.entry_bytes;
    const int64_t dr = p.rope_dim, r = p.qk_dim - dr;
    if (p.main.format == CacheRecordFormat::f32) {
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
    const int64_t g = r < 128 ? r : 128;  // fp8_v32's group (ops/cache_record.h, §3.4)
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

// One chunk of nc dequantized entries kc [C, dqk] through the FMA tiles, for the heads [0, nh) of the call
// (sink: the call's first head's sink, or nullptr): per register block of heads the logits, the online-softmax
// update, then P·V over the first r values.
inline void mla_chunk_fma(const SparseAttentionParams& p, const float* sink, const float* qf, int64_t nh, float* kc,
                          float* kt, float* lg, int64_t nc, AttnSoftmaxState st) {
    const int64_t r = p.v_dim, dqk = p.qk_dim, C = kSparseMlaChunk;
    const bool p_bf16 = p.math == AttentionMath::bf16;
    const float inf = f_inf();
    float factor[kAttnHeadBlock];
    const int64_t nc_pad = (nc + 2 * kLanes - 1) / (2 * kLanes) * (2 * kLanes);  // ≤ C (C a multiple of 32)
    for (int64_t c = nc; c < nc_pad; ++c)  // zero rows: the padded logit columns stay finite (unused)
        for (int64_t d = 0; d < dqk; ++d) kc[c * dqk + d] = 0.0f;
    attn_transpose_chunk(kc, dqk, nc_pad, dqk, kt, C);
    for (int64_t hb = 0, nb = 0; hb < nh; hb += nb) {
        nb = attn_head_block(nh, hb);
        // Logits first (all heads of the block), then the online-softmax update, then P·V.
        attn_logits_heads(static_cast<int>(nb), qf + hb * dqk, dqk, kt, C, nc_pad, p.scale, lg + hb * C);
        for (int64_t b = 0; b < nb; ++b) {
            const int64_t h = hb + b;
            float* lh = lg + h * C;
            if (sink && sink[h] == inf) {  // σ = +inf: the output is 0; weights 0 keep acc at 0
                for (int64_t c = 0; c < nc; ++c) lh[c] = 0.0f;
                factor[b] = 0.0f;
                continue;
            }
            // A NaN logit may or may not become m; either way its weight below is NaN (vf_exp_nonpositive,
            // expf), so den and acc turn NaN and stay NaN: the output is NaN (ops/sparse_attention.h).
            float m = st.mx[h];
            for (int64_t c = 0; c < nc; ++c) m = s_fmax(m, lh[c]);
            const float sum = attn_chunk_weights(lh, nc, m, p_bf16);
            factor[b] = st.mx[h] == -inf ? 0.0f : __builtin_expf(st.mx[h] - m);
            st.den[h] = st.den[h] * factor[b] + sum;
            st.mx[h] = m;
        }
        attn_chunk_pv_heads(static_cast<int>(nb), lg + hb * C, C, kc, dqk, nc, factor, st.acc + hb * r, r);
    }
}

#if defined(__AVX512BF16__)
// ---- the tile path (amx_bf16 level; avx512_bf16: the same path on register tiles; attention_kernels_impl.inl
// attn_tiles_chunk) ---------------------------------------------------------------------------------------
//
// With bf16 q and math bf16 over fp8_v32 entries: a value e4m3·s is exact in bf16, normal or zero, when its
// group's fp32 scale s is a power of two 2^(e − 127) with e in [10, 246] (as the UE8M0 scales every cache
// store writes, dsa_mla.md §3.4; the bounds as in dsv4_kernels_impl.inl); the rope values are bf16. A chunk
// holding another scale runs through the FMA tiles.

// Entry `slot` of an fp8_v32 cache as bf16 values → out [qk_dim]; false (out partly written) when a scale is
// not such a power of two.
inline bool mla_entry_bf16(const SparseAttentionParams& p, int64_t slot, uint16_t* out) {
    const CacheView& c = p.main.cache;
    const uint8_t* e = c.base + (slot / c.block_size) * c.block_bytes + (slot % c.block_size) * c.entry_bytes;
    const int64_t dr = p.rope_dim, r = p.qk_dim - dr, g = r < 128 ? r : 128;
    const uint8_t* scales = e + r;
    for (int64_t k = 0; k < r / g; ++k) {
        uint32_t bits;
        __builtin_memcpy(&bits, scales + 4 * k, 4);
        const uint32_t ex = bits >> 23;  // a positive power of two has no sign and no mantissa bits
        if ((bits & 0x007fffffu) != 0 || ex < 10 || ex > 246) return false;
        attn_e4m3_to_bf16(e + k * g, static_cast<int>(ex), out + k * g, g);
    }
    const uint8_t* rope = scales + 4 * (r / g);
    for (int64_t j = 0; j < dr; j += 32) _mm512_storeu_si512(out + r + j, _mm512_loadu_si512(rope + 2 * j));
    return true;
}

// Prefetches (into L2) the entries after the chunk being computed, from list position j on (−1 skipped).
struct MlaNextRows {
    const CacheView* cache;
    const int32_t* slots;
    int64_t n, j;
    void prefetch(int64_t rows) {
        for (; j < n && rows > 0; ++j) {
            if (slots[j] < 0) continue;
            const int64_t slot = slots[j];
            const uint8_t* e = cache->base + (slot / cache->block_size) * cache->block_bytes + (slot % cache->block_size) * cache->entry_bytes;
            for (int64_t o = 0; o < cache->entry_bytes; o += 64) prefetch_l2(e + o);
            prefetch_l2(e + cache->entry_bytes - 1);
            --rows;
        }
    }
};
#endif  // __AVX512BF16__

// The MLA path of ops/sparse_attention.h: V = the first r = v_dim values of each entry, the main list only.
void sparse_mla_heads(const SparseAttentionParams& p, int64_t t, int64_t h0, int64_t h1, float* scratch) {
    const int64_t r = p.v_dim, dqk = p.qk_dim, nh = h1 - h0, C = kSparseMlaChunk;
    float* qf = scratch;                        // [nh, dqk]
    float* kc = qf + pad16(nh * dqk);           // [C, dqk] dequantized entries
    float* kt = kc + pad16(C * dqk);            // [dqk, C] the same, transposed
    float* lg = kt + pad16(C * dqk);            // [nh, C] logits, then weights
    float* acc = lg + pad16(nh * C);            // [nh16, R]
    float* mx = acc + pad16(nh) * r;            // [nh16] running max
    float* den = mx + pad16(nh);                // [nh16] running denominator
    const AttnSoftmaxState st{acc, mx, den};
    const bool qb = p.q_type == DType::bf16, ob = p.out_type == DType::bf16;
    const float inf = f_inf();
    const float* sink = p.sink ? p.sink + h0 : nullptr;
    for (int64_t h = 0; h < pad16(nh); ++h) {  // the padded heads of the tile path too
        if (h < nh) {
            const char* q = static_cast<const char*>(p.q) + (t * p.q_token_stride + (h0 + h) * p.q_head_stride) * (qb ? 2 : 4);
            load_row_f32(q, qb, dqk, qf + h * dqk);
        }
        // The sink starts the running max and contributes exp(σ − σ) = 1 to the denominator (§2.8); a NaN
        // sink contributes nothing here and poisons den through the first rescale factor e^(σ − M).
        mx[h] = h < nh && sink ? sink[h] : -inf;
        den[h] = mx[h] > -inf ? 1.0f : 0.0f;
        for (int64_t i = 0; i < r; ++i) acc[h * r + i] = 0.0f;
    }
    const int64_t topk = p.main.width;
    const int32_t* row = topk > 0 ? p.main.slots + t * p.main.slots_stride : nullptr;
    int64_t n_valid = 0;
#if defined(__AVX512BF16__)
    const bool tiles = qb && p.math == AttentionMath::bf16 && p.main.format == CacheRecordFormat::fp8_v32 &&
                       dqk % 32 == 0 && r % 64 == 0 && (dqk - p.rope_dim) % 32 == 0 && p.rope_dim % 32 == 0;
    // The tile buffers after the state (SIEVE_SPARSE_MLA_TILE_SCRATCH_FLOATS's layout).
    const int64_t CT = kSparseMlaTileChunk;
    float* const qt = den + pad16(nh);
    float* const kb = qt + pad16(pad16(nh) * dqk / 2);
    float* const kv = kb + pad16(CT * dqk / 2);
    float* const lt = kv + pad16(CT * r / 2);
    float* const pt = lt + 16 * CT;
    float* const pb = pt + 16 * CT;
    const AttnTileBuffers tw{reinterpret_cast<uint32_t*>(qt), reinterpret_cast<uint16_t*>(kb), reinterpret_cast<uint16_t*>(kv),
                             reinterpret_cast<uint16_t*>(pb), lt, pt};
    if (tiles) {
#if defined(__AMX_BF16__)
        amx_tiles_begin();
#endif
        for (int64_t g = 0; g * 16 < nh; ++g) attn_q_pairs_t(qf + g * 16 * dqk, s_min(int64_t{16}, nh - g * 16), dqk, tw.qt + g * (dqk / 2) * 16);
    }
#endif
    for (int64_t j = 0; j < topk;) {
#if defined(__AVX512BF16__)
        if (tiles) {
            const int64_t j0 = j;
            bool exact = true;
            int64_t nc = 0;
            for (; j < topk && nc < CT; ++j) {
                if (row[j] < 0) continue;
                if (!mla_entry_bf16(p, row[j], tw.kb + nc * dqk)) exact = false;
                ++nc;
            }
            if (nc == 0) break;
            if (exact) {
                n_valid += nc;
                MlaNextRows next{&p.main.cache, row, topk, j};
                attn_tiles_values_from_keys(tw, dqk, r, nc);
                attn_tiles_chunk(nh, dqk, r, nc, CT, p.scale, tw, st, next);
                continue;
            }
            j = j0;  // gathered again below, in fp32
        }
#endif
        int64_t nc = 0;
        for (; j < topk && nc < C; ++j) {
            if (row[j] < 0) continue;
            sparse_mla_dequant(p, row[j], kc + nc * dqk);
            ++nc;
        }
        if (nc == 0) break;
        n_valid += nc;
        mla_chunk_fma(p, sink, qf, nh, kc, kt, lg, nc, st);
    }
#if defined(__AMX_BF16__)
    if (tiles) amx_tiles_end();
#endif
    for (int64_t h = 0; h < nh; ++h) {
        char* o = static_cast<char*>(p.out) + (t * p.out_token_stride + (h0 + h) * p.out_head_stride) * (ob ? 2 : 4);
        // Exactly the rows the contract sends to 0: no valid entry (lonely q) or σ = +inf. Any other den is
        // ≥ 1 (the max term) or NaN (non-finite logits, values or sink), and NaN must reach the output.
        const bool zero = n_valid == 0 || (sink && sink[h] == inf);
        const float inv = zero ? 0.0f : 1.0f / den[h];
        const float* ah = acc + h * r;
        const VF vinv = vf_set1(inv);
        int64_t i = 0;
        for (; i + kLanes <= r; i += kLanes) vf_store_row(o, ob, i, zero ? vf_zero() : vf_mul(vf_load(ah + i), vinv));
        for (; i < r; ++i) s_store(o, ob, i, zero ? 0.0f : ah[i] * inv);
    }
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
}  // namespace sieve::cpu::SIEVE_CPU_ISA_NS

namespace sieve::cpu {

extern const DsaCpuKernels SIEVE_DSA_CPU_TABLE;
const DsaCpuKernels SIEVE_DSA_CPU_TABLE = {
    SIEVE_CPU_ISA_NAME,
#if defined(__AVX512BF16__)
    true,
#else
    false,
#endif
    SIEVE_CPU_ISA_NS::sparse_mla_heads,
    SIEVE_CPU_ISA_NS::head_proj_tokens,
};

}  // namespace sieve::cpu
