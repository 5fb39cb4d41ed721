// Kernel bodies of DeepSeek-V4's hot ops (dsv4_kernels.h), written once over simd.h and compiled
// once per ISA by dsv4_kernels_<isa>.cpp, which defines SIEVE_CPU_DSV4_TABLE before including this
// file. Everything is in an anonymous namespace (simd.h, "ODR safety"). Semantics: ops/sparse_attention.h
// (its MQA path), ops/indexer_scores.h, ops/cache_record.h (record decoding bit-identical to ref).
#include "backends/cpu/dsv4_kernels.h"
#include "backends/cpu/simd.h"
// The chunked attention tiles (logits, P·V, exp, chunk transposition), shared with DSA's sparse MLA.
#include "backends/cpu/attention_kernels_impl.inl"

#ifndef SIEVE_CPU_DSV4_TABLE
#error "define SIEVE_CPU_DSV4_TABLE before including dsv4_kernels_impl.inl"
#endif

#ifndef SIEVE_CPU_ISA_NS
#error "define SIEVE_CPU_ISA_NS (the ISA namespace of the kernels: scalar, avx2, ...) first"
#endif

// The kernels live in namespace sieve::cpu::<isa>, so that a profile names the ISA of every kernel,
// and inside an anonymous namespace (simd.h, "ODR safety").
namespace sieve::cpu::SIEVE_CPU_ISA_NS {
namespace {

// ---- record decoding (ops/kv_load.h semantics; core/dtype.h values) ----- ----------------------

// 2^(e − 127); 0xFF is NaN, 0 the fp32 subnormal 2^-127 (core ue8m0_to_f32).
inline float d4_ue8m0_value(uint8_t e) {
    if (e == 0xff) return float_of(0x7fc00000u);
    if (e == 0) return float_of(0x00400000u);
    return float_of(static_cast<uint32_t>(e) << 23);
}
// dst[i] = e4m3(src[i]) · s for i < n: the exact value (simd.h s_e4m3_value / vf_e4m3_values), then one
// rounding by the scale (ref's `fp8_e4m3_to_f32(b) * s`).
inline void d4_decode_e4m3(const uint8_t* src, float s, float* dst, int64_t n) {
    const VF vs = vf_set1(s);
    int64_t i = 0;
    for (; i + kLanes <= n; i += kLanes) vf_store(dst + i, vf_mul(vf_e4m3_values(src + i), vs));
    for (; i < n; ++i) dst[i] = s_e4m3_value(src[i]) * s;
}

// The fp32 row of `slot`: a pointer into the cache for f32 rows, else decoded into dst [dim].
inline const float* d4_record_row(const RecordCache& c, int32_t slot, float* dst) {
    const uint8_t* block = c.base + (slot / c.block_size) * c.block_bytes;
    const int64_t j = slot % c.block_size;
    const uint8_t* data = block + j * c.data_bytes;
    if (c.format == kRecordF32) return reinterpret_cast<const float*>(data);
    if (c.format == kRecordFp8Model1) {  // e4m3 · 2^(e_tile − 127), then the bf16 rope tail
        const uint8_t* scales = block + c.scales_offset + j * c.scale_bytes;
        for (int64_t g = 0; g * 64 < c.nope; ++g)
            d4_decode_e4m3(data + g * 64, d4_ue8m0_value(scales[g]), dst + g * 64, s_min(int64_t{64}, c.nope - g * 64));
        const uint16_t* rope = reinterpret_cast<const uint16_t*>(data + c.nope);  // 2-byte aligned: nope is even
        int64_t i = c.nope;
        for (; i + kLanes <= c.dim; i += kLanes) vf_store(dst + i, vf_load_bf16(rope + (i - c.nope)));
        for (; i < c.dim; ++i) dst[i] = s_bf16_to_f32(rope[i - c.nope]);
        return dst;
    }
    float s;  // fp8_row_scale: one fp32 scale
    __builtin_memcpy(&s, block + c.scales_offset + j * 4, 4);
    d4_decode_e4m3(data, s, dst, c.dim);
    return dst;
}

// ---- vector helpers -----------------------------------------------------------------------------

// dst[i] = widen(src[i]) for a f32 or bf16 row.
inline void d4_widen(const void* src, bool bf16, float* dst, int64_t n) {
    int64_t i = 0;
    for (; i + kLanes <= n; i += kLanes) vf_store(dst + i, vf_load_row(src, bf16, i));
    for (; i < n; ++i) dst[i] = s_load(src, bf16, i);
}

// ---- sparse attention with sink, MQA path (ops/sparse_attention.h, v_dim = qk_dim) ------------------
//
// The structure of DSA's sparse MLA kernel (attention_kernels_impl.inl): the token's listed rows (main
// first, then extra; −1 skipped) are gathered in chunks of C = kSparseMqaChunk, each dequantized once
// for all the heads of the call into fp32 rows kc [C, d] plus the transpose kt [d, C]; per block of
// kAttnHeadBlock heads, the logits are a register tile (heads × 2 vectors of rows), then an online-softmax
// update, then P·V as a register tile (heads × 2 vectors of output dims) over all d dims (K = V, §3.8).
// All fp32: logits, weights and sums (ops/sparse_attention.h "any accumulation order").
//
// Softmax with the sink (§3.8 "sink in softmax denominator"): the sink starts the running max M, and its
// term e^(sink − M) starts the denominator at e^0 = 1 (0 without a sink or for sink = −inf, where the
// virtual key has no weight); each chunk rescales by e^(M_old − M_new). A NaN logit (NaN rows, or
// inf − inf) makes the head's output NaN, as the formula does: vf_exp_nonpositive keeps a NaN argument
// NaN, so the weight, the denominator and the accumulators all turn NaN.

// Prefetches the cache lines of `slot`'s row (and its scales): the selected rows are scattered in the
// paged cache, and decoding one row is too short for the out-of-order window to reach the next.
inline void d4_prefetch_row(const RecordCache& c, int32_t slot) {
    const uint8_t* block = c.base + (slot / c.block_size) * c.block_bytes;
    const int64_t j = slot % c.block_size;
    const uint8_t* data = block + j * c.data_bytes;
    for (int64_t o = 0; o < c.data_bytes; o += 64) prefetch_l2(data + o);
    if (c.format != kRecordF32) prefetch_l2(block + c.scales_offset + j * c.scale_bytes);
}

// Rows ahead in the list: decoding a row takes ~100–150 cycles, so 16 rows cover a DRAM miss.
inline constexpr int64_t kMqaPrefetch = 16;

// max(m, x[0 … n)) in lanes, then across them (a serial scalar max is a latency chain of n steps). A NaN
// x is never taken (MAXPS returns its second operand, m), a NaN m stays: the NaN logit still makes its own
// weight NaN in the caller.
inline float d4_max(const float* x, int64_t n, float m) {
    VF vm = vf_set1(m);
    int64_t c = 0;
    for (; c + kLanes <= n; c += kLanes) vm = vf_max(vf_load(x + c), vm);
    float lanes[kLanes];
    vf_store(lanes, vm);
    for (int k = 0; k < kLanes; ++k) m = s_fmax(lanes[k], m);
    for (; c < n; ++c) m = s_fmax(x[c], m);
    return m;
}

// Gathers the next valid rows of one slot list into kc (row stride d) from position *j on, until kc holds C
// rows or the list ends; returns the new row count.
inline int64_t d4_gather(const RecordCache& cache, const int32_t* slots, int64_t n, int64_t* j, float* kc, int64_t nc,
                         int64_t C, int64_t d) {
    for (; *j < n && nc < C; ++*j) {
        if (*j + kMqaPrefetch < n && slots[*j + kMqaPrefetch] >= 0) d4_prefetch_row(cache, slots[*j + kMqaPrefetch]);
        const int32_t slot = slots[*j];
        if (slot < 0) continue;
        float* dst = kc + nc * d;
        const float* row = d4_record_row(cache, slot, dst);
        if (row != dst) d4_widen(row, false, dst, d);  // f32 rows: copied from the cache
        ++nc;
    }
    return nc;
}

static_assert(kSparseMqaHeadBlock % 4 == 0, "the dispatch code splits heads at multiples of 4 (whole register blocks on AVX2)");
static_assert(kSparseMqaChunk % (2 * kLanes) == 0, "a chunk holds whole logits tiles");

void sparse_mqa_block(const SparseMqaKernelArgs& a, int64_t t, int64_t h0, int64_t h1, void* ws) {
    char* w = static_cast<char*>(ws);
    const int64_t d = a.head_dim, nh = h1 - h0, C = kSparseMqaChunk;
    float* qf = reinterpret_cast<float*>(w + a.ws_q);     // [nh, d]
    float* kc = reinterpret_cast<float*>(w + a.ws_kc);    // [C, d]
    float* kt = reinterpret_cast<float*>(w + a.ws_kt);    // [d, C]
    float* lg = reinterpret_cast<float*>(w + a.ws_lg);    // [nh, C]
    float* acc = reinterpret_cast<float*>(w + a.ws_acc);  // [nh, d]
    float* mx = reinterpret_cast<float*>(w + a.ws_mx);    // [nh]
    float* den = reinterpret_cast<float*>(w + a.ws_den);  // [nh]
    const float ninf = -__builtin_inff();
    const int64_t q_elem = a.q_bf16 ? 2 : 4, o_elem = a.out_bf16 ? 2 : 4;
    for (int64_t h = 0; h < nh; ++h) {
        d4_widen(static_cast<const char*>(a.q) + (t * a.q_token_stride + (h0 + h) * a.q_head_stride) * q_elem, a.q_bf16,
                 qf + h * d, d);
        mx[h] = a.sink ? a.sink[h0 + h] : ninf;
        den[h] = mx[h] > ninf ? 1.0f : 0.0f;
        for (int64_t i = 0; i < d; ++i) acc[h * d + i] = 0.0f;
    }
    const int32_t* mslots = a.n_main > 0 ? a.main_slots + t * a.main_stride : nullptr;
    const int32_t* xslots = a.n_extra > 0 ? a.extra_slots + t * a.extra_stride : nullptr;
    int64_t jm = 0, jx = 0, n_valid = 0;
    float factor[kAttnHeadBlock];
    for (;;) {
        int64_t nc = mslots ? d4_gather(a.main, mslots, a.n_main, &jm, kc, 0, C, d) : 0;
        if (xslots) nc = d4_gather(a.extra, xslots, a.n_extra, &jx, kc, nc, C, d);
        if (nc == 0) break;
        n_valid += nc;
        const int64_t nc_pad = (nc + 2 * kLanes - 1) / (2 * kLanes) * (2 * kLanes);  // ≤ C
        for (int64_t c = nc; c < nc_pad; ++c)  // zero rows: the padded logit columns stay finite (unused)
            for (int64_t i = 0; i < d; ++i) kc[c * d + i] = 0.0f;
        attn_transpose_chunk(kc, d, nc_pad, d, kt, C);
        for (int64_t hb = 0; hb < nh; hb += kAttnHeadBlock) {
            const int nb = nh - hb < kAttnHeadBlock ? static_cast<int>(nh - hb) : kAttnHeadBlock;
            attn_logits_heads(nb, qf + hb * d, d, kt, C, nc_pad, a.scale, lg + hb * C);
            for (int b = 0; b < nb; ++b) {
                const int64_t h = hb + b;
                float* lh = lg + h * C;
                const float m = d4_max(lh, nc, mx[h]);
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
                factor[b] = mx[h] == ninf ? 0.0f : __builtin_expf(mx[h] - m);
                den[h] = den[h] * factor[b] + sum;  // a NaN weight makes sum, and so den, NaN for good
                mx[h] = m;
            }
            attn_chunk_pv_heads(nb, lg + hb * C, C, kc, d, nc, factor, acc + hb * d, d);
        }
    }
    for (int64_t h = 0; h < nh; ++h) {
        char* out = static_cast<char*>(a.out) + (t * a.out_token_stride + (h0 + h) * a.out_head_stride) * o_elem;
        // No valid row: o = 0, even with a sink (§3.8 "lonely query"); a sink of +inf takes all the weight of
        // its zero value (dsa_mla.md §2.8): o = 0 (its den and acc are NaN from e^(inf − inf) by now).
        if (n_valid == 0 || (a.sink && a.sink[h0 + h] == __builtin_inff())) {
            for (int64_t i = 0; i < d; ++i) s_store(out, a.out_bf16, i, 0.0f);
            continue;
        }
        const float inv = 1.0f / den[h];
        const float* ah = acc + h * d;
        const VF vinv = vf_set1(inv);
        int64_t i = 0;
        for (; i + kLanes <= d; i += kLanes) vf_store_row(out, a.out_bf16, i, vf_mul(vf_load(ah + i), vinv));
        for (; i < d; ++i) s_store(out, a.out_bf16, i, ah[i] * inv);
    }
}

// ---- indexer scores (ops/indexer_scores.h) ----------------------------------------------------------
//
// Work unit: one key tile of one list, scored for every token of that list (cpu_dsv4_ops.cpp builds the
// units). Each key is converted from its storage format once per tile, i.e. once per step, then every
// token reads it. Lanes = heads: q is transposed per token to qᵀ [dim, heads] so that the keys need no
// transposition; a register block is kIdxKeys keys × up to kIdxVecs head vectors, one broadcast key value
// per dim, then ReLU · w per head and a horizontal sum per key. fp8_row_scale keys are used unscaled (exact
// e4m3 values) and the positive fp32 scale multiplies the head sum: s · Σ_h w_h·ReLU(<q_h, e>) =
// Σ_h w_h·ReLU(<q_h, e·s>) for s > 0 (§3.6; one rounding instead of d). A key whose scale is not a
// positive finite number, or with an e4m3 NaN byte, takes the old per-key path (idx_score_exact).

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
    int64_t* tag;  // the token whose qᵀ and weights the scratch holds (−1: none; reset by the dispatch code)
    char* qt;
    float* w;
    char* tile;
    const void** rows;
    float* scale;
    int32_t* flag;
    float* zero;
    float* key;
};

inline IdxScratch idx_scratch(const IndexerScoresKernelArgs& a, void* ws) {
    char* b = static_cast<char*>(ws);
    return {reinterpret_cast<int64_t*>(b + a.ws_tag),
            b + a.ws_qt,
            reinterpret_cast<float*>(b + a.ws_w),
            b + a.ws_tile,
            reinterpret_cast<const void**>(b + a.ws_rows),
            reinterpret_cast<float*>(b + a.ws_scale),
            reinterpret_cast<int32_t*>(b + a.ws_flag),
            reinterpret_cast<float*>(b + a.ws_zero),
            reinterpret_cast<float*>(b + a.ws_key)};
}

// The fp8_row_scale row of `slot`: its e4m3 bytes and fp32 scale.
inline const uint8_t* idx_fp8_row(const RecordCache& c, int32_t slot, float* scale) {
    const uint8_t* block = c.base + (slot / c.block_size) * c.block_bytes;
    const int64_t j = slot % c.block_size;
    __builtin_memcpy(scale, block + c.scales_offset + j * 4, 4);
    return block + j * c.data_bytes;
}

inline bool idx_scale_plain(float s) { return s > 0.0f && s < float_of(0x7f800000u); }

// dst[i] = e4m3(src[i]) unscaled (exact, vf_e4m3_values without its NaN mapping); true when a byte is
// one of the NaN codes 0x7F / 0xFF (the key then takes the exact path, which decodes it again).
inline bool idx_decode_f32(const uint8_t* src, float* dst, int64_t n) {
    const VF two120 = vf_set1(0x1p120f);
    const VI field_mask = vi_set1(static_cast<int32_t>(0x87f00000u)), low7 = vi_set1(0x7f);
    uint32_t nan = 0;
    int64_t i = 0;
    for (; i + kLanes <= n; i += kLanes) {
        const VI b = vi_load_i8(src + i);
        vf_store(dst + i, vf_mul(vf_from_bits(vi_and(vi_shl<20>(b), field_mask)), two120));
        nan |= vi_eq_mask(vi_and(b, low7), low7);
    }
    bool any = nan != 0;
    for (; i < n; ++i) {
        any |= (src[i] & 0x7f) == 0x7f;
        dst[i] = s_e4m3_scaled(src[i]) * 0x1p120f;
    }
    return any;
}

// The score of one key by the plain formula (fp32 key e4m3·s per element, a dot per head, ReLU by
// `dot > 0`): the path of keys whose scale cannot be factored out.
inline float idx_score_exact(const IndexerScoresKernelArgs& a, int64_t t, int32_t slot, float* key) {
    const float* k = d4_record_row(a.keys, slot, key);
    const int64_t q_elem = a.q_bf16 ? 2 : 4;
    float s = 0.0f;
    for (int64_t h = 0; h < a.n_heads; ++h) {
        const char* q = static_cast<const char*>(a.q) + (t * a.q_token_stride + h * a.q_head_stride) * q_elem;
        float dot = 0.0f;
        for (int64_t i = 0; i < a.head_dim; ++i) dot += s_load(q, a.q_bf16, i) * k[i];
        if (dot > 0.0f) s += (a.weights[t * a.weights_row_stride + h] * a.weight_scale) * dot;
    }
    return s;
}

// Prefetches the rows (and scales) of keys [j0, j1) of `list`: the slots are scattered over the cache.
inline void idx_prefetch_keys(const IndexerScoresKernelArgs& a, int64_t list, int64_t j0, int64_t j1) {
    const int32_t* slots = a.key_slots + list * a.key_slots_stride;
    const RecordCache& c = a.keys;
    for (int64_t j = j0; j < j1; ++j) {
        const int32_t ps = slots[j];
        if (ps < 0) continue;
        const uint8_t* block = c.base + (ps / c.block_size) * c.block_bytes;
        const uint8_t* row = block + (ps % c.block_size) * c.data_bytes;
        for (int64_t o = 0; o < c.data_bytes; o += 64) prefetch_l2(row + o);
        if (c.format != kRecordF32) prefetch_l2(block + c.scales_offset + (ps % c.block_size) * 4);
    }
}

// Rows, scales and flags of keys [c0, c1) of `list` (scratch index j − k0); fp8 rows decoded by
// `decode(bytes, row index)` (true for a NaN byte), f32 rows read in place from the cache. Prefetches
// kIdxPrefetch keys ahead, up to pf_end.
template <typename Decode>
inline void idx_prepare_keys(const IndexerScoresKernelArgs& a, const IdxScratch& S, int64_t list, int64_t k0, int64_t c0,
                             int64_t c1, int64_t pf_end, const Decode& decode) {
    const int32_t* slots = a.key_slots + list * a.key_slots_stride;
    for (int64_t j = c0; j < c1; ++j) {
        const int64_t r = j - k0;
        if (j + kIdxPrefetch < pf_end) idx_prefetch_keys(a, list, j + kIdxPrefetch, j + kIdxPrefetch + 1);
        const int32_t slot = slots[j];
        if (slot < 0) {  // −inf, never computed (ops/indexer_scores.h)
            S.flag[r] = 1;
            S.rows[r] = S.zero;
            S.scale[r] = 0.0f;
            continue;
        }
        if (a.keys.format == kRecordF32) {
            S.flag[r] = 0;
            S.rows[r] = a.keys.base + (slot / a.keys.block_size) * a.keys.block_bytes + (slot % a.keys.block_size) * a.keys.data_bytes;
            S.scale[r] = 1.0f;
            continue;
        }
        float s;
        const uint8_t* bytes = idx_fp8_row(a.keys, slot, &s);
        const bool nan = decode(bytes, r);
        S.flag[r] = (nan || !idx_scale_plain(s)) ? 2 : 0;
        S.scale[r] = s;
    }
}

// A unit: the whole tile is converted first (rolling prefetch of the scattered rows), then scored token by
// token. (Converting a decode token's tile in chunks of 32 keys right before scoring them, with the next
// chunk prefetched, was not faster in dev/bench_indexer on this Zen 4 machine.)
template <typename Prepare, typename Score>
inline void idx_unit(const IndexerScoresKernelArgs& a, const IdxScratch& S, int64_t k0, int64_t k1, const Prepare& prepare,
                     const Score& score) {
    for (int64_t i = 0; i < a.dim_pad; ++i) S.zero[i] = 0.0f;
    prepare(k0, k1, k1);
    score(k0, k1);
}

// Writes the scores of keys [j, j + nk) of token t from the per-key head sums: key j + k goes to column
// j + k of the op's score row, or to column j + k − k0 of the tile row (a.scores_tile_rows).
inline void idx_store(const IndexerScoresKernelArgs& a, const IdxScratch& S, int64_t t, int64_t list, int64_t k0, int64_t j,
                      int nk, const float* sums, float* out) {
    const int64_t col0 = a.scores_tile_rows ? k0 : 0;
    for (int k = 0; k < nk; ++k) {
        const int64_t r = j + k - k0;
        if (S.flag[r] == 0)
            out[j + k - col0] = sums[k] * S.scale[r];
        else if (S.flag[r] == 1)
            out[j + k - col0] = -__builtin_inff();
        else
            out[j + k - col0] = idx_score_exact(a, t, a.key_slots[list * a.key_slots_stride + j + k], S.key);
    }
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

// Head sums of kIdxKeys keys over all head vectors (hp / kLanes of them, 4 at a time).
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

// The token's head weights, zero past n_heads (padded heads then add w·ReLU(0) = 0).
inline void idx_token_weights(const IndexerScoresKernelArgs& a, const IdxScratch& S, int64_t t, int64_t hp) {
    const float* w = a.weights + t * a.weights_row_stride;
    for (int64_t h = 0; h < hp; ++h) S.w[h] = h < a.n_heads ? w[h] * a.weight_scale : 0.0f;
}

// fp32 FMA path: f32 or bf16 q (widened exactly), f32 or fp8_row_scale keys (decoded exactly).
void indexer_scores_tile(const IndexerScoresKernelArgs& a, int64_t list, const int32_t* toks, int64_t nt, int64_t k0,
                         int64_t k1, void* ws) {
    const IdxScratch S = idx_scratch(a, ws);
    const int64_t d = a.head_dim, H = a.n_heads, hp = (H + kLanes - 1) / kLanes * kLanes;
    float* tile = reinterpret_cast<float*>(S.tile);
    const auto decode = [&](const uint8_t* bytes, int64_t r) {
        S.rows[r] = tile + r * a.dim_pad;
        return idx_decode_f32(bytes, tile + r * a.dim_pad, d);
    };
    const float* const* rows = reinterpret_cast<const float* const*>(S.rows);
    float* qt = reinterpret_cast<float*>(S.qt);
    const int64_t q_elem = a.q_bf16 ? 2 : 4;
    const auto score = [&](int64_t c0, int64_t c1) {
        for (int64_t ti = 0; ti < nt; ++ti) {
            const int64_t t = toks[ti];
            const int64_t end = s_min(c1, a.n_keys[t]);
            if (end <= c0) continue;
            if (*S.tag != t) {  // qᵀ and weights of the token (kept while the same token is scored, e.g. in decode)
                for (int64_t h = 0; h < hp; ++h) {
                    if (h >= H) {
                        for (int64_t i = 0; i < d; ++i) qt[i * hp + h] = 0.0f;
                        continue;
                    }
                    const char* q = static_cast<const char*>(a.q) + (t * a.q_token_stride + h * a.q_head_stride) * q_elem;
                    for (int64_t i = 0; i < d; ++i) qt[i * hp + h] = s_load(q, a.q_bf16, i);
                }
                idx_token_weights(a, S, t, hp);
                *S.tag = t;
            }
            float* out = a.scores + (a.scores_tile_rows ? ti : t) * a.scores_row_stride;
            for (int64_t j = c0; j < end; j += kIdxKeys) {
                const int nk = static_cast<int>(s_min(kIdxKeys, end - j));
                const float* r[kIdxKeys];
                for (int k = 0; k < kIdxKeys; ++k) r[k] = k < nk ? rows[j + k - k0] : S.zero;
                float sums[kIdxKeys];
                idx_keys_f32(r, qt, hp, d, S.w, sums);
                idx_store(a, S, t, list, k0, j, nk, sums, out);
            }
        }
    };
    idx_unit(a, S, k0, k1,
             [&](int64_t c0, int64_t c1, int64_t pf_end) { idx_prepare_keys(a, S, list, k0, c0, c1, pf_end, decode); }, score);
}

#if defined(SIEVE_CPU_DSV4_BF16_TABLE)
// vdpbf16ps path (avx512_bf16 table): bf16 q and fp8_row_scale keys, both exact in bf16, so the products
// are exact and only the fp32 sums round (ops/indexer_scores.h "any order"). The instruction treats
// bf16 subnormal inputs as zero and flushes subnormal sums: |q| < 2^-126 contributes < 2^-117 per product.
// This unit is compiled with the avx512 flags (src/backends/CMakeLists.txt lists no avx512_bf16 unit for
// DeepSeek-V4), so the bf16 functions carry the target attribute; they are TU-local like everything here.
#define SIEVE_D4_BF16 __attribute__((target("avx512bf16")))

// A row of e4m3 bytes → the exact values as bf16 (the high half of the fp32 value: e4m3 has 4 significant
// bits), pairs (even dim in the low half); an odd head_dim gets a zero partner. True for a NaN byte.
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
    for (; i < n; ++i) dst[i] = static_cast<uint16_t>(bits_of(s_e4m3_scaled(src[i]) * 0x1p120f) >> 16);
    if (n % 2) dst[n] = 0;
    return any;
}

template <int NK, int NV>
SIEVE_D4_BF16 inline void idx_block_bf16(const uint32_t* const* rows, const uint32_t* qt, int64_t hp, int64_t np,
                                         const float* w, __m512* sacc) {
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

SIEVE_D4_BF16 __attribute__((noinline)) void idx_keys_bf16(const uint32_t* const* rows, const uint32_t* qt, int64_t hp, int64_t np,
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

// Scores keys [c0, c1) of the tile (scratch index j − k0) for the tokens of the unit, vdpbf16ps.
SIEVE_D4_BF16 void idx_score_bf16(const IndexerScoresKernelArgs& a, const IdxScratch& S, int64_t list, const int32_t* toks,
                                  int64_t nt, int64_t k0, int64_t c0, int64_t c1, const uint32_t* const* rows,
                                  const uint32_t* zero, uint32_t* qt, int64_t hp, int64_t np) {
    const int64_t d = a.head_dim, H = a.n_heads;
    for (int64_t ti = 0; ti < nt; ++ti) {
        const int64_t t = toks[ti];
        const int64_t end = s_min(c1, a.n_keys[t]);
        if (end <= c0) continue;
        if (*S.tag != t) {
            for (int64_t h = 0; h < hp; ++h) {  // qᵀ pairs: (q[h, 2i], q[h, 2i+1]), zero past head_dim / n_heads
                if (h >= H) {
                    for (int64_t i = 0; i < np; ++i) qt[i * hp + h] = 0;
                    continue;
                }
                const uint16_t* q = static_cast<const uint16_t*>(a.q) + t * a.q_token_stride + h * a.q_head_stride;
                for (int64_t i = 0; i < d / 2; ++i) {
                    uint32_t pair;
                    __builtin_memcpy(&pair, q + 2 * i, 4);
                    qt[i * hp + h] = pair;
                }
                if (d % 2) qt[(d / 2) * hp + h] = q[d - 1];
            }
            idx_token_weights(a, S, t, hp);
            *S.tag = t;
        }
        float* out = a.scores + (a.scores_tile_rows ? ti : t) * a.scores_row_stride;
        for (int64_t j = c0; j < end; j += kIdxKeys) {
            const int nk = static_cast<int>(s_min(kIdxKeys, end - j));
            const uint32_t* r[kIdxKeys];
            for (int k = 0; k < kIdxKeys; ++k) r[k] = k < nk ? rows[j + k - k0] : zero;
            float sums[kIdxKeys];
            idx_keys_bf16(r, qt, hp, np, S.w, sums);
            idx_store(a, S, t, list, k0, j, nk, sums, out);
        }
    }
}

SIEVE_D4_BF16 void indexer_scores_tile_bf16(const IndexerScoresKernelArgs& a, int64_t list, const int32_t* toks, int64_t nt,
                                            int64_t k0, int64_t k1, void* ws) {
    if (!a.bf16_dot) return indexer_scores_tile(a, list, toks, nt, k0, k1, ws);
    const IdxScratch S = idx_scratch(a, ws);
    const int64_t d = a.head_dim, hp = (a.n_heads + 15) / 16 * 16, np = (d + 1) / 2, rp = a.dim_pad / 2;
    uint32_t* tile = reinterpret_cast<uint32_t*>(S.tile);
    const auto decode = [&](const uint8_t* bytes, int64_t r) {
        S.rows[r] = tile + r * rp;
        return idx_decode_bf16(bytes, reinterpret_cast<uint16_t*>(tile + r * rp), d);
    };
    const uint32_t* const* rows = reinterpret_cast<const uint32_t* const*>(S.rows);
    const uint32_t* zero = reinterpret_cast<const uint32_t*>(S.zero);
    uint32_t* qt = reinterpret_cast<uint32_t*>(S.qt);
    idx_unit(a, S, k0, k1,
             [&](int64_t c0, int64_t c1, int64_t pf_end) { idx_prepare_keys(a, S, list, k0, c0, c1, pf_end, decode); },
             [&](int64_t c0, int64_t c1) { idx_score_bf16(a, S, list, toks, nt, k0, c0, c1, rows, zero, qt, hp, np); });
}
#endif

}  // namespace
}  // namespace sieve::cpu::SIEVE_CPU_ISA_NS

namespace sieve::cpu {

extern const CpuDsv4Kernels SIEVE_CPU_DSV4_TABLE = {
    .isa_name = SIEVE_CPU_ISA_NAME,
    .sparse_mqa_block = SIEVE_CPU_ISA_NS::sparse_mqa_block,
    .indexer_scores_tile = SIEVE_CPU_ISA_NS::indexer_scores_tile,
    .bf16_dot = false,
};
#if defined(SIEVE_CPU_DSV4_BF16_TABLE)
extern const CpuDsv4Kernels SIEVE_CPU_DSV4_BF16_TABLE = {
    .isa_name = "avx512_bf16",
    .sparse_mqa_block = SIEVE_CPU_ISA_NS::sparse_mqa_block,
    .indexer_scores_tile = SIEVE_CPU_ISA_NS::indexer_scores_tile_bf16,
    .bf16_dot = true,
};
#endif

}  // namespace sieve::cpu
