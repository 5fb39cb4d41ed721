// Kernel bodies of DeepSeek-V4's hot ops (dsv4_kernels.h), written once over simd.h and compiled
// once per ISA by dsv4_kernels_<isa>.cpp, which defines SIEVE_CPU_DSV4_TABLE before including this
// file. Everything is in an anonymous namespace (simd.h, "ODR safety"). Semantics: ops/sparse_attention.h
// (its MQA path), ops/cache_record.h (record decoding bit-identical to ref).
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
    // fp8_model1: e4m3 · 2^(e_tile − 127), then the bf16 rope tail
    const uint8_t* scales = block + c.scales_offset + j * c.scale_bytes;
    for (int64_t g = 0; g * 64 < c.nope; ++g)
        d4_decode_e4m3(data + g * 64, d4_ue8m0_value(scales[g]), dst + g * 64, s_min(int64_t{64}, c.nope - g * 64));
    const uint16_t* rope = reinterpret_cast<const uint16_t*>(data + c.nope);  // 2-byte aligned: nope is even
    int64_t i = c.nope;
    for (; i + kLanes <= c.dim; i += kLanes) vf_store(dst + i, vf_load_bf16(rope + (i - c.nope)));
    for (; i < c.dim; ++i) dst[i] = s_bf16_to_f32(rope[i - c.nope]);
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
// All fp32: logits, weights and sums (ops/sparse_attention.h "any accumulation order"). At the amx_bf16 level,
// chunks of exact bf16 rows go through the tile path instead (below; attention_kernels_impl.inl
// attn_tiles_chunk). A call may cover a range of the rows only (split-K, MqaShare): it then leaves its
// softmax state for merge_mqa_partials.
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

// Walks one slot list from position *j on, handing each valid slot and its place among the gathered rows
// to store_row(slot, nc), until nc reaches C or the list ends (−1 skipped, rows ahead prefetched); returns
// the new row count.
template <class StoreRow>
inline int64_t d4_gather_rows(const RecordCache& cache, const int32_t* slots, int64_t n, int64_t* j, int64_t nc, int64_t C,
                              StoreRow&& store_row) {
    for (; *j < n && nc < C; ++*j) {
        if (*j + kMqaPrefetch < n && slots[*j + kMqaPrefetch] >= 0) d4_prefetch_row(cache, slots[*j + kMqaPrefetch]);
        const int32_t slot = slots[*j];
        if (slot < 0) continue;
        store_row(slot, nc);
        ++nc;
    }
    return nc;
}

// Gathers the next valid rows of one slot list into kc [C, d] (fp32); returns the new row count.
inline int64_t d4_gather(const RecordCache& cache, const int32_t* slots, int64_t n, int64_t* j, float* kc, int64_t nc,
                         int64_t C, int64_t d) {
    return d4_gather_rows(cache, slots, n, j, nc, C, [&](int32_t slot, int64_t r) {
        float* dst = kc + r * d;
        const float* row = d4_record_row(cache, slot, dst);
        if (row != dst) d4_widen(row, false, dst, d);  // f32 rows: copied from the cache
    });
}

static_assert(kSparseMqaHeadBlock % 4 == 0, "the dispatch code splits heads at multiples of 4 (whole register blocks on AVX2)");
static_assert(kSparseMqaChunk % (2 * kLanes) == 0, "a chunk holds whole logits tiles");


// One chunk of nc gathered rows kc [C, d] (fp32) through the FMA tiles: transpose, then per register block of
// heads the logits, the online-softmax update and P·V.
inline void d4_chunk_fma(const float* qf, int64_t nh, int64_t d, float* kc, float* kt, float* lg, int64_t nc, float scale,
                         bool p_bf16, AttnSoftmaxState st) {
    const int64_t C = kSparseMqaChunk;
    const float ninf = -__builtin_inff();
    const int64_t nc_pad = (nc + 2 * kLanes - 1) / (2 * kLanes) * (2 * kLanes);  // ≤ C
    for (int64_t c = nc; c < nc_pad; ++c)  // zero rows: the padded logit columns stay finite (unused)
        for (int64_t i = 0; i < d; ++i) kc[c * d + i] = 0.0f;
    attn_transpose_chunk(kc, d, nc_pad, d, kt, C);
    float factor[kAttnHeadBlock];
    for (int64_t hb = 0, nb = 0; hb < nh; hb += nb) {
        nb = attn_head_block(nh, hb);
        attn_logits_heads(static_cast<int>(nb), qf + hb * d, d, kt, C, nc_pad, scale, lg + hb * C);
        for (int64_t b = 0; b < nb; ++b) {
            const int64_t h = hb + b;
            float* lh = lg + h * C;
            const float m = d4_max(lh, nc, st.mx[h]);
            const float sum = attn_chunk_weights(lh, nc, m, p_bf16);
            factor[b] = st.mx[h] == ninf ? 0.0f : __builtin_expf(st.mx[h] - m);
            st.den[h] = st.den[h] * factor[b] + sum;  // a NaN weight makes sum, and so den, NaN for good
            st.mx[h] = m;
        }
        attn_chunk_pv_heads(static_cast<int>(nb), lg + hb * C, C, kc, d, nc, factor, st.acc + hb * d, d);
    }
}

