// Kernel bodies of the cpu indexer scores (ops/indexer_scores.h), written once over simd.h and compiled
// once per ISA by indexer_kernels_<isa>.cpp, which defines SIEVE_CPU_INDEXER_TABLE, SIEVE_CPU_ISA_NAME
// and SIEVE_CPU_ISA_NS before including this file. The kernels live in namespace sieve::cpu::<isa> (a
// profile names the ISA of every kernel) inside an anonymous namespace (simd.h, "ODR safety"): no std::,
// no inline helpers of other headers (cache addresses are computed here). fp32 accumulation in an order
// that differs from ref (the conformance tests derive tolerances).
#include "backends/cpu/indexer_kernels.h"
#include "backends/cpu/simd.h"

#if !defined(SIEVE_CPU_INDEXER_TABLE) || !defined(SIEVE_CPU_ISA_NAME) || !defined(SIEVE_CPU_ISA_NS)
#error "define SIEVE_CPU_INDEXER_TABLE, SIEVE_CPU_ISA_NAME and SIEVE_CPU_ISA_NS before including indexer_kernels_impl.inl"
#endif

namespace sieve::cpu::SIEVE_CPU_ISA_NS {
namespace {

// A work unit is one key tile of one request row, scored for every token of that row (the dispatch code
// builds the units), so each key is read and converted from its storage format once per step however
// many of its request's tokens the step scores.
//
// heads_in_lanes: q is transposed per token to qᵀ [dim, heads], so the keys need no transposition; a
// register block is kIdxKeys keys × up to kIdxVecs head vectors, one broadcast key value per dim (a pair of
// dims for vdpbf16ps), then w · ReLU per head and a horizontal sum per key, times the key's scale (the
// contract's common factor s_j). ReLU is vf_max(dot, 0), which gives 0 for a NaN dot as the contract says.
// e4m3 values are decoded exactly (NaN codes to NaN), as fp32 or as bf16 for vdpbf16ps, whose products of
// exact bf16 values are exact (only the fp32 sums round, in any order); the instruction reads bf16
// subnormals as 0 and flushes subnormal sums, which e4m3 products (≥ 2^-18 · |q|) are far above.

// Register block: kIdxKeys keys × kIdxVecs head vectors of accumulators, enough independent chains to
// cover the FMA latency of two pipes, plus the q vectors and one broadcast key value.
#if defined(__AVX512F__)
inline constexpr int kIdxKeys = 4, kIdxVecs = 4;  // 16 accumulators + 4 q of the 32 registers
#elif defined(__AVX2__)
inline constexpr int kIdxKeys = 6, kIdxVecs = 2;  // 12 accumulators + 2 q of the 16 registers
#else
inline constexpr int kIdxKeys = 4, kIdxVecs = 4;
#endif

inline constexpr int64_t kIdxPrefetch = 24;  // keys ahead whose rows are prefetched while converting

struct IdxScratch {
    int64_t* tag;  // the token whose q and weights the scratch holds (−1: none; reset by the dispatch code)
    char* qt;
    float* w;
    char* tile;
    const void** rows;
    float* scale;
    float* zero;
};

inline IdxScratch idx_scratch(const IndexerKernelArgs& a, void* ws) {
    char* b = static_cast<char*>(ws);
    return {reinterpret_cast<int64_t*>(b + a.ws_tag), b + a.ws_qt, reinterpret_cast<float*>(b + a.ws_w), b + a.ws_tile,
            reinterpret_cast<const void**>(b + a.ws_rows), reinterpret_cast<float*>(b + a.ws_scale),
            reinterpret_cast<float*>(b + a.ws_zero)};
}

// Key j of the request whose block-table row is `table`: its bytes in the block's data part, and its scale
// (fp8_row_scale: the row's fp32 scale, ops/cache_record.h; else 1).
inline const uint8_t* idx_key(const IndexerKernelArgs& a, const int32_t* table, int64_t j, float* scale) {
    const uint8_t* block = a.keys + static_cast<int64_t>(table[j / a.key_block_size]) * a.key_block_bytes;
    const int64_t off = j % a.key_block_size;
    if (a.key_format == kIdxKeyFp8RowScale)
        __builtin_memcpy(scale, block + a.key_scales_offset + off * 4, 4);
    else
        *scale = 1.0f;
    return block + off * a.key_data_bytes;
}

// The rows of key j: they are scattered over the cache, so the gather prefetches them ahead.
inline void idx_prefetch_key(const IndexerKernelArgs& a, const int32_t* table, int64_t j) {
    const uint8_t* block = a.keys + static_cast<int64_t>(table[j / a.key_block_size]) * a.key_block_bytes;
    const int64_t off = j % a.key_block_size;
    const uint8_t* row = block + off * a.key_data_bytes;
    for (int64_t o = 0; o < a.key_data_bytes; o += 64) prefetch_l2(row + o);
    if (a.key_format == kIdxKeyFp8RowScale) prefetch_l2(block + a.key_scales_offset + off * 4);
}

// Element i of token t's head h of q, exactly (e4m3 through `lut`).
inline float idx_q_value(const IndexerKernelArgs& a, int64_t t, int64_t h, int64_t i, const float* lut) {
    const int64_t o = t * a.q_token_stride + h * a.q_head_stride + i;
    if (a.q_format == kIdxQE4m3) return lut[static_cast<const uint8_t*>(a.q)[o]];
    return s_load(a.q, a.q_format == kIdxQBf16, o);
}

// The token's head weights with every factor folded in (ops/indexer_scores.h w[t, h]), zero past n_heads
// (padded heads then add w · ReLU(0) = 0).
inline void idx_token_weights(const IndexerKernelArgs& a, float* w, int64_t t, int64_t hp) {
    for (int64_t h = 0; h < hp; ++h) {
        float wh = 0.0f;
        if (h < a.n_heads) {
            wh = a.weights != nullptr ? a.weights[t * a.weights_token_stride + h] * a.weight_scale : a.weight_scale;
            if (a.q_format == kIdxQE4m3) wh = wh * a.q_scale[t * a.q_scale_token_stride + h];
        }
        w[h] = wh;
    }
}

// Writes the scores of keys [j, j + nk) of a token from the per-key head sums: key j + k goes to column
// j + k of the op's score row, or to column j + k − k0 of the tile row (a.scores_tile_rows).
inline void idx_store(const IndexerKernelArgs& a, const IdxScratch& S, int64_t k0, int64_t j, int nk, const float* sums,
                      float* out) {
    const int64_t col0 = a.scores_tile_rows ? k0 : 0;
    for (int k = 0; k < nk; ++k) out[j + k - col0] = sums[k] * S.scale[j + k - k0];
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

// Head sums of kIdxKeys keys over all head vectors (hp / kLanes of them, kIdxVecs at a time).
// Not inlined: the register block gets its own register allocation, whatever the caller holds live
// (inlined into the tile loops it measured up to 2× slower at some ISA levels).
__attribute__((noinline)) void idx_keys_f32(const float* const* rows, const float* qt, int64_t hp, int64_t d, const float* w,
                                            float* sums) {
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

// Rows and scales of keys [k0, k1) of the request (scratch index j − k0): f32 keys read in place, bf16
// and fp8 keys converted into the tile by `convert(bytes, r)`. Prefetches kIdxPrefetch keys ahead.
template <typename Convert>
inline void idx_prepare_keys(const IndexerKernelArgs& a, const IdxScratch& S, const int32_t* table, int64_t k0,
                             int64_t k1, const Convert& convert) {
    for (int64_t j = k0; j < k1; ++j) {
        const int64_t r = j - k0;
        if (j + kIdxPrefetch < k1) idx_prefetch_key(a, table, j + kIdxPrefetch);
        const uint8_t* bytes = idx_key(a, table, j, &S.scale[r]);
        if (a.key_format == kIdxKeyF32)
            S.rows[r] = bytes;
        else
            convert(bytes, r);
    }
}

// fp32 FMA path: every q format (widened exactly), every key format (converted exactly).
void scores_tile_f32(const IndexerKernelArgs& a, int64_t row, const int32_t* toks, int64_t nt, int64_t k0, int64_t k1,
                     void* ws) {
    const IdxScratch S = idx_scratch(a, ws);
    const int64_t d = a.head_dim, H = a.n_heads, hp = (H + kLanes - 1) / kLanes * kLanes;
    const int32_t* table = a.block_table + row * a.block_table_stride;
    float* tile = reinterpret_cast<float*>(S.tile);
    for (int64_t i = 0; i < a.dim_pad; ++i) S.zero[i] = 0.0f;
    idx_prepare_keys(a, S, table, k0, k1, [&](const uint8_t* bytes, int64_t r) {
        float* dst = tile + r * a.dim_pad;
        S.rows[r] = dst;
        int64_t i = 0;
        if (a.key_format == kIdxKeyBf16) {
            for (; i + kLanes <= d; i += kLanes) vf_store(dst + i, vf_load_row(bytes, true, i));
            for (; i < d; ++i) dst[i] = s_load(bytes, true, i);
        } else {
            for (; i + kLanes <= d; i += kLanes) vf_store(dst + i, vf_e4m3_values(bytes + i));
            for (; i < d; ++i) dst[i] = s_e4m3_value(bytes[i]);
        }
    });
    float lut[256];
    if (a.q_format == kIdxQE4m3)
        for (int b = 0; b < 256; ++b) lut[b] = s_e4m3_value(static_cast<uint8_t>(b));
    const float* const* rows = reinterpret_cast<const float* const*>(S.rows);
    float* qt = reinterpret_cast<float*>(S.qt);
    for (int64_t ti = 0; ti < nt; ++ti) {
        const int64_t t = toks[ti];
        const int64_t end = s_min(k1, a.n_keys[t]);
        if (end <= k0) continue;
        if (*S.tag != t) {  // qᵀ and weights of the token (kept while the same token is scored, e.g. in decode)
            for (int64_t h = 0; h < hp; ++h)
                for (int64_t i = 0; i < d; ++i) qt[i * hp + h] = h < H ? idx_q_value(a, t, h, i, lut) : 0.0f;
            idx_token_weights(a, S.w, t, hp);
            *S.tag = t;
        }
        float* out = a.scores + (a.scores_tile_rows ? ti : t) * a.scores_row_stride;
        for (int64_t j = k0; j < end; j += kIdxKeys) {
            const int nk = static_cast<int>(s_min(kIdxKeys, end - j));
            const float* r[kIdxKeys];
            for (int k = 0; k < kIdxKeys; ++k) r[k] = k < nk ? rows[j + k - k0] : S.zero;
            float sums[kIdxKeys];
            idx_keys_f32(r, qt, hp, d, S.w, sums);
            idx_store(a, S, k0, j, nk, sums, out);
        }
    }
}

#if defined(__AVX512BF16__)
// vdpbf16ps path (avx512_bf16 table): bf16 or e4m3 q and fp8_row_scale keys, all exact in bf16.

// A row of e4m3 bytes → the exact values as bf16 (the high half of the fp32 value: e4m3 has 4 significant
// bits), in pairs (even dim in the low half); an odd n gets a zero partner. NaN codes become bf16 NaNs.
inline void idx_decode_bf16(const uint8_t* src, uint16_t* dst, int64_t n) {
    // 32 codes per step in 16-bit lanes: sign-extended byte << 4, masked, is the bf16 of value · 2^-120 (sign in
    // bit 15, exponent and mantissa fields in place); + 120 in the exponent field restores the value of a normal
    // code; the e = 0 codes (zero, subnormals m · 2^-9) come from a table, then the sign is put back. The NaN
    // codes 0x7F / 0xFF come out finite and are patched afterwards (rare: a row holds one only when broken).
    const __m512i mask = _mm512_set1_epi16(static_cast<int16_t>(0x87f0)), bias = _mm512_set1_epi16(120 << 7);
    const __m512i exp_bits = _mm512_set1_epi16(0x78), sign = _mm512_set1_epi16(static_cast<int16_t>(0x8000));
    const __m512i sub = _mm512_setr_epi32(0x3b000000, 0x3bc03b80, 0x3c203c00, 0x3c603c40, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0);
    const __m512i low7 = _mm512_set1_epi8(0x7f);
    bool nan = false;
    int64_t i = 0;
    for (; i + 64 <= n; i += 64) {
        const __m512i b = _mm512_loadu_si512(src + i);
        nan |= _mm512_cmpeq_epi8_mask(_mm512_and_si512(b, low7), low7) != 0;
    }
    for (; i < n; ++i) nan |= (src[i] & 0x7f) == 0x7f;
    for (i = 0; i + 32 <= n; i += 32) {
        const __m512i sx = _mm512_cvtepi8_epi16(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(src + i)));
        __m512i v = _mm512_add_epi16(_mm512_and_si512(_mm512_slli_epi16(sx, 4), mask), bias);
        v = _mm512_mask_permutexvar_epi16(v, _mm512_testn_epi16_mask(sx, exp_bits), sx, sub);  // e = 0: index m
        v = _mm512_ternarylogic_epi32(v, sx, sign, 0xf8);                                       // v | (sx & sign)
        _mm512_storeu_si512(dst + i, v);
    }
    for (; i < n; ++i) dst[i] = static_cast<uint16_t>(bits_of(s_e4m3_value(src[i])) >> 16);
    if (nan)
        for (i = 0; i < n; ++i)
            if ((src[i] & 0x7f) == 0x7f) dst[i] = static_cast<uint16_t>(bits_of(s_e4m3_value(src[i])) >> 16);
    if (n % 2) dst[n] = 0;
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

__attribute__((noinline)) void idx_keys_bf16(const uint32_t* const* rows, const uint32_t* qt, int64_t hp, int64_t np,
                                             const float* w, float* sums) {
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
    for (int k = 0; k < kIdxKeys; ++k) sums[k] = _mm512_reduce_add_ps(sacc[k]);
}

#if defined(__AMX_BF16__)
// The AMX path (amx_bf16 table): the same exact bf16 products as tile products, 16 keys at a time. The keys'
// bf16 pair rows are the A operand ([16 keys][32 dims], row stride rp pairs) and qᵀ's pairs the B operand
// ([16 pair rows][16 heads], row stride hp), so C holds the dots transposed, [16 keys][16 heads], one tile per
// group of 16 heads (four at a time); then w · ReLU per head and the sum over the heads per key. The tile
// unit reads bf16 subnormals as zero (as vdpbf16ps does, see above). Rows past the tile's last key hold
// stale values whose sums are never stored (a C row depends on its A row only).
inline constexpr int64_t kIdxTileMaxHeads = 128;  // heads_pad ≤ this for the tile path (its C staging buffer)

// Head sums of the 16 keys whose pair rows start at `keys` (row stride rp), for np pairs (a multiple of 16)
// and hp heads (a multiple of 16, ≤ kIdxTileMaxHeads).
inline void idx_keys_tiles(const uint32_t* keys, int64_t rp, const uint32_t* qt, int64_t hp, int64_t np, const float* w,
                           float* sums) {
    alignas(64) float dots[16 * kIdxTileMaxHeads];  // [16 keys][hp]
    for (int64_t v0 = 0; v0 < hp; v0 += 64) {
        const int64_t nv = hp - v0 < 64 ? (hp - v0) / 16 : 4;
        _tile_zero(0);
        _tile_zero(1);
        _tile_zero(2);
        _tile_zero(3);
        for (int64_t i = 0; i < np; i += 16) {
            _tile_loadd(4, keys + i, rp * 4);
            const uint32_t* q = qt + i * hp + v0;
            _tile_loadd(5, q, hp * 4);
            _tile_dpbf16ps(0, 4, 5);
            if (nv > 1) {
                _tile_loadd(6, q + 16, hp * 4);
                _tile_dpbf16ps(1, 4, 6);
            }
            if (nv > 2) {
                _tile_loadd(7, q + 32, hp * 4);
                _tile_dpbf16ps(2, 4, 7);
            }
            if (nv > 3) {
                _tile_loadd(5, q + 48, hp * 4);
                _tile_dpbf16ps(3, 4, 5);
            }
        }
        _tile_stored(0, dots + v0, hp * 4);
        if (nv > 1) _tile_stored(1, dots + v0 + 16, hp * 4);
        if (nv > 2) _tile_stored(2, dots + v0 + 32, hp * 4);
        if (nv > 3) _tile_stored(3, dots + v0 + 48, hp * 4);
    }
    const __m512 zero = _mm512_setzero_ps();
    for (int k = 0; k < 16; ++k) {
        __m512 s = zero;
        for (int64_t v = 0; v < hp; v += 16)
            s = _mm512_fmadd_ps(_mm512_loadu_ps(w + v), _mm512_max_ps(_mm512_loadu_ps(dots + k * hp + v), zero), s);
        sums[k] = _mm512_reduce_add_ps(s);
    }
}
#endif

void scores_tile_bf16(const IndexerKernelArgs& a, int64_t row, const int32_t* toks, int64_t nt, int64_t k0, int64_t k1,
                      void* ws) {
    const IdxScratch S = idx_scratch(a, ws);
    const int64_t d = a.head_dim, H = a.n_heads, hp = (H + 15) / 16 * 16, np = (d + 1) / 2, rp = a.dim_pad / 2;
    const int32_t* table = a.block_table + row * a.block_table_stride;
    uint32_t* tile = reinterpret_cast<uint32_t*>(S.tile);
    for (int64_t i = 0; i < a.dim_pad; ++i) S.zero[i] = 0.0f;
    idx_prepare_keys(a, S, table, k0, k1, [&](const uint8_t* bytes, int64_t r) {
        S.rows[r] = tile + r * rp;
        idx_decode_bf16(bytes, reinterpret_cast<uint16_t*>(tile + r * rp), d);
    });
    uint16_t lut16[256];
    if (a.q_format == kIdxQE4m3)
        for (int b = 0; b < 256; ++b) lut16[b] = static_cast<uint16_t>(bits_of(s_e4m3_value(static_cast<uint8_t>(b))) >> 16);
    const uint32_t* const* rows = reinterpret_cast<const uint32_t* const*>(S.rows);
    const uint32_t* zero = reinterpret_cast<const uint32_t*>(S.zero);
    uint32_t* qt = reinterpret_cast<uint32_t*>(S.qt);
#if defined(__AMX_BF16__)
    const bool tiles = np % 16 == 0 && hp <= kIdxTileMaxHeads;  // whole 32-dim steps; the staging buffer
    if (tiles) amx_tiles_begin();
#endif
    for (int64_t ti = 0; ti < nt; ++ti) {
        const int64_t t = toks[ti];
        const int64_t end = s_min(k1, a.n_keys[t]);
        if (end <= k0) continue;
        if (*S.tag != t) {  // qᵀ pairs (q[h, 2i], q[h, 2i+1]), zero past head_dim / n_heads
            for (int64_t h = 0; h < hp; ++h) {
                for (int64_t i = 0; i < np; ++i) {
                    uint32_t lo = 0, hi = 0;
                    if (h < H) {
                        const int64_t o = t * a.q_token_stride + h * a.q_head_stride + 2 * i;
                        if (a.q_format == kIdxQE4m3) {
                            const uint8_t* q8 = static_cast<const uint8_t*>(a.q) + o;
                            lo = lut16[q8[0]];
                            hi = 2 * i + 1 < d ? lut16[q8[1]] : 0u;
                        } else {
                            const uint16_t* q16 = static_cast<const uint16_t*>(a.q) + o;
                            lo = q16[0];
                            hi = 2 * i + 1 < d ? q16[1] : 0u;
                        }
                    }
                    qt[i * hp + h] = lo | hi << 16;
                }
            }
            idx_token_weights(a, S.w, t, hp);
            *S.tag = t;
        }
        float* out = a.scores + (a.scores_tile_rows ? ti : t) * a.scores_row_stride;
        int64_t j = k0;
#if defined(__AMX_BF16__)
        if (tiles)
            for (; j + 16 <= end; j += 16) {
                float sums[16];
                idx_keys_tiles(tile + (j - k0) * rp, rp, qt, hp, np, S.w, sums);
                idx_store(a, S, k0, j, 16, sums, out);
            }
#endif
        for (; j < end; j += kIdxKeys) {
            const int nk = static_cast<int>(s_min(kIdxKeys, end - j));
            const uint32_t* r[kIdxKeys];
            for (int k = 0; k < kIdxKeys; ++k) r[k] = k < nk ? rows[j + k - k0] : zero;
            float sums[kIdxKeys];
            idx_keys_bf16(r, qt, hp, np, S.w, sums);
            idx_store(a, S, k0, j, nk, sums, out);
        }
    }
#if defined(__AMX_BF16__)
    if (tiles) amx_tiles_end();
#endif
}
#endif

// dims_in_lanes: the token's q widened once into [n_heads, head_dim] f32, then keys in pairs against four
// heads at a time (idx_dot4x2: each key vector loaded once for the four heads), read in place from the cache
// (f32 / bf16 rows; the tile's keys stay in L2 across the unit's tokens). With weights the head sum is
// Σ_h w_h·ReLU(d_h); without, Σ_h ReLU(d_h) times weight_scale (the contract's common factor).
inline constexpr int64_t kIdxDimsPrefetch = 32;  // keys ahead: the key loads' latency bounds this path

// Σ a_i·b_i over n elements (a, b f32 or bf16 by AB, BB), four vector accumulators.
template <bool AB, bool BB>
float idx_dot(const void* a, const void* b, int64_t n) {
    VF s0 = vf_zero(), s1 = vf_zero(), s2 = vf_zero(), s3 = vf_zero();
    int64_t i = 0;
    for (; i + 4 * kLanes <= n; i += 4 * kLanes) {
        s0 = vf_fma(vf_load_row(a, AB, i), vf_load_row(b, BB, i), s0);
        s1 = vf_fma(vf_load_row(a, AB, i + kLanes), vf_load_row(b, BB, i + kLanes), s1);
        s2 = vf_fma(vf_load_row(a, AB, i + 2 * kLanes), vf_load_row(b, BB, i + 2 * kLanes), s2);
        s3 = vf_fma(vf_load_row(a, AB, i + 3 * kLanes), vf_load_row(b, BB, i + 3 * kLanes), s3);
    }
    for (; i + kLanes <= n; i += kLanes) s0 = vf_fma(vf_load_row(a, AB, i), vf_load_row(b, BB, i), s0);
    float sum = vf_sum(vf_add(vf_add(s0, s1), vf_add(s2, s3)));
    for (; i < n; ++i) sum += s_load(a, AB, i) * s_load(b, BB, i);
    return sum;
}

// The dots of four f32 rows a + m·a_stride with two rows b0, b1: out[m] = a_m·b0, out[4 + m] = a_m·b1.
template <bool BB>
void idx_dot4x2(const float* a, int64_t a_stride, const void* b0, const void* b1, int64_t n, float* out) {
    VF s[8];
    for (int m = 0; m < 8; ++m) s[m] = vf_zero();
    int64_t i = 0;
    for (; i + kLanes <= n; i += kLanes) {
        const VF v0 = vf_load_row(b0, BB, i), v1 = vf_load_row(b1, BB, i);
        for (int m = 0; m < 4; ++m) {
            const VF q = vf_load(a + m * a_stride + i);
            s[m] = vf_fma(q, v0, s[m]);
            s[4 + m] = vf_fma(q, v1, s[4 + m]);
        }
    }
    for (int m = 0; m < 8; ++m) out[m] = vf_sum(s[m]);
    for (; i < n; ++i) {
        const float v0 = s_load(b0, BB, i), v1 = s_load(b1, BB, i);
        for (int m = 0; m < 4; ++m) {
            out[m] += a[m * a_stride + i] * v0;
            out[4 + m] += a[m * a_stride + i] * v1;
        }
    }
}

// The head sum's term of head h: w_h · ReLU(d) with weights, ReLU(d) without.
inline float idx_term(const IndexerKernelArgs& a, const float* w, int64_t h, float d) {
    const float r = d > 0.0f ? d : 0.0f;
    return a.weights != nullptr ? w[h] * r : r;
}

template <bool QB, bool KB>
void scores_tile_dims_t(const IndexerKernelArgs& a, const IdxScratch& S, const int32_t* table, int64_t t, int64_t c0,
                        int64_t c1, float* out) {
    const int64_t H = a.n_heads, D = a.head_dim, key_bytes = D * (KB ? 2 : 4);
    const float post = a.weights != nullptr ? 1.0f : a.weight_scale;
    const float* qf = reinterpret_cast<const float*>(S.qt);
    const char* qt = static_cast<const char*>(a.q) + t * a.q_token_stride * (QB ? 2 : 4);
    float unused;
    int64_t g = c0;
    if (H % 4 == 0) {
        for (; g + 2 <= c1; g += 2) {
            const uint8_t* k0 = idx_key(a, table, g, &unused);
            const uint8_t* k1 = idx_key(a, table, g + 1, &unused);
            if (g + kIdxDimsPrefetch + 2 <= c1)
                for (int64_t n = 0; n < 2; ++n) {
                    const uint8_t* ahead = idx_key(a, table, g + kIdxDimsPrefetch + n, &unused);
                    for (int64_t b = 0; b < key_bytes; b += 64) prefetch_l1(ahead + b);
                }
            float total0 = 0.0f, total1 = 0.0f;
            for (int64_t h = 0; h < H; h += 4) {
                float d[8];
                idx_dot4x2<KB>(qf + h * D, D, k0, k1, D, d);
                for (int m = 0; m < 4; ++m) {
                    total0 += idx_term(a, S.w, h + m, d[m]);
                    total1 += idx_term(a, S.w, h + m, d[4 + m]);
                }
            }
            out[g - c0] = post * total0;
            out[g + 1 - c0] = post * total1;
        }
    }
    for (; g < c1; ++g) {
        const uint8_t* k = idx_key(a, table, g, &unused);
        float total = 0.0f;
        for (int64_t h = 0; h < H; ++h)
            total += idx_term(a, S.w, h, idx_dot<QB, KB>(qt + h * a.q_head_stride * (QB ? 2 : 4), k, D));
        out[g - c0] = post * total;
    }
}

#if defined(__AVX512BF16__)
// bf16 q and keys at avx512_bf16: vdpbf16ps (the product of two bf16 is exact in fp32, only the sums
// round). Two keys at a time against four heads: 8 accumulators over the key's 32-value chunks, then one
// shuffle tree for the 8 dots, the ReLU, the head weights and the sum over the four heads. The fp32 path
// is bound by its FMAs and horizontal sums; this one reads 256 B per key for 16 dot instructions.
inline constexpr int64_t kIdxDpChunk = 32;  // bf16 values per vector

// Σ_h w_h·ReLU(Σ lanes a[h]) and the same for b, h < 4 (w4 = nullptr: every w_h = 1).
inline void idx_reduce_2x4(const __m512 a[4], const __m512 b[4], const float* w4, float* s0, float* s1) {
    const __m512 v[8] = {a[0], a[1], a[2], a[3], b[0], b[1], b[2], b[3]};
    __m512 x[4], y[2];
    for (int i = 0; i < 4; ++i)  // blocks [v2i 0+2, v2i 1+3, v2i+1 0+2, v2i+1 1+3]
        x[i] = _mm512_add_ps(_mm512_shuffle_f32x4(v[2 * i], v[2 * i + 1], 0x44),
                             _mm512_shuffle_f32x4(v[2 * i], v[2 * i + 1], 0xEE));
    for (int j = 0; j < 2; ++j)  // block m of y_j: 4 lanes summing to v[4j + m]
        y[j] = _mm512_add_ps(_mm512_shuffle_f32x4(x[2 * j], x[2 * j + 1], 0x88),
                             _mm512_shuffle_f32x4(x[2 * j], x[2 * j + 1], 0xDD));
    // per block m: [y0 l0+l1, y0 l2+l3, y1 l0+l1, y1 l2+l3], then pairs: lane 0 = dot of head m with key a,
    // lane 2 = with key b
    __m512 c = _mm512_add_ps(_mm512_shuffle_ps(y[0], y[1], 0x88), _mm512_shuffle_ps(y[0], y[1], 0xDD));
    c = _mm512_add_ps(c, _mm512_permute_ps(c, 0xB1));
    c = _mm512_max_ps(c, _mm512_setzero_ps());  // ReLU per head
    if (w4 != nullptr) {                        // block m times w_m
        const __m512i spread = _mm512_set_epi32(3, 3, 3, 3, 2, 2, 2, 2, 1, 1, 1, 1, 0, 0, 0, 0);
        c = _mm512_mul_ps(c, _mm512_permutexvar_ps(spread, _mm512_castps128_ps512(_mm_loadu_ps(w4))));
    }
    c = _mm512_add_ps(c, _mm512_shuffle_f32x4(c, c, 0x4E));  // the sum over the four heads (blocks)
    c = _mm512_add_ps(c, _mm512_shuffle_f32x4(c, c, 0xB1));
    const __m128 r = _mm512_castps512_ps128(c);
    *s0 = _mm_cvtss_f32(r);
    *s1 = _mm_cvtss_f32(_mm_movehl_ps(r, r));
}

// Whether scores_tile_dims_dpbf16 takes the op: bf16 q and keys, heads in fours, whole 32-value chunks.
inline bool idx_dims_dpbf16_fits(const IndexerKernelArgs& a) {
    return a.q_format == kIdxQBf16 && a.key_format == kIdxKeyBf16 && a.n_heads % 4 == 0 && a.head_dim % kIdxDpChunk == 0;
}

void scores_tile_dims_dpbf16(const IndexerKernelArgs& a, const IdxScratch& S, const int32_t* table, int64_t t, int64_t c0,
                             int64_t c1, float* out) {
    const int64_t H = a.n_heads, D = a.head_dim, chunks = D / kIdxDpChunk, key_bytes = D * 2;
    const float post = a.weights != nullptr ? 1.0f : a.weight_scale;
    const uint16_t* qt = static_cast<const uint16_t*>(a.q) + t * a.q_token_stride;
    float unused;
    auto prefetch = [&](int64_t g) {
        if (g >= c1) return;
        const uint8_t* ahead = idx_key(a, table, g, &unused);
        for (int64_t b = 0; b < key_bytes; b += 64) prefetch_l2(ahead + b);
    };
    for (int64_t g = c0; g < c0 + kIdxDimsPrefetch; ++g) prefetch(g);  // the first rows (a tile starts cold)
    for (int64_t g = c0; g < c1; g += 2) {
        const bool pair = g + 1 < c1;
        const uint8_t* k0 = idx_key(a, table, g, &unused);
        const uint8_t* k1 = pair ? idx_key(a, table, g + 1, &unused) : k0;
        prefetch(g + kIdxDimsPrefetch);
        prefetch(g + kIdxDimsPrefetch + 1);
        float total0 = 0.0f, total1 = 0.0f;
        for (int64_t h0 = 0; h0 < H; h0 += 4) {
            __m512 va[4], vb[4];
            for (int h = 0; h < 4; ++h) va[h] = vb[h] = _mm512_setzero_ps();
            for (int64_t c = 0; c < chunks; ++c) {
                const __m512i ka = _mm512_loadu_si512(k0 + c * 64), kb = _mm512_loadu_si512(k1 + c * 64);
                for (int h = 0; h < 4; ++h) {
                    const __m512i qv = _mm512_loadu_si512(qt + (h0 + h) * a.q_head_stride + c * kIdxDpChunk);
                    va[h] = _mm512_dpbf16_ps(va[h], (__m512bh)qv, (__m512bh)ka);
                    vb[h] = _mm512_dpbf16_ps(vb[h], (__m512bh)qv, (__m512bh)kb);
                }
            }
            float s0, s1;
            idx_reduce_2x4(va, vb, a.weights != nullptr ? S.w + h0 : nullptr, &s0, &s1);
            total0 += s0;
            total1 += s1;
        }
        out[g - c0] = post * total0;
        if (pair) out[g + 1 - c0] = post * total1;
    }
}

// keys_in_lanes, the dims_in_lanes layout's path for several tokens of a row (prefill chunks, speculative
// steps) with bf16 q and keys: the tile's keys are transposed once into dim pairs of 16 keys, kt
// [key blocks][pairs][16], and each (token, head) of up to 16 / n_heads tokens takes one accumulator
// whose q pair is broadcast per step, so one vdpbf16ps forms 16 keys' dots and a token's score is
// Σ_h w_h·ReLU(dot_h) lane by lane, with no horizontal sums. The transposition (scalar: a few pair moves
// per key) is shared by every token of the unit.
inline constexpr int kIdxLaneAccs = 16;  // accumulators: the (token, head) pairs of a token group

// Whether a unit of nt tokens takes keys_in_lanes: bf16 q and keys, heads ≤ the accumulators, and tokens
// enough to fill them (fewer, a decode token alone, stay on the per-token dims path, which transposes nothing).
inline bool idx_keys_in_lanes_fits(const IndexerKernelArgs& a, int64_t nt) {
    return a.q_format == kIdxQBf16 && a.key_format == kIdxKeyBf16 && a.n_heads >= 1 && a.n_heads <= kIdxLaneAccs &&
           nt * a.n_heads >= kIdxLaneAccs;
}

// The (k[2i], k[2i+1]) pair of a bf16 row of n values as a 32-bit word (even dim low), zero past n.
inline uint32_t idx_bf16_pair(const uint16_t* row, int64_t n, int64_t i) {
    const uint32_t lo = row[2 * i], hi = 2 * i + 1 < n ? row[2 * i + 1] : 0u;
    return lo | hi << 16;
}

// acc[a] = Σ_i qg[i·NA + a] · kb[i] (bf16 pairs) for the 16 keys of one block kb [np][16].
template <int NA>
inline void idx_lanes_block(const uint32_t* kb, int64_t np, const uint32_t* qg, __m512* acc) {
    for (int n = 0; n < NA; ++n) acc[n] = _mm512_setzero_ps();
    for (int64_t i = 0; i < np; ++i) {
        const __m512bh kv = (__m512bh)_mm512_loadu_si512(kb + i * 16);
        for (int n = 0; n < NA; ++n)
            acc[n] = _mm512_dpbf16_ps(acc[n], (__m512bh)_mm512_set1_epi32(static_cast<int32_t>(qg[i * NA + n])), kv);
    }
}

// One token group of keys_in_lanes over the key blocks [0, n_blocks): group token g (of the unit's list
// position pos[g]) has its heads at accumulators g·H …, its weights in wg, its scores up to column end[g].
template <int NA>
void idx_lanes_group(const IndexerKernelArgs& a, const uint32_t* kt, int64_t np, int64_t n_blocks, const uint32_t* qg,
                     const float* wg, int ng, const int64_t* pos, const int64_t* end, int64_t k0, const int32_t* toks) {
    const int64_t H = a.n_heads, col0 = a.scores_tile_rows ? k0 : 0;
    const __m512 zero = _mm512_setzero_ps();
    for (int64_t b = 0; b < n_blocks; ++b) {
        const int64_t j = k0 + 16 * b;
        __m512 acc[NA];
        idx_lanes_block<NA>(kt + b * np * 16, np, qg, acc);
        for (int g = 0; g < ng; ++g) {
            if (end[g] <= j) continue;
            __m512 s = zero;
            for (int64_t h = 0; h < H; ++h)
                s = _mm512_fmadd_ps(_mm512_set1_ps(wg[g * H + h]), _mm512_max_ps(acc[g * H + h], zero), s);
            const int64_t n = end[g] - j < 16 ? end[g] - j : 16;
            float* out = a.scores + (a.scores_tile_rows ? pos[g] : toks[pos[g]]) * a.scores_row_stride + j - col0;
            _mm512_mask_storeu_ps(out, static_cast<__mmask16>((1u << n) - 1u), s);
        }
    }
}

void scores_tile_keys_dpbf16(const IndexerKernelArgs& a, const IdxScratch& S, const int32_t* table, const int32_t* toks,
                             int64_t nt, int64_t k0, int64_t k1) {
    const int64_t H = a.n_heads, D = a.head_dim, np = (D + 1) / 2;
    int64_t kmax = k0;  // the tile's keys that some token scores
    for (int64_t ti = 0; ti < nt; ++ti) kmax = s_max(kmax, s_min(k1, a.n_keys[toks[ti]]));
    if (kmax <= k0) return;
    const int64_t n_blocks = (kmax - k0 + 15) / 16;
    uint32_t* kt = reinterpret_cast<uint32_t*>(S.tile);  // [n_blocks][np][16]
    float unused;
    for (int64_t c = 0; c < n_blocks * 16; ++c) {
        uint32_t* dst = kt + (c / 16) * np * 16 + c % 16;
        if (k0 + c < kmax) {
            const uint16_t* row = reinterpret_cast<const uint16_t*>(idx_key(a, table, k0 + c, &unused));
            for (int64_t i = 0; i < np; ++i) dst[i * 16] = idx_bf16_pair(row, D, i);
        } else {
            for (int64_t i = 0; i < np; ++i) dst[i * 16] = 0u;
        }
    }
    const int T = static_cast<int>(kIdxLaneAccs / H), NA = static_cast<int>(T * H);
    uint32_t* qg = reinterpret_cast<uint32_t*>(S.qt);  // [np][NA] the group's q pairs
    float* wg = S.w;                                   // [NA] their head weights
    int64_t pos[kIdxLaneAccs], end[kIdxLaneAccs];
    for (int64_t ti = 0; ti < nt;) {
        int ng = 0;  // the group: the next T tokens that score a key of the tile
        for (; ti < nt && ng < T; ++ti) {
            const int64_t t = toks[ti], e = s_min(k1, a.n_keys[t]);
            if (e <= k0) continue;
            pos[ng] = ti, end[ng] = e;
            const uint16_t* q = static_cast<const uint16_t*>(a.q) + t * a.q_token_stride;
            for (int64_t h = 0; h < H; ++h)
                for (int64_t i = 0; i < np; ++i) qg[i * NA + ng * H + h] = idx_bf16_pair(q + h * a.q_head_stride, D, i);
            idx_token_weights(a, wg + ng * H, t, H);
            ++ng;
        }
        if (ng == 0) break;
        for (int64_t n = ng * H; n < NA; ++n)  // the accumulators of absent tokens: zero q, never stored
            for (int64_t i = 0; i < np; ++i) qg[i * NA + n] = 0u;
        switch (NA) {  // T·H: 9 … 16 for 1 ≤ H ≤ 16
            case 9: idx_lanes_group<9>(a, kt, np, n_blocks, qg, wg, ng, pos, end, k0, toks); break;
            case 10: idx_lanes_group<10>(a, kt, np, n_blocks, qg, wg, ng, pos, end, k0, toks); break;
            case 11: idx_lanes_group<11>(a, kt, np, n_blocks, qg, wg, ng, pos, end, k0, toks); break;
            case 12: idx_lanes_group<12>(a, kt, np, n_blocks, qg, wg, ng, pos, end, k0, toks); break;
            case 13: idx_lanes_group<13>(a, kt, np, n_blocks, qg, wg, ng, pos, end, k0, toks); break;
            case 14: idx_lanes_group<14>(a, kt, np, n_blocks, qg, wg, ng, pos, end, k0, toks); break;
            case 15: idx_lanes_group<15>(a, kt, np, n_blocks, qg, wg, ng, pos, end, k0, toks); break;
            default: idx_lanes_group<16>(a, kt, np, n_blocks, qg, wg, ng, pos, end, k0, toks); break;
        }
    }
    *S.tag = -1;  // qt and w no longer hold a token's q and weights
}
#endif

void scores_tile_dims(const IndexerKernelArgs& a, int64_t row, const int32_t* toks, int64_t nt, int64_t k0, int64_t k1,
                      void* ws) {
    const IdxScratch S = idx_scratch(a, ws);
    const int32_t* table = a.block_table + row * a.block_table_stride;
#if defined(__AVX512BF16__)
    if (idx_keys_in_lanes_fits(a, nt)) return scores_tile_keys_dpbf16(a, S, table, toks, nt, k0, k1);
#endif
    const bool qb = a.q_format == kIdxQBf16, kb = a.key_format == kIdxKeyBf16;
    float* qf = reinterpret_cast<float*>(S.qt);
    for (int64_t ti = 0; ti < nt; ++ti) {
        const int64_t t = toks[ti];
        const int64_t end = s_min(k1, a.n_keys[t]);
        if (end <= k0) continue;
        if (*S.tag != t) {
            for (int64_t h = 0; h < a.n_heads; ++h)
                for (int64_t i = 0; i < a.head_dim; ++i) qf[h * a.head_dim + i] = idx_q_value(a, t, h, i, nullptr);
            idx_token_weights(a, S.w, t, a.n_heads);
            *S.tag = t;
        }
        float* out = a.scores + (a.scores_tile_rows ? ti : t) * a.scores_row_stride + (a.scores_tile_rows ? 0 : k0);
#if defined(__AVX512BF16__)
        if (idx_dims_dpbf16_fits(a)) {
            scores_tile_dims_dpbf16(a, S, table, t, k0, end, out);
            continue;
        }
#endif
        if (qb && kb)
            scores_tile_dims_t<true, true>(a, S, table, t, k0, end, out);
        else if (qb)
            scores_tile_dims_t<true, false>(a, S, table, t, k0, end, out);
        else if (kb)
            scores_tile_dims_t<false, true>(a, S, table, t, k0, end, out);
        else
            scores_tile_dims_t<false, false>(a, S, table, t, k0, end, out);
    }
}

void scores_tile(const IndexerKernelArgs& a, int64_t row, const int32_t* toks, int64_t nt, int64_t k0, int64_t k1, void* ws) {
    if (a.layout == kIdxDimsInLanes) return scores_tile_dims(a, row, toks, nt, k0, k1, ws);
#if defined(__AVX512BF16__)
    if (a.bf16_dot) return scores_tile_bf16(a, row, toks, nt, k0, k1, ws);
#endif
    scores_tile_f32(a, row, toks, nt, k0, k1, ws);
}

}  // namespace
}  // namespace sieve::cpu::SIEVE_CPU_ISA_NS

namespace sieve::cpu {

extern const CpuIndexerKernels SIEVE_CPU_INDEXER_TABLE = {
    .isa_name = SIEVE_CPU_ISA_NAME,
    .scores_tile = SIEVE_CPU_ISA_NS::scores_tile,
#if defined(__AVX512BF16__)
    .bf16_dot = true,
#else
    .bf16_dot = false,
#endif
};

}  // namespace sieve::cpu
