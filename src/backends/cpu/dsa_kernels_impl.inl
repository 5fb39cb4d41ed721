// Kernel bodies of the DSA-on-MLA cpu ops (sparse MLA attention, indexer scores, per-head projection),
// written once over
// simd.h and compiled once per ISA by dsa_kernels_<isa>.cpp, which defines SIEVE_DSA_CPU_TABLE before
// including this file. Everything is in an anonymous namespace (simd.h, "ODR safety"): no std::, no
// core/dtype.h inline helpers, no CacheView member calls. Semantics: ops/sparse_attention.h, ops/dsa_indexer.h;
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

// The MLA path of ops/sparse_attention.h: V = the first r = v_dim values of each entry, the main list only.
void sparse_mla_heads(const SparseAttentionParams& p, int64_t t, int64_t h0, int64_t h1, float* scratch) {
    const int64_t r = p.v_dim, dqk = p.qk_dim, nh = h1 - h0, C = kSparseMlaChunk;
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
        // The sink starts the running max and contributes exp(σ − σ) = 1 to the denominator (§2.8); a NaN
        // sink contributes nothing here and poisons den through the first rescale factor e^(σ − M).
        const float sink = p.sink ? p.sink[h0 + h] : -inf;
        mx[h] = sink;
        den[h] = sink > -inf ? 1.0f : 0.0f;
        for (int64_t i = 0; i < r; ++i) acc[h * r + i] = 0.0f;
    }
    const int64_t topk = p.main.width;
    const int32_t* row = topk > 0 ? p.main.slots + t * p.main.slots_stride : nullptr;
    int64_t n_valid = 0;
    float factor[kAttnHeadBlock];
    for (int64_t j = 0; j < topk;) {
        int64_t nc = 0;
        for (; j < topk && nc < C; ++j) {
            if (row[j] < 0) continue;
            sparse_mla_dequant(p, row[j], kc + nc * dqk);
            ++nc;
        }
        if (nc == 0) break;
        n_valid += nc;
        const int64_t nc_pad = (nc + 2 * kLanes - 1) / (2 * kLanes) * (2 * kLanes);  // ≤ C (C a multiple of 32)
        for (int64_t c = nc; c < nc_pad; ++c)  // zero rows: the padded logit columns stay finite (unused)
            for (int64_t d = 0; d < dqk; ++d) kc[c * dqk + d] = 0.0f;
        attn_transpose_chunk(kc, dqk, nc_pad, dqk, kt, C);
        for (int64_t hb = 0; hb < nh; hb += kAttnHeadBlock) {
            const int nb = nh - hb < kAttnHeadBlock ? static_cast<int>(nh - hb) : kAttnHeadBlock;
            // Logits first (all heads of the block), then the online-softmax update, then P·V.
            attn_logits_heads(nb, qf + hb * dqk, dqk, kt, C, nc_pad, p.scale, lg + hb * C);
            for (int b = 0; b < nb; ++b) {
                const int64_t h = hb + b;
                float* lh = lg + h * C;
                if (p.sink && p.sink[h0 + h] == inf) {  // σ = +inf: the output is 0; weights 0 keep acc at 0
                    for (int64_t c = 0; c < nc; ++c) lh[c] = 0.0f;
                    factor[b] = 0.0f;
                    continue;
                }
                // A NaN logit may or may not become m; either way its weight below is NaN (vf_exp_nonpositive,
                // expf), so den and acc turn NaN and stay NaN: the output is NaN (ops/sparse_attention.h).
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
            attn_chunk_pv_heads(nb, lg + hb * C, C, kc, dqk, nc, factor, acc + hb * r, r);
        }
    }
    for (int64_t h = 0; h < nh; ++h) {
        char* o = static_cast<char*>(p.out) + (t * p.out_token_stride + (h0 + h) * p.out_head_stride) * (ob ? 2 : 4);
        // Exactly the rows the contract sends to 0: no valid entry (lonely q) or σ = +inf. Any other den is
        // ≥ 1 (the max term) or NaN (non-finite logits, values or sink), and NaN must reach the output.
        const bool zero = n_valid == 0 || (p.sink && p.sink[h0 + h] == inf);
        const float inv = zero ? 0.0f : 1.0f / den[h];
        const float* ah = acc + h * r;
        const VF vinv = vf_set1(inv);
        int64_t i = 0;
        for (; i + kLanes <= r; i += kLanes) vf_store_row(o, ob, i, zero ? vf_zero() : vf_mul(vf_load(ah + i), vinv));
        for (; i < r; ++i) s_store(o, ob, i, zero ? 0.0f : ah[i] * inv);
    }
}