#if defined(__AVX512BF16__)
// ---- the tile path (amx_bf16 level; avx512_bf16: the same path on register tiles) --------------------
//
// With bf16 q and math bf16, both products of the attention take bf16 factors: q·K_j where K_j is exact in
// bf16, and P_j·V_j with P_j = bf16(p_j) (ops/sparse_attention.h). An fp8_model1 value e4m3·2^(e − 127) is
// exact in bf16, and normal or zero (what the tile unit reads, attention_kernels_impl.inl), when the tile's
// scale byte e lies in [10, 246]: e4m3's smallest magnitude 2^-9 then stays ≥ 2^-126 and its largest, 448,
// below bf16's largest finite value; the rope dims are bf16 already. A chunk holding a row with another
// scale byte (never written by a cache store; the 0xFF NaN scale included) runs through the FMA tiles.
// Heads go in groups of 16 (the tiles' rows), the last one padded with zero q rows whose results are unused.

inline constexpr int kTileScaleMin = 10, kTileScaleMax = 246;

// The bf16 row of `slot` of an fp8_model1 cache into dst [dim]; false (dst partly written) when a scale byte
// lies outside [kTileScaleMin, kTileScaleMax].
inline bool d4_record_row_bf16(const RecordCache& c, int32_t slot, uint16_t* dst) {
    const uint8_t* block = c.base + (slot / c.block_size) * c.block_bytes;
    const int64_t j = slot % c.block_size;
    const uint8_t* data = block + j * c.data_bytes;
    const uint8_t* scales = block + c.scales_offset + j * c.scale_bytes;
    for (int64_t g = 0; g * 64 < c.nope; ++g) {
        const uint8_t e = scales[g];
        if (e < kTileScaleMin || e > kTileScaleMax) return false;
        attn_e4m3_to_bf16(data + g * 64, e, dst + g * 64, 64);
    }
    const uint16_t* rope = reinterpret_cast<const uint16_t*>(data + c.nope);
    for (int64_t i = c.nope; i < c.dim; i += 32)
        _mm512_storeu_si512(dst + i, _mm512_loadu_si512(rope + (i - c.nope)));
    return true;
}

// Whether the rows of a list suit the tile path: fp8_model1 records in whole 64-dim scale tiles, 32-dim steps.
inline bool d4_tile_cache(const RecordCache& c) { return c.format == kRecordFp8Model1 && c.nope % 64 == 0 && c.dim % 64 == 0; }

// d4_gather into bf16 rows kb [C, d]; *exact turns false when a row is not exact in bf16 (its place is still
// taken, so that the chunk can be gathered again through d4_gather).
inline int64_t d4_gather_bf16(const RecordCache& cache, const int32_t* slots, int64_t n, int64_t* j, uint16_t* kb,
                              int64_t nc, int64_t C, int64_t d, bool* exact) {
    return d4_gather_rows(cache, slots, n, j, nc, C, [&](int32_t slot, int64_t r) {
        if (!d4_record_row_bf16(cache, slot, kb + r * d)) *exact = false;
    });
}

// Prefetches, into L2, the rows of the chunk after the one being computed: the listed rows lie scattered in
// the paged caches, and the tile products leave the gather of a chunk waiting on memory most of its time, so
// the tile path asks for the next chunk's lines while it computes this one. The main list, then the extra
// list, from the positions where the gather stopped; −1 skipped.
struct D4NextRows {
    const RecordCache* cache[2];
    const int32_t* slots[2];
    int64_t n[2];
    int list = 0;
    int64_t j = 0;
    // Prefetches the next `rows` listed rows (fewer at the end of the lists).
    void prefetch(int64_t rows) {
        for (; list < 2; ++list, j = 0) {
            for (; j < n[list] && rows > 0; ++j) {
                const int32_t slot = slots[list][j];
                if (slot < 0) continue;
                d4_prefetch_row(*cache[list], slot);
                --rows;
            }
            if (rows == 0) return;
        }
    }
};

