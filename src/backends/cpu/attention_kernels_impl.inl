// Register tiles shared by the two chunked kernels of the cpu backend's sparse attention
// (ops/sparse_attention.h, cpu_sparse_attention.cpp): the MLA path (dsa_kernels_impl.inl, dsa_mla.md §2.5)
// and the MQA path (dsv4_kernels_impl.inl, deepseek_v4.md §3.8). Both gather the selected cache rows in
// chunks of C rows, dequantize a chunk once into fp32 rows kc [C, ld] plus a transposed copy kt [dim, C],
// and keep an online softmax per head:
//   logits  register tile NH heads × 2 vectors of rows: broadcast q[h, i], FMA with kt[i, j0 …]
//   P·V     register tile NH heads × 2 vectors of output dims: broadcast w[h, j], FMA with kc[j, r0 …]
//
// Included by the per-ISA kernel sources after simd.h, so it is compiled once per ISA like them, and
// everything here lives in the anonymous namespace (simd.h, "ODR safety"): no std::, no inline
// helper of another header. The name ends in kernels_impl.inl so that src/backends/CMakeLists.txt's
// ODR check covers this file too and lets the kernel sources include it.
#pragma once

#include "backends/cpu/simd.h"

namespace sieve::cpu::SIEVE_CPU_ISA_NS {
namespace {

// Heads per register tile of the logits and P·V (the chunk loops walk the heads in blocks of this): with
// 2 vectors per head, 12 heads fill 24 of AVX-512's 32 registers with accumulators (the two row or dim
// vectors and the broadcast take 3 more), 6 heads 12 of AVX2's 16. Each block streams the chunk's rows
// from L2 once, so fewer, larger blocks read them fewer times. A head's sums do not depend on the block it
// is in. AVX2 went from 4 to 6 heads: `sieve bench`, Hy4 decode attention at 16K, three interleaved rounds
// (medians) on a Zen 3: batch 16 50.1 → 39.2 ms, batch 1 3.8 → 3.4 ms; V4 and QSA within noise.
#if defined(__AVX512F__)
inline constexpr int kAttnHeadBlock = 12;
#elif defined(__AVX2__)
inline constexpr int kAttnHeadBlock = 6;
#else
inline constexpr int kAttnHeadBlock = 4;
#endif

// The heads of the register block that starts at head hb of nh: nh split into the fewest blocks of at most
// kAttnHeadBlock heads, as equal as they go (64 on AVX-512: five of 11 and one of 9, not five of 12 and a
// thin one of 4, whose tile would be bound by its loads).
inline int attn_head_block(int64_t nh, int64_t hb) {
    const int64_t blocks = (nh + kAttnHeadBlock - 1) / kAttnHeadBlock, per = (nh + blocks - 1) / blocks;
    return static_cast<int>(nh - hb < per ? nh - hb : per);
}

// e^x for x ≤ 0 (softmax weights after subtracting the running max): x = n·ln2 + r, |r| ≤ ln2/2, e^r by its
// degree-7 Taylor polynomial (truncation < 6e-9 relative), 2^n through the exponent bits. Within ~2 ulp of
// expf; arguments below −87 give ≈ 2^-126 instead of a smaller subnormal (negligible next to the max term 1).
// A NaN argument (a NaN logit, or inf − inf) gives NaN, as expf does: the clamp takes x as max's second
// operand, which MAXPS returns when either is NaN, so the NaN reaches the polynomial instead of becoming −87
// and a softmax over non-finite logits stays non-finite (ops/sparse_attention.h).
#if defined(__AVX512F__)
inline VF attn_vf_from_int(VI a) { return {_mm512_cvtepi32_ps(a.v)}; }
#elif defined(__AVX2__)
inline VF attn_vf_from_int(VI a) { return {_mm256_cvtepi32_ps(a.v)}; }
#else
inline VF attn_vf_from_int(VI a) { return {static_cast<float>(a.v)}; }
#endif

inline VF vf_exp_nonpositive(VF x) {
    x = vf_max(vf_set1(-87.0f), x);  // NaN stays NaN (see above); the conversion then gives INT32_MIN
    const VI n = vi_cvt_rne(vf_mul(x, vf_set1(1.44269504088896341f)));
    const VF nf = attn_vf_from_int(n);
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

// The chunk's weights of one head: lh[c] = exp(lh[c] − m) for c < nc, rounded to bf16 when p_bf16
// (AttentionMath::bf16: the P·V weights, ops/sparse_attention.h); returns their sum, unrounded (the
// denominator's share). A NaN logit gives a NaN weight and sum.
inline float attn_chunk_weights(float* lh, int64_t nc, float m, bool p_bf16) {
    VF vsum = vf_zero();
    const VF vm = vf_set1(m);
    int64_t c = 0;
    for (; c + kLanes <= nc; c += kLanes) {
        const VF e = vf_exp_nonpositive(vf_sub(vf_load(lh + c), vm));
        vf_store(lh + c, p_bf16 ? vf_round_bf16(e) : e);
        vsum = vf_add(vsum, e);
    }
    float sum = vf_sum(vsum);
    for (; c < nc; ++c) {
        const float e = __builtin_expf(lh[c] - m);
        lh[c] = p_bf16 ? s_bf16_to_f32(s_f32_to_bf16(e)) : e;
        sum += e;
    }
    return sum;
}

// ---- chunk transposition --------------------------------------------------------------------------

// dst[i·ldd + k] = src[k·ld + i] for a kLanes × kLanes block, in registers (exact: only moves).
#if defined(__AVX512F__)
inline void attn_transpose_block(const float* src, int64_t ld, float* dst, int64_t ldd) {
    __m512 r[16], t[16];
    for (int k = 0; k < 16; ++k) r[k] = _mm512_loadu_ps(src + k * ld);
    for (int k = 0; k < 8; ++k) {  // per 128-bit lane: (a0 b0 a1 b1), (a2 b2 a3 b3)
        t[2 * k] = _mm512_unpacklo_ps(r[2 * k], r[2 * k + 1]);
        t[2 * k + 1] = _mm512_unpackhi_ps(r[2 * k], r[2 * k + 1]);
    }
    for (int g = 0; g < 4; ++g) {  // r[4g + k], 128-bit lane L: column 4L + k of rows 4g … 4g+3
        r[4 * g + 0] = _mm512_shuffle_ps(t[4 * g], t[4 * g + 2], 0x44);
        r[4 * g + 1] = _mm512_shuffle_ps(t[4 * g], t[4 * g + 2], 0xee);
        r[4 * g + 2] = _mm512_shuffle_ps(t[4 * g + 1], t[4 * g + 3], 0x44);
        r[4 * g + 3] = _mm512_shuffle_ps(t[4 * g + 1], t[4 * g + 3], 0xee);
    }
    for (int k = 0; k < 4; ++k) {  // t[m] (m < 8) holds columns m and m + 8 of rows 0 … 7, t[8 + m] of rows 8 … 15
        t[k] = _mm512_shuffle_f32x4(r[k], r[4 + k], 0x88);
        t[4 + k] = _mm512_shuffle_f32x4(r[k], r[4 + k], 0xdd);
        t[8 + k] = _mm512_shuffle_f32x4(r[8 + k], r[12 + k], 0x88);
        t[12 + k] = _mm512_shuffle_f32x4(r[8 + k], r[12 + k], 0xdd);
    }
    for (int m = 0; m < 8; ++m) {
        _mm512_storeu_ps(dst + m * ldd, _mm512_shuffle_f32x4(t[m], t[8 + m], 0x88));
        _mm512_storeu_ps(dst + (m + 8) * ldd, _mm512_shuffle_f32x4(t[m], t[8 + m], 0xdd));
    }
}
#elif defined(__AVX2__)
inline void attn_transpose_block(const float* src, int64_t ld, float* dst, int64_t ldd) {
    __m256 r[8], t[8];
    for (int k = 0; k < 8; ++k) r[k] = _mm256_loadu_ps(src + k * ld);
    for (int k = 0; k < 4; ++k) {
        t[2 * k] = _mm256_unpacklo_ps(r[2 * k], r[2 * k + 1]);
        t[2 * k + 1] = _mm256_unpackhi_ps(r[2 * k], r[2 * k + 1]);
    }
    for (int g = 0; g < 2; ++g) {  // r[4g + k], 128-bit lane L: column 4L + k of rows 4g … 4g+3
        r[4 * g + 0] = _mm256_shuffle_ps(t[4 * g], t[4 * g + 2], 0x44);
        r[4 * g + 1] = _mm256_shuffle_ps(t[4 * g], t[4 * g + 2], 0xee);
        r[4 * g + 2] = _mm256_shuffle_ps(t[4 * g + 1], t[4 * g + 3], 0x44);
        r[4 * g + 3] = _mm256_shuffle_ps(t[4 * g + 1], t[4 * g + 3], 0xee);
    }
    for (int k = 0; k < 4; ++k) {
        _mm256_storeu_ps(dst + k * ldd, _mm256_permute2f128_ps(r[k], r[4 + k], 0x20));
        _mm256_storeu_ps(dst + (k + 4) * ldd, _mm256_permute2f128_ps(r[k], r[4 + k], 0x31));
    }
}
#else
inline void attn_transpose_block(const float* src, int64_t, float* dst, int64_t) { dst[0] = src[0]; }
#endif

// kt[i·C + c] = kc[c·ld + i] for rows c < n_rows (a multiple of kLanes) and dims i < dim.
inline void attn_transpose_chunk(const float* kc, int64_t ld, int64_t n_rows, int64_t dim, float* kt, int64_t C) {
    for (int64_t c0 = 0; c0 < n_rows; c0 += kLanes) {
        int64_t i = 0;
        for (; i + kLanes <= dim; i += kLanes) attn_transpose_block(kc + c0 * ld + i, ld, kt + i * C + c0, C);
        for (; i < dim; ++i)
            for (int64_t c = c0; c < c0 + kLanes; ++c) kt[i * C + c] = kc[c * ld + i];
    }
}

// ---- logits ---------------------------------------------------------------------------------------

// Logits of NH heads (rows of qf, stride dqk) × entries [j0, j0 + 2·kLanes) from the transposed chunk kt
// ([dqk, C]): lg[h, j] = scale · Σ_d q[h, d]·kt[d, j]. Register tile NH × 2 vectors.
template <int NH>
void attn_logits_tile(const float* qf, int64_t dqk, const float* kt, int64_t C, int64_t j0, float scale, float* lg) {
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

// Logits of nb ≤ kAttnHeadBlock heads over the chunk's columns [0, nc_pad) (nc_pad a multiple of 2·kLanes).
inline void attn_logits_heads(int nb, const float* qf, int64_t dqk, const float* kt, int64_t C, int64_t nc_pad, float scale,
                              float* lg) {
    for (int64_t j0 = 0; j0 < nc_pad; j0 += 2 * kLanes) {
        switch (nb) {
#if defined(__AVX512F__)
            case 12: attn_logits_tile<12>(qf, dqk, kt, C, j0, scale, lg); break;
            case 11: attn_logits_tile<11>(qf, dqk, kt, C, j0, scale, lg); break;
            case 10: attn_logits_tile<10>(qf, dqk, kt, C, j0, scale, lg); break;
            case 9: attn_logits_tile<9>(qf, dqk, kt, C, j0, scale, lg); break;
            case 8: attn_logits_tile<8>(qf, dqk, kt, C, j0, scale, lg); break;
            case 7: attn_logits_tile<7>(qf, dqk, kt, C, j0, scale, lg); break;
#endif
#if defined(__AVX2__)
            case 6: attn_logits_tile<6>(qf, dqk, kt, C, j0, scale, lg); break;
            case 5: attn_logits_tile<5>(qf, dqk, kt, C, j0, scale, lg); break;
#endif
            case 4: attn_logits_tile<4>(qf, dqk, kt, C, j0, scale, lg); break;
            case 3: attn_logits_tile<3>(qf, dqk, kt, C, j0, scale, lg); break;
            case 2: attn_logits_tile<2>(qf, dqk, kt, C, j0, scale, lg); break;
            default: attn_logits_tile<1>(qf, dqk, kt, C, j0, scale, lg); break;
        }
    }
}

// ---- P·V ------------------------------------------------------------------------------------------

// acc[h, r0 .. r0 + NV·kLanes) = acc·factor[h] + Σ_j w[h, j]·V[j, r] for NH heads over nc entries (V = the
// first R dims of the chunk's rows, stride dqk; w in lg, stride C). Register tile NH × NV vectors.
template <int NH, int NV>
void attn_pv_tile(const float* lg, int64_t C, const float* kc, int64_t dqk, int64_t nc, const float* factor, float* acc,
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
void attn_chunk_pv(const float* lg, int64_t C, const float* kc, int64_t dqk, int64_t nc, const float* factor, float* acc,
                   int64_t r) {
    int64_t r0 = 0;
    for (; r0 + 2 * kLanes <= r; r0 += 2 * kLanes) attn_pv_tile<NH, 2>(lg, C, kc, dqk, nc, factor, acc, r, r0);
    for (; r0 + kLanes <= r; r0 += kLanes) attn_pv_tile<NH, 1>(lg, C, kc, dqk, nc, factor, acc, r, r0);
    for (; r0 < r; ++r0)  // a tail below one vector (R not a multiple of the lane count)
        for (int h = 0; h < NH; ++h) {
            float s = acc[h * r + r0] * factor[h];
            for (int64_t j = 0; j < nc; ++j) s += lg[h * C + j] * kc[j * dqk + r0];
            acc[h * r + r0] = s;
        }
}

// attn_chunk_pv for nb ≤ kAttnHeadBlock heads.
inline void attn_chunk_pv_heads(int nb, const float* lg, int64_t C, const float* kc, int64_t dqk, int64_t nc,
                                const float* factor, float* acc, int64_t r) {
    switch (nb) {
#if defined(__AVX512F__)
        case 12: attn_chunk_pv<12>(lg, C, kc, dqk, nc, factor, acc, r); break;
        case 11: attn_chunk_pv<11>(lg, C, kc, dqk, nc, factor, acc, r); break;
        case 10: attn_chunk_pv<10>(lg, C, kc, dqk, nc, factor, acc, r); break;
        case 9: attn_chunk_pv<9>(lg, C, kc, dqk, nc, factor, acc, r); break;
        case 8: attn_chunk_pv<8>(lg, C, kc, dqk, nc, factor, acc, r); break;
        case 7: attn_chunk_pv<7>(lg, C, kc, dqk, nc, factor, acc, r); break;
#endif
#if defined(__AVX2__)
        case 6: attn_chunk_pv<6>(lg, C, kc, dqk, nc, factor, acc, r); break;
        case 5: attn_chunk_pv<5>(lg, C, kc, dqk, nc, factor, acc, r); break;
#endif
        case 4: attn_chunk_pv<4>(lg, C, kc, dqk, nc, factor, acc, r); break;
        case 3: attn_chunk_pv<3>(lg, C, kc, dqk, nc, factor, acc, r); break;
        case 2: attn_chunk_pv<2>(lg, C, kc, dqk, nc, factor, acc, r); break;
        default: attn_chunk_pv<1>(lg, C, kc, dqk, nc, factor, acc, r); break;
    }
}

// The online-softmax state of the heads of a kernel call: accumulators acc [heads, dv], running max mx
// [heads] and denominator den [heads].
struct AttnSoftmaxState {
    float* acc;
    float* mx;
    float* den;
};

// ---- AMX tile products (amx_bf16 level) ------------------------------------------------------------
//
// Where both factors of a product are bf16 values (bf16 q, cache values that are exact in bf16, the bf16
// weights P_j of AttentionMath::bf16), tdpbf16ps forms the same fp32 products as the FMA tiles above (a
// product of two bf16 values is exact in fp32) and sums them in fp32 in another order, which the contract
// allows (ops/sparse_attention.h: "fp32 products and sums, order unspecified"). The tile unit reads bf16
// subnormals as zero and writes fp32 subnormals as zero; the callers keep the values it reads normal (or
// zero). Every tile here is 16 rows × 64 bytes: 16 × 32 bf16 (A: M × K; B: K/2 rows of N (k, k+1) pairs)
// or 16 × 16 fp32 (C).
//
// The avx512_bf16 level (no AMX) runs the same path with the two tile products as vdpbf16ps register tiles
// over the same buffers (attn_tile_logits_t_keys, attn_tile_pv below): the same exact products, summed in
// fp32 in another order, inputs and outputs subnormal-flushed the same way.
#if defined(__AVX512BF16__)
#if defined(__AMX_BF16__)

// Transposed logits of 16 heads over NK key tiles (16 keys each): lt[c·16 + h] = Σ_i kb[c, i]·q[h, i] for
// c < 16·NK, where kb holds the keys' bf16 rows (stride d) and qt the heads' q as (i, i+1) pairs transposed
// ([d/2][16] pairs: the B operand of every 32-dim step). d is a multiple of 32. C tiles 0 … NK−1, qt in
// tile 4, keys in tiles 5 … 7.
template <int NK>
void attn_tile_logits_t(const uint16_t* kb, int64_t d, const uint32_t* qt, float* lt) {
    static_assert(NK >= 1 && NK <= 4, "four C tiles");
    _tile_zero(0);
    if constexpr (NK > 1) _tile_zero(1);
    if constexpr (NK > 2) _tile_zero(2);
    if constexpr (NK > 3) _tile_zero(3);
    const int64_t stride = d * 2;
    for (int64_t i = 0; i < d; i += 32) {
        _tile_loadd(4, qt + i / 2 * 16, 64);
        _tile_loadd(5, kb + i, stride);
        _tile_dpbf16ps(0, 5, 4);
        if constexpr (NK > 1) {
            _tile_loadd(6, kb + 16 * d + i, stride);
            _tile_dpbf16ps(1, 6, 4);
        }
        if constexpr (NK > 2) {
            _tile_loadd(7, kb + 32 * d + i, stride);
            _tile_dpbf16ps(2, 7, 4);
        }
        if constexpr (NK > 3) {
            _tile_loadd(5, kb + 48 * d + i, stride);
            _tile_dpbf16ps(3, 5, 4);
        }
    }
    _tile_stored(0, lt, 64);
    if constexpr (NK > 1) _tile_stored(1, lt + 256, 64);
    if constexpr (NK > 2) _tile_stored(2, lt + 512, 64);
    if constexpr (NK > 3) _tile_stored(3, lt + 768, 64);
}

inline void attn_tile_logits_t_keys(int64_t n_keys, const uint16_t* kb, int64_t d, const uint32_t* qt, float* lt) {
    for (int64_t c = 0; c < n_keys; c += 64, kb += 64 * d, lt += 64 * 16) {
        switch ((n_keys - c) / 16) {
            case 1: attn_tile_logits_t<1>(kb, d, qt, lt); break;
            case 2: attn_tile_logits_t<2>(kb, d, qt, lt); break;
            case 3: attn_tile_logits_t<3>(kb, d, qt, lt); break;
            default: attn_tile_logits_t<4>(kb, d, qt, lt); break;
        }
    }
}

// acc[h, r] += Σ_c pb[h, c]·V[c, r] for 16 heads (acc stride d), keys c < 32·n_steps and every dim r < d (a
// multiple of 64): pb [16][ldp] the bf16 weights, kv the keys' rows interleaved in pairs ([keys/2][d] pairs
// (V[2k, r], V[2k+1, r]): the B operand). Four C tiles of dims at a time, each loaded and stored once for all
// the keys; the weights of a 32-key step in tile 6 or 7, values in tiles 4, 5.
inline void attn_tile_pv(const uint16_t* pb, int64_t ldp, int64_t n_steps, const uint16_t* kv, int64_t d, float* acc) {
    const int64_t acc_stride = d * 4, kv_stride = d * 4, pb_stride = ldp * 2;
    for (int64_t r = 0; r < d; r += 64) {
        _tile_loadd(0, acc + r, acc_stride);
        _tile_loadd(1, acc + r + 16, acc_stride);
        _tile_loadd(2, acc + r + 32, acc_stride);
        _tile_loadd(3, acc + r + 48, acc_stride);
        for (int64_t s = 0; s < n_steps; s += 2) {
            const uint16_t* v = kv + s * 16 * d * 2 + 2 * r;  // keys 32·s …
            _tile_loadd(6, pb + 32 * s, pb_stride);
            _tile_loadd(4, v, kv_stride);
            _tile_dpbf16ps(0, 6, 4);
            _tile_loadd(5, v + 32, kv_stride);
            _tile_dpbf16ps(1, 6, 5);
            _tile_loadd(4, v + 64, kv_stride);
            _tile_dpbf16ps(2, 6, 4);
            _tile_loadd(5, v + 96, kv_stride);
            _tile_dpbf16ps(3, 6, 5);
            if (s + 1 == n_steps) break;
            v += 16 * d * 2;  // keys 32·(s + 1) …
            _tile_loadd(7, pb + 32 * (s + 1), pb_stride);
            _tile_loadd(4, v, kv_stride);
            _tile_dpbf16ps(0, 7, 4);
            _tile_loadd(5, v + 32, kv_stride);
            _tile_dpbf16ps(1, 7, 5);
            _tile_loadd(4, v + 64, kv_stride);
            _tile_dpbf16ps(2, 7, 4);
            _tile_loadd(5, v + 96, kv_stride);
            _tile_dpbf16ps(3, 7, 5);
        }
        _tile_stored(0, acc + r, acc_stride);
        _tile_stored(1, acc + r + 16, acc_stride);
        _tile_stored(2, acc + r + 32, acc_stride);
        _tile_stored(3, acc + r + 48, acc_stride);
    }
}

#else  // __AMX_BF16__

// attn_tile_logits_t_keys (above) as register tiles: per 16 keys, one accumulator of the 16 heads' sums per key;
// each (i, i+1) step loads the heads' q pairs once and takes each key's pair by broadcast. n_keys a multiple
// of 16.
inline void attn_tile_logits_t_keys(int64_t n_keys, const uint16_t* kb, int64_t d, const uint32_t* qt, float* lt) {
    constexpr int kKeys = 16;
    for (int64_t c0 = 0; c0 < n_keys; c0 += kKeys) {
        __m512 acc[kKeys];
        for (int k = 0; k < kKeys; ++k) acc[k] = _mm512_setzero_ps();
        const uint16_t* keys = kb + c0 * d;
        for (int64_t i = 0; i < d; i += 2) {
            const __m512bh q = (__m512bh)_mm512_loadu_si512(qt + i / 2 * 16);
            for (int k = 0; k < kKeys; ++k) acc[k] = dp_bf16_broadcast(acc[k], q, keys + k * d + i);
        }
        for (int k = 0; k < kKeys; ++k) _mm512_storeu_ps(lt + (c0 + k) * 16, acc[k]);
    }
}

// attn_tile_pv (above) as register tiles: per 16 dims, the 16 heads' accumulators; each key pair loads its
// values once and takes each head's weight pair by broadcast.
inline void attn_tile_pv(const uint16_t* pb, int64_t ldp, int64_t n_steps, const uint16_t* kv, int64_t d, float* acc) {
    const int64_t n_pairs = n_steps * 16;  // 32 keys a step, two a pair
    for (int64_t r = 0; r < d; r += 16) {
        __m512 a[16];
        for (int h = 0; h < 16; ++h) a[h] = _mm512_loadu_ps(acc + h * d + r);
        for (int64_t k2 = 0; k2 < n_pairs; ++k2) {
            const __m512bh v = (__m512bh)_mm512_loadu_si512(kv + k2 * 2 * d + 2 * r);
            for (int h = 0; h < 16; ++h) a[h] = dp_bf16_broadcast(a[h], v, pb + h * ldp + 2 * k2);
        }
        for (int h = 0; h < 16; ++h) _mm512_storeu_ps(acc + h * d + r, a[h]);
    }
}

#endif  // __AMX_BF16__

// o[2r + k] = (k ? y : x)[r] for r < d (a multiple of 32): two rows of bf16 values interleaved value by
// value, the B operand's layout for P·V (y = nullptr: zeros). Exact: only moves.
inline void attn_interleave_row_pair(const uint16_t* x, const uint16_t* y, int64_t d, uint16_t* o) {
    alignas(64) static constexpr uint16_t kLo[32] = {0, 32, 1, 33, 2, 34, 3, 35, 4, 36, 5, 37, 6, 38, 7, 39,
                                                       8, 40, 9, 41, 10, 42, 11, 43, 12, 44, 13, 45, 14, 46, 15, 47};
    const __m512i lo = _mm512_load_si512(kLo);  // lane 2r: x[r], lane 2r + 1: y[r]
    const __m512i hi = _mm512_add_epi16(lo, _mm512_set1_epi16(16));
    for (int64_t r = 0; r < d; r += 32) {
        const __m512i a = _mm512_loadu_si512(x + r), b = y ? _mm512_loadu_si512(y + r) : _mm512_setzero_si512();
        _mm512_storeu_si512(o + 2 * r, _mm512_permutex2var_epi16(a, lo, b));
        _mm512_storeu_si512(o + 2 * r + 32, _mm512_permutex2var_epi16(a, hi, b));
    }
}

// kv[(k/2)·2d + 2r + (k & 1)] = kb[k·ldk + r]: rows k, k+1 of kb interleaved, for k < n_keys (even) and r < d.
inline void attn_interleave_pairs(const uint16_t* kb, int64_t ldk, int64_t n_keys, int64_t d, uint16_t* kv) {
    for (int64_t k = 0; k < n_keys; k += 2) attn_interleave_row_pair(kb + k * ldk, kb + (k + 1) * ldk, d, kv + k * d);
}

// dst[i] = bf16(e4m3(src[i]) · 2^(scale_exp − 127)) for i < n (a multiple of 32), exactly: the callers have
// checked scale_exp ∈ [10, 246], which keeps every product a normal bf16 value or zero. Built in the bf16
// bit fields, 32 codes a step: a normal code's exponent and mantissa fields (code & 0x7F) << 4 plus
// (scale_exp − 7) << 7 (e4m3's bias 7 against bf16's 127); the e = 0 codes (zero, subnormals m · 2^-9) from
// a table of m · 2^-9 as bf16, scaled the same way where m ≠ 0; then the sign. NaN codes give the quiet
// bf16 NaN with their sign, as rounding the widened NaN would.
inline void attn_e4m3_to_bf16(const uint8_t* src, int scale_exp, uint16_t* dst, int64_t n) {
    const __m512i mask = _mm512_set1_epi16(static_cast<int16_t>(0x07f0)), exp_bits = _mm512_set1_epi16(0x78);
    const __m512i bias = _mm512_set1_epi16(static_cast<int16_t>((scale_exp - 7) << 7));
    const __m512i sign = _mm512_set1_epi16(static_cast<int16_t>(0x8000)), low7 = _mm512_set1_epi16(0x7f);
    const __m512i nan = _mm512_set1_epi16(0x7fc0);
    // m · 2^-9 as bf16 for m = 0 … 7 (16-bit lanes 0 … 7), times 2^(scale_exp − 127) for m ≠ 0
    const __m512i sub1 = _mm512_setr_epi32(0x3b000000, 0x3bc03b80, 0x3c203c00, 0x3c603c40, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0);
    const __m512i sub = _mm512_mask_add_epi16(sub1, 0xfe, sub1, _mm512_set1_epi16(static_cast<int16_t>((scale_exp - 127) << 7)));
    for (int64_t i = 0; i < n; i += 32) {
        const __m512i sx = _mm512_cvtepi8_epi16(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(src + i)));
        __m512i v = _mm512_add_epi16(_mm512_and_si512(_mm512_slli_epi16(sx, 4), mask), bias);
        v = _mm512_mask_permutexvar_epi16(v, _mm512_testn_epi16_mask(sx, exp_bits), sx, sub);  // e = 0: index m
        v = _mm512_mask_mov_epi16(v, _mm512_cmpeq_epi16_mask(_mm512_and_si512(sx, low7), low7), nan);
        _mm512_storeu_si512(dst + i, _mm512_ternarylogic_epi32(v, sx, sign, 0xf8));  // v | (sx & sign)
    }
}

// qt[(i/2)·16 + h] = the (q[h, i], q[h, i+1]) pair, as bf16, of 16 rows of q (fp32 values that are bf16:
// widened bf16 q), rows h ≥ n_rows zero; i < d (a multiple of 32).
inline void attn_q_pairs_t(const float* qf, int64_t n_rows, int64_t d, uint32_t* qt) {
    alignas(64) uint32_t pairs[16 * 16];
    for (int64_t i = 0; i < d; i += 32) {
        for (int64_t h = 0; h < 16; ++h) {
            __m512i v = _mm512_setzero_si512();
            if (h < n_rows) {
                const __m512 x = _mm512_loadu_ps(qf + h * d + i), y = _mm512_loadu_ps(qf + h * d + i + 16);
                v = reinterpret_cast<__m512i>(_mm512_cvtne2ps_pbh(y, x));  // exact: bf16 values
            }
            _mm512_store_si512(pairs + h * 16, v);
        }
        attn_transpose_block(reinterpret_cast<const float*>(pairs), 16, reinterpret_cast<float*>(qt + i / 2 * 16), 16);
    }
}

// The buffers of one kernel call's tile path (CT: its rows per chunk; dqk, dv: the entries' K and V dims):
// q as bf16 pairs qt [heads/16][dqk/2][16], the chunk's bf16 rows kb [CT, dqk] and their first dv values in
// pairs kv [CT/2][dv][2], the transposed logits then weights lt [CT][16] and their transpose pt [16][CT]
// (fp32), the bf16 weights pb [16][CT].
struct AttnTileBuffers {
    uint32_t* qt;
    uint16_t *kb, *kv, *pb;
    float *lt, *pt;
};

// Rows per 32-row weight tile: the tile path pads a chunk of nc rows to attn_tile_rows(nc).
inline int64_t attn_tile_rows(int64_t nc) { return (nc + 31) / 32 * 32; }

// The V operand of entries whose values are the first dv of their K dims (DeepSeek-V4's K = V, MLA's latent
// c): kb's rows [nc, attn_tile_rows(nc)) zeroed (finite logits, zero values under zero weights), then kv.
inline void attn_tiles_values_from_keys(AttnTileBuffers w, int64_t dqk, int64_t dv, int64_t nc) {
    const int64_t nc_pad = attn_tile_rows(nc);
    for (int64_t c = nc; c < nc_pad; ++c)
        for (int64_t i = 0; i < dqk; i += 32) _mm512_storeu_si512(w.kb + c * dqk + i, _mm512_setzero_si512());
    attn_interleave_pairs(w.kb, dqk, nc_pad, dv, w.kv);
}

// One chunk of nc ≤ CT gathered bf16 rows through the tiles, for the heads [0, nh) in groups of 16 (the last
// one padded: its q rows in qt are zero, its extra lanes of the state exist and are unused): per group the
// transposed logits, an online-softmax update with one head per lane (ops/sparse_attention.h: M the running
// max, weights rounded to bf16 for P·V as math bf16 says, their sum unrounded), then P·V into acc. The
// caller has filled kb [attn_tile_rows(nc), dqk] and kv (the values' pairs) with exact values, zero past nc.
// dqk a multiple of 32, dv of 64. `next.prefetch(rows)` is called in three equal parts per group, for the
// caller to ask for the next chunk's rows while this one computes.
template <class NextRows>
void attn_tiles_chunk(int64_t nh, int64_t dqk, int64_t dv, int64_t nc, int64_t CT, float scale, AttnTileBuffers w,
                      AttnSoftmaxState st, NextRows& next) {
    const int64_t nc_pad = attn_tile_rows(nc), groups = (nh + 15) / 16, per_part = (CT + 3 * groups - 1) / (3 * groups);
    const VF vs = vf_set1(scale), ninf = vf_set1(-__builtin_inff()), one = vf_set1(1.0f);
    for (int64_t g = 0; g < groups; ++g) {
        next.prefetch(per_part);
        attn_tile_logits_t_keys(nc_pad, w.kb, dqk, w.qt + g * (dqk / 2) * 16, w.lt);
        next.prefetch(per_part);
        // The max, then the weights, of the group's 16 heads, one per lane (a row of lt per key).
        const VF m_old = vf_load(st.mx + g * 16);
        VF m = m_old;
        for (int64_t c = 0; c < nc; ++c) {
            const VF l = vf_mul(vf_load(w.lt + c * 16), vs);
            vf_store(w.lt + c * 16, l);
            m = vf_max(l, m);  // a NaN logit is never taken; its weight below is NaN
        }
        VF sum = vf_zero();
        for (int64_t c = 0; c < nc; ++c) {
            const VF e = vf_exp_nonpositive(vf_sub(vf_load(w.lt + c * 16), m));
            vf_store(w.lt + c * 16, vf_round_bf16(e));
            sum = vf_add(sum, e);
        }
        for (int64_t c = nc; c < nc_pad; ++c) vf_store(w.lt + c * 16, vf_zero());
        const __mmask16 first = _mm512_cmp_ps_mask(m_old.v, ninf.v, _CMP_EQ_OQ);  // no weight before: factor 0
        const VF factor = {_mm512_mask_blend_ps(first, vf_exp_nonpositive(vf_sub(m_old, m)).v, vf_zero().v)};
        vf_store(st.den + g * 16, vf_add(vf_mul(vf_load(st.den + g * 16), factor), sum));
        vf_store(st.mx + g * 16, m);
        const uint32_t rescale = _mm512_cmp_ps_mask(factor.v, one.v, _CMP_NEQ_UQ);  // acc ·= factor where ≠ 1 (NaN too)
        if (rescale) {
            alignas(64) float f[16];
            vf_store(f, factor);
            for (int h = 0; h < 16; ++h) {
                if (!(rescale >> h & 1)) continue;
                float* acc = st.acc + (g * 16 + h) * dv;
                for (int64_t i = 0; i < dv; i += kLanes) vf_store(acc + i, vf_mul(vf_load(acc + i), vf_set1(f[h])));
            }
        }
        next.prefetch(per_part);
        // The weights as the A operand, [16 heads][keys] bf16 (bf16 values already: the conversion is exact).
        for (int64_t c = 0; c < nc_pad; c += 16) attn_transpose_block(w.lt + c * 16, 16, w.pt + c, CT);
        for (int64_t h = 0; h < 16; ++h)
            for (int64_t c = 0; c < nc_pad; c += 32) {
                const __m512 x = _mm512_loadu_ps(w.pt + h * CT + c), y = _mm512_loadu_ps(w.pt + h * CT + c + 16);
                _mm512_storeu_si512(w.pb + h * CT + c, reinterpret_cast<__m512i>(_mm512_cvtne2ps_pbh(y, x)));
            }
        attn_tile_pv(w.pb, CT, nc_pad / 32, w.kv, dv, st.acc + g * 16 * dv);
    }
}

#endif  // __AVX512BF16__

}  // namespace
}  // namespace sieve::cpu::SIEVE_CPU_ISA_NS