// ===================================== indexer scores =============================================
//
// One call scores a key tile of one sequence for every query row of that sequence (dsa_cpu_ops.cpp builds
// the units): each key is gathered and converted once per tile, i.e. once per step. Lanes = heads: the row's
// q is transposed to qᵀ [Di, Hi] (kept across calls for the same row: the scratch's tag), so the keys need no
// transposition; a register block is kIdxKeys keys × up to 4 head vectors with one broadcast key value per
// dim (pair of dims for vdpbf16ps), then ReLU · w per head and a horizontal sum per key, times the key scale
// (ops/dsa_indexer.h). fp8 q and keys are e4m3 values, exact in bf16: at avx512_bf16 the products of
// vdpbf16ps are exact and only the fp32 sums round (§2.6 "FP8 execution"; any order). The instruction reads
// bf16 subnormals as 0 and flushes subnormal sums, which e4m3 products (≥ 2^-18) never are. A key with an
// e4m3 NaN byte takes the fp32 path of the formula (idx_score_fp32: the NaN dot counts as ReLU 0, as before).

// Register block: kIdxKeys keys × kIdxVecs head vectors of accumulators, enough independent chains to
// cover the FMA latency of two pipes, plus the q vectors and one broadcast key value.
#if defined(__AVX512F__)
inline constexpr int kIdxKeys = 4, kIdxVecs = 4;  // 16 accumulators + 4 q of the 32 registers
#elif defined(__AVX2__)
inline constexpr int kIdxKeys = 6, kIdxVecs = 2;  // 12 accumulators + 2 q of the 16 registers
#else
inline constexpr int kIdxKeys = 4, kIdxVecs = 4;
#endif

struct IdxScratch {
    float* qt;
    float* w;
    float* tile;
    const void** rows;
    float* scale;
    int32_t* flag;
    float* zero;
    float* key;
    int64_t* tag;
    int64_t hp, dp;
};

// The layout of SIEVE_INDEXER_SCORES_SCRATCH_FLOATS.
inline IdxScratch idx_scratch(const DsaIndexerScoresParams& p, int64_t kt, float* s) {
    IdxScratch S;
    S.hp = SIEVE_DSA_IDX_HP(p.n_heads);
    S.dp = SIEVE_DSA_IDX_DP(p.head_dim);
    S.qt = s;
    s += S.dp * S.hp;
    S.w = s;
    s += S.hp;
    S.tile = s;
    s += kt * S.dp;
    S.rows = reinterpret_cast<const void**>(s);
    s += 2 * pad16(kt);
    S.scale = s;
    s += pad16(kt);
    S.flag = reinterpret_cast<int32_t*>(s);
    s += pad16(kt);
    S.zero = s;
    s += S.dp;
    S.key = s;
    s += S.dp;
    S.tag = reinterpret_cast<int64_t*>(s);
    return S;
}