#endif  // __AVX512BF16__

// Writes out[t, h] = acc / den for the heads [h0, h0 + nh) (acc [nh, d], den [nh]); 0 where the token had no
// valid row or the head's sink is +inf.
inline void d4_store_output(const SparseMqaKernelArgs& a, int64_t t, int64_t h0, int64_t nh, const float* acc,
                            const float* den, int64_t n_valid) {
    const int64_t d = a.head_dim, o_elem = a.out_bf16 ? 2 : 4;
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

void sparse_mqa_block(const SparseMqaKernelArgs& a, const MqaShare& share, void* ws) {
    char* w = static_cast<char*>(ws);
    const int64_t t = share.token, h0 = share.head_begin, h1 = share.head_end;
    const int64_t d = a.head_dim, nh = h1 - h0, C = kSparseMqaChunk;
    float* qf = reinterpret_cast<float*>(w + a.ws_q);     // [nh, d]
    float* kc = reinterpret_cast<float*>(w + a.ws_kc);    // [C, d]
    float* kt = reinterpret_cast<float*>(w + a.ws_kt);    // [d, C]
    float* lg = reinterpret_cast<float*>(w + a.ws_lg);    // [nh, C]
    const AttnSoftmaxState st{reinterpret_cast<float*>(w + a.ws_acc), reinterpret_cast<float*>(w + a.ws_mx),
                              reinterpret_cast<float*>(w + a.ws_den)};
    const float ninf = -__builtin_inff();
    const int64_t q_elem = a.q_bf16 ? 2 : 4;
    const int64_t nh_state = (nh + 15) / 16 * 16;  // the tile path's padded heads too (the args)
    const bool sink = a.sink && share.row_begin == 0;
    for (int64_t h = 0; h < nh_state; ++h) {
        if (h < nh)
            d4_widen(static_cast<const char*>(a.q) + (t * a.q_token_stride + (h0 + h) * a.q_head_stride) * q_elem,
                     a.q_bf16, qf + h * d, d);
        st.mx[h] = h < nh && sink ? a.sink[h0 + h] : ninf;
        st.den[h] = st.mx[h] > ninf ? 1.0f : 0.0f;
        for (int64_t i = 0; i < d; ++i) st.acc[h * d + i] = 0.0f;
    }
    // The share's rows: main positions [jm, main_end), then extra positions [jx, extra_end).
    const int64_t main_end = s_min(a.n_main, share.row_end), extra_end = s_max(int64_t{0}, s_min(a.n_extra, share.row_end - a.n_main));
    const int32_t* mslots = main_end > 0 ? a.main_slots + t * a.main_stride : nullptr;
    const int32_t* xslots = extra_end > 0 ? a.extra_slots + t * a.extra_stride : nullptr;
    int64_t jm = s_min(share.row_begin, a.n_main), jx = s_max(int64_t{0}, share.row_begin - a.n_main), n_valid = 0;
#if defined(__AVX512BF16__)
    const bool tiles = a.tile_workspace && a.q_bf16 && a.p_bf16 && d % 64 == 0 && (!mslots || d4_tile_cache(a.main)) &&
                       (!xslots || d4_tile_cache(a.extra));
    const AttnTileBuffers tw{reinterpret_cast<uint32_t*>(w + a.ws_qt), reinterpret_cast<uint16_t*>(w + a.ws_kb),
                             reinterpret_cast<uint16_t*>(w + a.ws_kv), reinterpret_cast<uint16_t*>(w + a.ws_pb),
                             reinterpret_cast<float*>(w + a.ws_lt), reinterpret_cast<float*>(w + a.ws_pt)};
    if (tiles) {
#if defined(__AMX_BF16__)
        amx_tiles_begin();
#endif
        for (int64_t g = 0; g * 16 < nh; ++g) attn_q_pairs_t(qf + g * 16 * d, s_min(int64_t{16}, nh - g * 16), d, tw.qt + g * (d / 2) * 16);
    }
#endif
    for (;;) {
#if defined(__AVX512BF16__)
        if (tiles) {
            const int64_t jm0 = jm, jx0 = jx;
            bool exact = true;
            const int64_t CT = kSparseMqaTileChunk;
            int64_t nc = mslots ? d4_gather_bf16(a.main, mslots, main_end, &jm, tw.kb, 0, CT, d, &exact) : 0;
            if (xslots) nc = d4_gather_bf16(a.extra, xslots, extra_end, &jx, tw.kb, nc, CT, d, &exact);
            if (nc == 0) break;
            if (exact) {
                n_valid += nc;
                D4NextRows next{{&a.main, &a.extra}, {mslots, xslots}, {mslots ? main_end : 0, xslots ? extra_end : 0}};
                next.list = jm < next.n[0] ? 0 : 1;
                next.j = next.list == 0 ? jm : jx;
                attn_tiles_values_from_keys(tw, d, d, nc);
                attn_tiles_chunk(nh, d, d, nc, kSparseMqaTileChunk, a.scale, tw, st, next);
                continue;
            }
            jm = jm0, jx = jx0;  // gathered again below, in fp32
        }
#endif
        int64_t nc = mslots ? d4_gather(a.main, mslots, main_end, &jm, kc, 0, C, d) : 0;
        if (xslots) nc = d4_gather(a.extra, xslots, extra_end, &jx, kc, nc, C, d);
        if (nc == 0) break;
        n_valid += nc;
        d4_chunk_fma(qf, nh, d, kc, kt, lg, nc, a.scale, a.p_bf16, st);
    }
#if defined(__AMX_BF16__)
    if (tiles) amx_tiles_end();
#endif
    if (!share.partial) return d4_store_output(a, t, h0, nh, st.acc, st.den, n_valid);
    float* p = share.partial;
    for (int64_t i = 0; i < nh * d; ++i) p[i] = st.acc[i];
    for (int64_t h = 0; h < nh; ++h) p[nh * d + h] = st.mx[h], p[nh * d + nh + h] = st.den[h];
    p[nh * d + 2 * nh] = static_cast<float>(n_valid);  // exact: a token lists far fewer than 2^24 rows
}

// Split-K merge (ops/sparse_attention.h: the online softmax over the splits' chunks): M = the largest of the
// splits' maxima, each split's sums times e^(M_s − M) (0 for a split that never had a finite max: its sums
// are 0, or NaN, which then stays NaN), added in row order, divided once. A NaN max (a NaN sink) is never
// taken as M, but its factor e^(NaN − M) is NaN, so the head's sums turn NaN, as the formula says.
void merge_mqa_partials(const SparseMqaKernelArgs& a, int64_t t, int64_t h0, int64_t h1, float* const* partials,
                        int64_t n_splits) {
    const int64_t d = a.head_dim, nh = h1 - h0;
    const float ninf = -__builtin_inff();
    int64_t n_valid = 0;
    for (int64_t s = 0; s < n_splits; ++s) n_valid += static_cast<int64_t>(partials[s][nh * d + 2 * nh]);
    float* acc = partials[0];  // merged in place into the first split's state
    float* den = acc + nh * d + nh;
    for (int64_t h = 0; h < nh; ++h) {
        float m = ninf;
        for (int64_t s = 0; s < n_splits; ++s) {
            const float ms = partials[s][nh * d + h];
            m = ms > m ? ms : m;
        }
        float dsum = 0.0f;
        for (int64_t s = 0; s < n_splits; ++s) {
            const float ms = partials[s][nh * d + h];
            const float f = ms == ninf ? 0.0f : __builtin_expf(ms - m);
            const float* as = partials[s] + h * d;
            const VF vf = vf_set1(f);
            int64_t i = 0;
            float* ah = acc + h * d;
            if (s == 0) {
                for (; i + kLanes <= d; i += kLanes) vf_store(ah + i, vf_mul(vf_load(as + i), vf));
                for (; i < d; ++i) ah[i] = as[i] * f;
            } else {
                for (; i + kLanes <= d; i += kLanes) vf_store(ah + i, vf_fma(vf_load(as + i), vf, vf_load(ah + i)));
                for (; i < d; ++i) ah[i] += as[i] * f;
            }
            dsum += partials[s][nh * d + nh + h] * f;
        }
        den[h] = dsum;
    }
    d4_store_output(a, t, h0, nh, acc, den, n_valid);
}

}  // namespace
}  // namespace sieve::cpu::SIEVE_CPU_ISA_NS

namespace sieve::cpu {

extern const CpuDsv4Kernels SIEVE_CPU_DSV4_TABLE = {
    .isa_name = SIEVE_CPU_ISA_NAME,
#if defined(__AVX512BF16__)
    .tiles = true,
#else
    .tiles = false,
#endif
    .sparse_mqa_block = SIEVE_CPU_ISA_NS::sparse_mqa_block,
    .merge_mqa_partials = SIEVE_CPU_ISA_NS::merge_mqa_partials,
};

}  // namespace sieve::cpu