// The entry of candidate u of the sequence (block table `table`): fp8 values (and the scale) or the f32 row.
inline const uint8_t* idx_key_entry(const DsaIndexerScoresParams& p, const int32_t* table, int64_t u, float* scale) {
    const CacheView& c = p.keys;
    const uint8_t* block = c.base + static_cast<int64_t>(table[u / c.block_size]) * c.block_bytes;
    const int64_t off = u % c.block_size;
    if (p.format == CacheRecordFormat::f32) return block + off * c.entry_bytes;
    __builtin_memcpy(scale, block + c.block_size * p.head_dim + 4 * off, 4);  // §3.3: values at off·Di, scale at B·Di + 4·off
    return block + off * p.head_dim;
}

// sacc[k] += Σ_v w_v · ReLU(<q_v, key_k>) for NK keys (f32 rows) and NV head vectors of qᵀ (row stride hp).
template <int NK, int NV>
inline void idx_block_f32(const float* const* rows, const float* qt, int64_t hp, int64_t d, const float* w, VF* sacc) {
    VF acc[NK][NV];
    for (int k = 0; k < NK; ++k)
        for (int v = 0; v < NV; ++v) acc[k][v] = vf_zero();
    for (int64_t i = 0; i < d; ++i) {
        VF qv[NV];
        for (int v = 0; v < NV; ++v) qv[v] = vf_load(qt + i * hp + v * kLanes);
        for (int k = 0; k < NK; ++k) {
            const VF kb = vf_set1(rows[k][i]);
            for (int v = 0; v < NV; ++v) acc[k][v] = vf_fma(qv[v], kb, acc[k][v]);
        }
    }
    const VF zero = vf_zero();
    for (int k = 0; k < NK; ++k)
        for (int v = 0; v < NV; ++v) sacc[k] = vf_fma(vf_load(w + v * kLanes), vf_max(acc[k][v], zero), sacc[k]);
}

// Not inlined: the register block gets its own register allocation, whatever the caller holds live
// (inlined into the tile loops it measured up to 2× slower at some ISA levels).
__attribute__((noinline)) void idx_keys_f32(const float* const* rows, const float* qt, int64_t hp, int64_t d, const float* w, float* sums) {
    VF sacc[kIdxKeys];
    for (int k = 0; k < kIdxKeys; ++k) sacc[k] = vf_zero();
    const int64_t nv = hp / kLanes;
    int64_t v = 0;
    for (; v + kIdxVecs <= nv; v += kIdxVecs)
        idx_block_f32<kIdxKeys, kIdxVecs>(rows, qt + v * kLanes, hp, d, w + v * kLanes, sacc);
    switch (nv - v) {
        case 3: idx_block_f32<kIdxKeys, 3>(rows, qt + v * kLanes, hp, d, w + v * kLanes, sacc); break;
        case 2: idx_block_f32<kIdxKeys, 2>(rows, qt + v * kLanes, hp, d, w + v * kLanes, sacc); break;
        case 1: idx_block_f32<kIdxKeys, 1>(rows, qt + v * kLanes, hp, d, w + v * kLanes, sacc); break;
        default: break;
    }
    for (int k = 0; k < kIdxKeys; ++k) sums[k] = vf_sum(sacc[k]);
}

#if defined(__AVX512BF16__)
// A row of e4m3 bytes → the exact values as bf16 (the high half of the fp32 value: e4m3 has 4 significant
// bits), in pairs; an odd Di gets a zero partner. True for a NaN byte.
inline bool idx_decode_bf16(const uint8_t* src, uint16_t* dst, int64_t n) {
    // 32 codes per step in 16-bit lanes: sign-extended byte << 4, masked, is the bf16 of value · 2^-120 (sign in
    // bit 15, exponent and mantissa fields in place); + 120 in the exponent field restores the value of a normal
    // code; the e = 0 codes (zero, subnormals m · 2^-9) come from a table, then the sign is put back.
    const __m512i mask = _mm512_set1_epi16(static_cast<int16_t>(0x87f0)), bias = _mm512_set1_epi16(120 << 7);
    const __m512i exp_bits = _mm512_set1_epi16(0x78), sign = _mm512_set1_epi16(static_cast<int16_t>(0x8000));
    const __m512i sub = _mm512_setr_epi32(0x3b000000, 0x3bc03b80, 0x3c203c00, 0x3c603c40, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0);
    const __m512i low7 = _mm512_set1_epi8(0x7f);
    bool any = false;
    int64_t i = 0;
    for (; i + 64 <= n; i += 64) {  // NaN codes 0x7F / 0xFF, 64 at a time
        const __m512i b = _mm512_loadu_si512(src + i);
        any |= _mm512_cmpeq_epi8_mask(_mm512_and_si512(b, low7), low7) != 0;
    }
    for (; i < n; ++i) any |= (src[i] & 0x7f) == 0x7f;
    for (i = 0; i + 32 <= n; i += 32) {
        const __m512i sx = _mm512_cvtepi8_epi16(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(src + i)));
        __m512i v = _mm512_add_epi16(_mm512_and_si512(_mm512_slli_epi16(sx, 4), mask), bias);
        v = _mm512_mask_permutexvar_epi16(v, _mm512_testn_epi16_mask(sx, exp_bits), sx, sub);  // e = 0: index m
        v = _mm512_ternarylogic_epi32(v, sx, sign, 0xf8);                                       // v | (sx & sign)
        _mm512_storeu_si512(dst + i, v);
    }
    for (; i < n; ++i) dst[i] = static_cast<uint16_t>(bits_of(s_e4m3_value(src[i])) >> 16);
    if (n % 2) dst[n] = 0;
    return any;
}

template <int NK, int NV>
inline void idx_block_bf16(const uint32_t* const* rows, const uint32_t* qt, int64_t hp, int64_t np, const float* w,
                           __m512* sacc) {
    __m512 acc[NK][NV];
    for (int k = 0; k < NK; ++k)
        for (int v = 0; v < NV; ++v) acc[k][v] = _mm512_setzero_ps();
    for (int64_t i = 0; i < np; ++i) {
        __m512i qv[NV];
        for (int v = 0; v < NV; ++v) qv[v] = _mm512_loadu_si512(qt + i * hp + v * 16);
        for (int k = 0; k < NK; ++k) {
            const __m512i kb = _mm512_set1_epi32(static_cast<int32_t>(rows[k][i]));  // (k[2i], k[2i+1])
            for (int v = 0; v < NV; ++v) acc[k][v] = _mm512_dpbf16_ps(acc[k][v], (__m512bh)qv[v], (__m512bh)kb);
        }
    }
    const __m512 zero = _mm512_setzero_ps();
    for (int k = 0; k < NK; ++k)
        for (int v = 0; v < NV; ++v)
            sacc[k] = _mm512_fmadd_ps(_mm512_loadu_ps(w + v * 16), _mm512_max_ps(acc[k][v], zero), sacc[k]);
}

__attribute__((noinline)) void idx_keys_bf16(const uint32_t* const* rows, const uint32_t* qt, int64_t hp, int64_t np, const float* w,
                          float* sums) {
    __m512 sacc[kIdxKeys];
    for (int k = 0; k < kIdxKeys; ++k) sacc[k] = _mm512_setzero_ps();
    const int64_t nv = hp / 16;
    int64_t v = 0;
    for (; v + 4 <= nv; v += 4) idx_block_bf16<kIdxKeys, 4>(rows, qt + v * 16, hp, np, w + v * 16, sacc);
    switch (nv - v) {
        case 3: idx_block_bf16<kIdxKeys, 3>(rows, qt + v * 16, hp, np, w + v * 16, sacc); break;
        case 2: idx_block_bf16<kIdxKeys, 2>(rows, qt + v * 16, hp, np, w + v * 16, sacc); break;
        case 1: idx_block_bf16<kIdxKeys, 1>(rows, qt + v * 16, hp, np, w + v * 16, sacc); break;
        default: break;
    }
    for (int k = 0; k < kIdxKeys; ++k) sums[k] = vf_sum(VF{sacc[k]});
}
#endif

// Key u's score by the fp32 formula, one dot per head (a key with an e4m3 NaN byte under vdpbf16ps).
inline float idx_score_fp32(const DsaIndexerScoresParams& p, const IdxScratch& S, int64_t t, const uint8_t* k8, float ks) {
    const int64_t di = p.head_dim;
    for (int64_t d = 0; d < di; ++d) S.key[d] = s_e4m3_value(k8[d]);
    float sum = 0.0f;
    for (int64_t j = 0; j < p.n_heads; ++j) {
        const uint8_t* q8 = static_cast<const uint8_t*>(p.q) + t * p.q_token_stride + j * p.q_head_stride;
        float dot = 0.0f;
        for (int64_t d = 0; d < di; ++d) dot += s_e4m3_value(q8[d]) * S.key[d];
        sum += S.w[j] * (dot > 0.0f ? dot : 0.0f);  // NaN → 0, as vf_max(dot, 0)
    }
    return sum * ks;
}

void indexer_scores_tile(const DsaIndexerScoresParams& p, int64_t seq, const int32_t* toks, int64_t nt, int64_t k0,
                         int64_t k1, int64_t fill_end, int64_t kt, float* scratch, float* tile_scores) {
    const IdxScratch S = idx_scratch(p, kt, scratch);
    const int64_t hi = p.n_heads, di = p.head_dim, hp_lanes = (hi + kLanes - 1) / kLanes * kLanes;
    const bool fp8 = p.format == CacheRecordFormat::fp8_row_scale;
#if defined(__AVX512BF16__)
    const bool bf = fp8;  // e4m3 q and keys: vdpbf16ps
#else
    const bool bf = false;
#endif
    // bf16 qᵀ pairs have 16-head rows (the vdpbf16ps lanes); f32 qᵀ rows hold the ISA's lane multiple.
    const int64_t hp = bf ? S.hp : hp_lanes;
    const int32_t* table = p.block_table + seq * p.block_table_stride;
    for (int64_t i = 0; i < S.dp; ++i) S.zero[i] = 0.0f;
    // The tile's keys, converted once for all the rows.
    for (int64_t u = k0; u < k1; ++u) {
        const int64_t r = u - k0;
        if (u + 24 < k1) {  // rows ahead (other blocks): hide the cache misses of the gather
            float unused;
            const uint8_t* ahead = idx_key_entry(p, table, u + 24, &unused);
            prefetch_l1(ahead);
            if (fp8) prefetch_l1(ahead + 64);
        }
        float ks = 1.0f;
        const uint8_t* e = idx_key_entry(p, table, u, &ks);
        S.scale[r] = ks;
        S.flag[r] = 0;
        float* row = S.tile + r * S.dp;
        S.rows[r] = row;
        if (!fp8) {
            S.rows[r] = e;  // f32 rows read in place
        } else if (bf) {
#if defined(__AVX512BF16__)
            if (idx_decode_bf16(e, reinterpret_cast<uint16_t*>(row), di)) S.flag[r] = 1;
#endif
        } else {
            int64_t d = 0;
            for (; d + kLanes <= di; d += kLanes) vf_store(row + d, vf_e4m3_values(e + d));
            for (; d < di; ++d) row[d] = s_e4m3_value(e[d]);
        }
    }
    // e4m3 → fp32 / bf16 of the q bytes (qᵀ is rebuilt per row and tile unless the tag says it is there).
    float lut[256];
    uint16_t lut16[256];
    if (fp8)
        for (int b = 0; b < 256; ++b) {
            lut[b] = s_e4m3_value(static_cast<uint8_t>(b));
            lut16[b] = static_cast<uint16_t>(bits_of(lut[b]) >> 16);  // exact (NaN codes: a bf16 NaN)
        }
    const float ninf = -f_inf();
    for (int64_t ti = 0; ti < nt; ++ti) {
        const int64_t t = toks[ti];
        const int64_t n = p.n_keys[t];
        // Key u's score goes to out[u − col0]: the op's row, or the row's line of the fused tile buffer.
        float* out = tile_scores ? tile_scores + ti * kt : p.scores + t * p.scores_row_stride;
        const int64_t col0 = tile_scores ? k0 : 0;
        const int64_t end = n < k1 ? n : k1;
        if (!tile_scores)
            for (int64_t u = (n > k0 ? n : k0); u < fill_end; ++u) out[u] = ninf;
        if (end <= k0) continue;
        if (*S.tag != t) {
            for (int64_t j = 0; j < hp; ++j) {
                // The head weight with every scale folded in (ops/dsa_indexer.h).
                float w = 0.0f;
                if (j < hi) {
                    w = p.weights[t * p.weights_token_stride + j] * p.weight_scale;
                    if (fp8) w = w * p.q_scale[t * p.q_scale_token_stride + j];
                }
                S.w[j] = w;
            }
            for (int64_t j = 0; j < hp; ++j) {
                const int64_t qo = t * p.q_token_stride + j * p.q_head_stride;
                if (bf) {
                    uint32_t* qt = reinterpret_cast<uint32_t*>(S.qt);
                    const uint8_t* q8 = static_cast<const uint8_t*>(p.q) + qo;
                    for (int64_t i = 0; i < (di + 1) / 2; ++i) {
                        const uint32_t lo = j < hi ? lut16[q8[2 * i]] : 0u;
                        const uint32_t hi16 = (j < hi && 2 * i + 1 < di) ? lut16[q8[2 * i + 1]] : 0u;
                        qt[i * hp + j] = lo | hi16 << 16;
                    }
                } else if (fp8) {
                    const uint8_t* q8 = static_cast<const uint8_t*>(p.q) + qo;
                    for (int64_t d = 0; d < di; ++d) S.qt[d * hp + j] = j < hi ? lut[q8[d]] : 0.0f;
                } else {
                    const float* qf = static_cast<const float*>(p.q) + qo;
                    for (int64_t d = 0; d < di; ++d) S.qt[d * hp + j] = j < hi ? qf[d] : 0.0f;
                }
            }
            *S.tag = t;
        }
        for (int64_t u = k0; u < end; u += kIdxKeys) {
            const int nk = static_cast<int>(end - u < kIdxKeys ? end - u : kIdxKeys);
            float sums[kIdxKeys];
#if defined(__AVX512BF16__)
            if (bf) {
                const uint32_t* r[kIdxKeys];
                for (int k = 0; k < kIdxKeys; ++k)
                    r[k] = static_cast<const uint32_t*>(k < nk ? S.rows[u + k - k0] : static_cast<const void*>(S.zero));
                idx_keys_bf16(r, reinterpret_cast<const uint32_t*>(S.qt), hp, (di + 1) / 2, S.w, sums);
            } else
#endif
            {
                const float* r[kIdxKeys];
                for (int k = 0; k < kIdxKeys; ++k)
                    r[k] = static_cast<const float*>(k < nk ? S.rows[u + k - k0] : static_cast<const void*>(S.zero));
                idx_keys_f32(r, S.qt, hp, di, S.w, sums);
            }
            for (int k = 0; k < nk; ++k) {
                const int64_t r = u + k - k0;
                if (S.flag[r] == 0) {
                    out[u + k - col0] = sums[k] * S.scale[r];
                } else {
                    float ks = 1.0f;
                    const uint8_t* e = idx_key_entry(p, table, u + k, &ks);
                    out[u + k - col0] = idx_score_fp32(p, S, t, e, ks);
                }
            }
        }
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
    SIEVE_CPU_ISA_NS::sparse_mla_heads,
    SIEVE_CPU_ISA_NS::indexer_scores_tile,
    SIEVE_CPU_ISA_NS::head_proj_tokens,
};

}  // namespace sieve::cpu
