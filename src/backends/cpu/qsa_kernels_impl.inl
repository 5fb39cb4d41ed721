// Kernel bodies of the cpu backend's QSA ops, written once over simd.h and compiled once per ISA by
// qsa_kernels_<isa>.cpp, which defines SIEVE_QSA_TABLE and SIEVE_QSA_ISA_NAME before including this
// file. Everything is in an anonymous namespace (see simd.h, "ODR safety"): no std::, no inline
// helpers of other headers (cache addresses are computed here, not with CacheView::row).
// Semantics: ops/qsa_pool.h (bit-identical to ref), ops/qsa_sparse_gqa.h.
#include "backends/cpu/qsa_kernels.h"
#include "backends/cpu/simd.h"
// attn_transpose_block and attn_logits_tile: the register tiles of the chunked sparse kernels.
#include "backends/cpu/attention_kernels_impl.inl"

#ifndef SIEVE_QSA_TABLE
#error "define SIEVE_QSA_TABLE before including qsa_kernels_impl.inl"
#endif

#ifndef SIEVE_CPU_ISA_NS
#error "define SIEVE_CPU_ISA_NS (the ISA namespace of the kernels: scalar, avx2, ...) first"
#endif

// The kernels live in namespace sieve::cpu::<isa>, so that a profile names the ISA of every kernel,
// and inside an anonymous namespace (simd.h, "ODR safety").
namespace sieve::cpu::SIEVE_CPU_ISA_NS {
namespace {

inline int64_t qsa_slot_offset(const CacheView& v, int64_t slot) {
    return (slot / v.block_size) * v.block_bytes + (slot % v.block_size) * v.entry_bytes;
}

// exp(x) for x ≤ 0 (softmax weights; x is clamped to [−87, 0]): 2^n · P(r), n = round(x·log2 e),
// r = x − n·ln 2 in two parts, P the degree-6 Taylor polynomial (|r| ≤ 0.35: ≈ 2 ulp). A NaN x gives NaN:
// x is the second operand of the clamp's max and min, which MAXPS / MINPS return when either is NaN, so a
// NaN logit makes the output NaN (ops/qsa_sparse_gqa.h) instead of weighing in at e^-87.
inline VF qsa_vf_exp_nonpos(VF x) {
    x = vf_min(vf_zero(), vf_max(vf_set1(-87.0f), x));
    const VF magic = vf_set1(12582912.0f);  // 1.5·2^23: adding it rounds to an integer in the low bits
    const VF t = vf_add(vf_mul(x, vf_set1(1.44269504088896341f)), magic);
    const VF n = vf_sub(t, magic);
    VF r = vf_sub(x, vf_mul(n, vf_set1(0.693145751953125f)));  // ln 2 high part: n·hi exact
    r = vf_sub(r, vf_mul(n, vf_set1(1.42860682030941723212e-6f)));
    VF poly = vf_set1(1.0f / 720.0f);
    poly = vf_fma(poly, r, vf_set1(1.0f / 120.0f));
    poly = vf_fma(poly, r, vf_set1(1.0f / 24.0f));
    poly = vf_fma(poly, r, vf_set1(1.0f / 6.0f));
    poly = vf_fma(poly, r, vf_set1(0.5f));
    poly = vf_fma(poly, r, vf_set1(1.0f));
    poly = vf_fma(poly, r, vf_set1(1.0f));
    const VI ni = vi_sub(vi_bits(t), vi_bits(magic));  // n as an integer, −126 ≤ n ≤ 0
    return vf_mul(poly, vf_from_bits(vi_shl<23>(vi_add(ni, vi_set1(127)))));
}

// ===================================== pooling ====================================================

// Bit-identical to ref: per element, the fp32 sum in member order, then one division (ops/qsa_pool.h).
template <bool KB, bool OB>
void pool_groups_t(const QsaPoolParams& p, int64_t g0, int64_t g1) {
    const int64_t n = p.head_dim;
    float lanes[kLanes];
    for (int64_t g = g0; g < g1; ++g) {
        const int64_t* slots = p.member_slots + g * p.ratio;
        char* out = static_cast<char*>(p.out) + g * p.out_row_stride * (OB ? 2 : 4);
        const float r = static_cast<float>(p.ratio);
        int64_t i = 0;
        for (; i + kLanes <= n; i += kLanes) {
            VF s = vf_zero();
            for (int64_t j = 0; j < p.ratio; ++j) s = vf_add(s, vf_load_row(p.keys.base + qsa_slot_offset(p.keys, slots[j]), KB, i));
            vf_store(lanes, s);
            for (int l = 0; l < kLanes; ++l) s_store(out, OB, i + l, lanes[l] / r);
        }
        for (; i < n; ++i) {
            float s = 0.0f;
            for (int64_t j = 0; j < p.ratio; ++j) s += s_load(p.keys.base + qsa_slot_offset(p.keys, slots[j]), KB, i);
            s_store(out, OB, i, s / r);
        }
    }
}

void pool_groups(const QsaPoolParams& p, int64_t g0, int64_t g1) {
    const bool kb = p.key_type == DType::bf16, ob = p.out_type == DType::bf16;
    if (kb && ob) return pool_groups_t<true, true>(p, g0, g1);
    if (kb) return pool_groups_t<true, false>(p, g0, g1);
    if (ob) return pool_groups_t<false, true>(p, g0, g1);
    return pool_groups_t<false, false>(p, g0, g1);
}

// =================================== sparse GQA ===================================================

// Query heads whose P·V accumulators stay in registers: 12 heads × 1 vector (+ V and a broadcast weight)
// fit AVX2's 16 registers, 12 × 2 AVX-512's 32, and QSA's group of 12 heads then reads each V row once.
constexpr int64_t kGqaHeadBatch = kQsaGqaHeadBatch;
// Rows of V per pass (32 rows × 512 B of bf16 V at D = 256: 16 KiB, L1): each pass loads and stores the
// heads' accumulator tiles once. 32 rather than 16 halves those; QSA decode attention at 128K, three A/B
// rounds: batch 1 0.35–0.42 ms (0.43–0.61 with 16), batch 4 1.30–1.35 (1.63–2.06), batch 16 5.0–5.7 (5.6–6.1).
constexpr int64_t kGqaRowBlock = 32;
constexpr int64_t kGqaChunk = kQsaGqaChunk;  // listed rows whose K is transposed at once
constexpr int64_t kGqaPvAhead = 2 * kGqaRowBlock;  // rows whose V is prefetched ahead of P·V
static_assert(kGqaChunk % (2 * kLanes) == 0, "attn_logits_tile walks a chunk in steps of 2·kLanes rows");

// Prefetches the 64-byte lines that start in bytes [b0, b1) of the rows base + rows[a] + off, a in
// [a0, a1), into L2 (prefetcht1). The kernels spread these over their loops (a few lines per step): a
// burst of a whole block's lines fills the miss buffers and stalls on them (perf showed the stall on
// the prefetch instruction). Into L1 (prefetcht0) they held the L1's few miss buffers: on this Zen 4,
// QSA decode attention at 128K, batch 16, took 8.4–8.7 ms with prefetcht0 and 5.5–5.8 with prefetcht1.
inline void gqa_prefetch_lines(const uint8_t* base, const int64_t* rows, int64_t off, int64_t a0, int64_t a1, int64_t b0,
                               int64_t b1) {
    for (int64_t a = a0; a < a1; ++a)
        for (int64_t b = (b0 + 63) / 64 * 64; b < b1; b += 64) prefetch_l2(base + rows[a] + off + b);
}

// kt[i·kGqaChunk + c] = K_c[i] as f32 for the chunk's rows c < nc (K_c at base + rows[c] + k_off) and
// 0 for c in [nc, nc_pad): blocks of kLanes rows × kLanes dims widened into blk, then transposed in
// registers (exact: widening and moves only). The zero rows give logits that are never read.
// Meanwhile the next chunk's rows (up to n_ahead from rows) are prefetched, K and the V that follows
// it in the entry (ops/qsa_sparse_gqa.h layout), a few lines per step.
template <bool KB>
void gqa_gather_kt(const uint8_t* base, const int64_t* rows, int64_t k_off, int64_t nc, int64_t nc_pad, int64_t n_ahead,
                   int64_t D, float* kt) {
    const int64_t ke = KB ? 2 : 4, d_vec = D - D % kLanes;
    float blk[kLanes * kLanes];
    for (int64_t c0 = 0; c0 < nc_pad; c0 += kLanes) {
        const uint8_t* k[kLanes];
        for (int64_t c = 0; c < kLanes; ++c) k[c] = c0 + c < nc ? base + rows[c0 + c] + k_off : nullptr;
        // The rows of the next chunk, a few lines per step: the gather waits on these loads (rows are
        // scattered in the cache).
        const int64_t a0 = nc + c0, a1 = nc + c0 + kLanes < n_ahead ? nc + c0 + kLanes : n_ahead;
        for (int64_t i0 = 0; i0 < d_vec; i0 += kLanes) {
            gqa_prefetch_lines(base, rows, k_off, a0, a1, 2 * i0 * ke, 2 * (i0 + kLanes) * ke);
            for (int64_t c = 0; c < kLanes; ++c) vf_store(blk + c * kLanes, k[c] ? vf_load_row(k[c], KB, i0) : vf_zero());
            attn_transpose_block(blk, kLanes, kt + i0 * kGqaChunk + c0, kGqaChunk);
        }
        gqa_prefetch_lines(base, rows, k_off, a0, a1, 2 * d_vec * ke, 2 * D * ke);
        for (int64_t i = d_vec; i < D; ++i)
            for (int64_t c = 0; c < kLanes; ++c) kt[i * kGqaChunk + c0 + c] = k[c] ? s_load(k[c], KB, i) : 0.0f;
    }
}

// acc[h, d] += Σ_{j ∈ [jb, je)} w[h, j] · V_j[d] for NH heads and the full vectors d < d_vec, V_j at
// base + rows[j] + v_off; w: [NH, n] weights, acc: [NH, D]. Register tile NH heads × NV vectors of dims
// (NV = 2 where the registers allow: each broadcast weight then feeds two FMAs).
template <bool KB, int NH, int NV>
void pv_tile(const uint8_t* base, const int64_t* rows, int64_t v_off, const float* w, int64_t n, int64_t jb,
             int64_t je, float* acc, int64_t D, int64_t d0) {
    VF a[NH][NV];
    for (int hh = 0; hh < NH; ++hh)
        for (int v = 0; v < NV; ++v) a[hh][v] = vf_load(acc + hh * D + d0 + v * kLanes);
    for (int64_t j = jb; j < je; ++j) {
        const uint8_t* row = base + rows[j] + v_off;
        VF vv[NV];
        for (int v = 0; v < NV; ++v) vv[v] = vf_load_row(row, KB, d0 + v * kLanes);
        for (int hh = 0; hh < NH; ++hh) {
            const VF wv = vf_set1(w[hh * n + j]);
            for (int v = 0; v < NV; ++v) a[hh][v] = vf_fma(wv, vv[v], a[hh][v]);
        }
    }
    for (int hh = 0; hh < NH; ++hh)
        for (int v = 0; v < NV; ++v) vf_store(acc + hh * D + d0 + v * kLanes, a[hh][v]);
}

// pv_tile over the full vectors of dims; meanwhile the V rows [a0, a1) (those kGqaPvAhead rows ahead) are
// prefetched, the lines of each tile's dims with it.
template <bool KB, int NH>
void pv_block(const uint8_t* base, const int64_t* rows, int64_t v_off, const float* w, int64_t n, int64_t jb,
              int64_t je, float* acc, int64_t D, int64_t d_vec, int64_t a0, int64_t a1) {
    const int64_t ke = KB ? 2 : 4;
    int64_t d0 = 0;
#if defined(__AVX512F__)
    for (; d0 + 2 * kLanes <= d_vec; d0 += 2 * kLanes) {
        gqa_prefetch_lines(base, rows, v_off, a0, a1, d0 * ke, (d0 + 2 * kLanes) * ke);
        pv_tile<KB, NH, 2>(base, rows, v_off, w, n, jb, je, acc, D, d0);
    }
#endif
    for (; d0 < d_vec; d0 += kLanes) {
        gqa_prefetch_lines(base, rows, v_off, a0, a1, d0 * ke, (d0 + kLanes) * ke);
        pv_tile<KB, NH, 1>(base, rows, v_off, w, n, jb, je, acc, D, d0);
    }
    gqa_prefetch_lines(base, rows, v_off, a0, a1, d_vec * ke, D * ke);
}

#if defined(__AVX512BF16__)
// The logits with vdpbf16ps for bf16 q and bf16 K: the products of two bf16 are exact in fp32 and only the
// sums round (any order, ops/qsa_sparse_gqa.h), half the instructions of the fp32 tile, and K is moved,
// never widened. The chunk's K goes to kt as bf16 pairs: kt[i·kGqaChunk + c] = K_c[2i] | K_c[2i + 1] << 16
// (i < D/2), transposed as 32-bit words by the same register transposition as the f32 K (moves only).
inline void gqa_gather_kt_pairs(const uint8_t* base, const int64_t* rows, int64_t k_off, int64_t nc, int64_t nc_pad,
                                int64_t n_ahead, int64_t D, float* kt) {
    const int64_t np = D / 2;  // a multiple of 16: D % kGqaDpDims == 0
    float blk[16 * 16];
    for (int64_t c0 = 0; c0 < nc_pad; c0 += 16) {
        const uint8_t* k[16];
        for (int64_t c = 0; c < 16; ++c) k[c] = c0 + c < nc ? base + rows[c0 + c] + k_off : nullptr;
        // The next chunk's K|V lines (2·D bf16 from k_off), spread over the steps as in gqa_gather_kt.
        const int64_t a0 = nc + c0, a1 = nc + c0 + 16 < n_ahead ? nc + c0 + 16 : n_ahead;
        for (int64_t i0 = 0; i0 < np; i0 += 16) {
            gqa_prefetch_lines(base, rows, k_off, a0, a1, i0 * 8, (i0 + 16) * 8);
            for (int64_t c = 0; c < 16; ++c) {
                if (k[c]) __builtin_memcpy(blk + c * 16, k[c] + i0 * 4, 64);
                else _mm512_storeu_ps(blk + c * 16, _mm512_setzero_ps());
            }
            attn_transpose_block(blk, 16, kt + i0 * kGqaChunk + c0, kGqaChunk);
        }
    }
}

// lg[h, j] = scale · Σ_i q[h, i]·K_j[i] for NH heads × rows [j0, j0 + 32): qp [NH, D/2] the heads' bf16 pairs
// (as 32-bit words), kt the chunk's pairs (gqa_gather_kt_pairs). Register tile NH × 2 vectors.
template <int NH>
void attn_logits_tile_dp(const uint32_t* qp, int64_t np, const float* kt, int64_t j0, float scale, float* lg) {
    __m512 acc[NH][2];
    for (int h = 0; h < NH; ++h) acc[h][0] = acc[h][1] = _mm512_setzero_ps();
    for (int64_t i = 0; i < np; ++i) {
        const __m512i k0 = _mm512_castps_si512(_mm512_loadu_ps(kt + i * kGqaChunk + j0));
        const __m512i k1 = _mm512_castps_si512(_mm512_loadu_ps(kt + i * kGqaChunk + j0 + 16));
        for (int h = 0; h < NH; ++h) {
            const __m512i qv = _mm512_set1_epi32(static_cast<int32_t>(qp[h * np + i]));
            acc[h][0] = _mm512_dpbf16_ps(acc[h][0], (__m512bh)k0, (__m512bh)qv);
            acc[h][1] = _mm512_dpbf16_ps(acc[h][1], (__m512bh)k1, (__m512bh)qv);
        }
    }
    const __m512 vs = _mm512_set1_ps(scale);
    for (int h = 0; h < NH; ++h) {
        _mm512_storeu_ps(lg + h * kGqaChunk + j0, _mm512_mul_ps(acc[h][0], vs));
        _mm512_storeu_ps(lg + h * kGqaChunk + j0 + 16, _mm512_mul_ps(acc[h][1], vs));
    }
}

// attn_logits_tile_dp over the group's G heads (tiles of up to 12) and the chunk's rows [0, nc_pad).
inline void attn_logits_dp(const uint32_t* qp, int64_t G, int64_t np, const float* kt, int64_t nc_pad, float scale,
                           float* lg) {
    for (int64_t h0 = 0; h0 < G; h0 += 12) {
        const uint32_t* q = qp + h0 * np;
        float* l = lg + h0 * kGqaChunk;
        for (int64_t j0 = 0; j0 < nc_pad; j0 += 32) {
            switch (G - h0 < 12 ? G - h0 : 12) {  // a compile-time head count keeps the tile in registers
                case 1: attn_logits_tile_dp<1>(q, np, kt, j0, scale, l); break;
                case 2: attn_logits_tile_dp<2>(q, np, kt, j0, scale, l); break;
                case 3: attn_logits_tile_dp<3>(q, np, kt, j0, scale, l); break;
                case 4: attn_logits_tile_dp<4>(q, np, kt, j0, scale, l); break;
                case 5: attn_logits_tile_dp<5>(q, np, kt, j0, scale, l); break;
                case 6: attn_logits_tile_dp<6>(q, np, kt, j0, scale, l); break;
                case 7: attn_logits_tile_dp<7>(q, np, kt, j0, scale, l); break;
                case 8: attn_logits_tile_dp<8>(q, np, kt, j0, scale, l); break;
                case 9: attn_logits_tile_dp<9>(q, np, kt, j0, scale, l); break;
                case 10: attn_logits_tile_dp<10>(q, np, kt, j0, scale, l); break;
                case 11: attn_logits_tile_dp<11>(q, np, kt, j0, scale, l); break;
                default: attn_logits_tile_dp<12>(q, np, kt, j0, scale, l); break;
            }
        }
    }
}
#endif

// acc [nh, D] += Σ_j w[h, j] · V_j over the n listed rows: blocks of kGqaRowBlock rows (their V rows stay
// in L1 while every dim chunk passes over them) with the heads' tiles in registers; w: [nh, n] f32, row
// stride ws.
template <bool KB>
void pv_rows(const uint8_t* base, const int64_t* rows, int64_t v_off, const float* w, int64_t ws, int64_t n, int64_t nh,
             float* acc, int64_t D) {
    const int64_t ke = KB ? 2 : 4, d_vec = D - D % kLanes;
    // V rows are scattered in the cache: those kGqaPvAhead rows ahead of the block in use are
    // prefetched (the first ones at once).
    gqa_prefetch_lines(base, rows, v_off, 0, kGqaPvAhead < n ? kGqaPvAhead : n, 0, D * ke);
    for (int64_t jb = 0; jb < n; jb += kGqaRowBlock) {
        const int64_t je = jb + kGqaRowBlock < n ? jb + kGqaRowBlock : n;
        const int64_t a0 = jb + kGqaPvAhead < n ? jb + kGqaPvAhead : n, a1 = je + kGqaPvAhead < n ? je + kGqaPvAhead : n;
        switch (nh) {  // a compile-time head count keeps the tiles in registers
            case 1: pv_block<KB, 1>(base, rows, v_off, w, ws, jb, je, acc, D, d_vec, a0, a1); break;
            case 2: pv_block<KB, 2>(base, rows, v_off, w, ws, jb, je, acc, D, d_vec, a0, a1); break;
            case 3: pv_block<KB, 3>(base, rows, v_off, w, ws, jb, je, acc, D, d_vec, a0, a1); break;
            case 4: pv_block<KB, 4>(base, rows, v_off, w, ws, jb, je, acc, D, d_vec, a0, a1); break;
            case 5: pv_block<KB, 5>(base, rows, v_off, w, ws, jb, je, acc, D, d_vec, a0, a1); break;
            case 6: pv_block<KB, 6>(base, rows, v_off, w, ws, jb, je, acc, D, d_vec, a0, a1); break;
            case 7: pv_block<KB, 7>(base, rows, v_off, w, ws, jb, je, acc, D, d_vec, a0, a1); break;
            case 8: pv_block<KB, 8>(base, rows, v_off, w, ws, jb, je, acc, D, d_vec, a0, a1); break;
            case 9: pv_block<KB, 9>(base, rows, v_off, w, ws, jb, je, acc, D, d_vec, a0, a1); break;
            case 10: pv_block<KB, 10>(base, rows, v_off, w, ws, jb, je, acc, D, d_vec, a0, a1); break;
            case 11: pv_block<KB, 11>(base, rows, v_off, w, ws, jb, je, acc, D, d_vec, a0, a1); break;
            default: pv_block<KB, 12>(base, rows, v_off, w, ws, jb, je, acc, D, d_vec, a0, a1); break;
        }
        for (int64_t j = jb; j < je; ++j) {  // the dims past the last full vector
            const uint8_t* v = base + rows[j] + v_off;
            for (int64_t hh = 0; hh < nh; ++hh) {
                const float wj = w[hh * ws + j];
                for (int64_t i = d_vec; i < D; ++i) acc[hh * D + i] += wj * s_load(v, KB, i);
            }
        }
    }
}

#if defined(__AVX512BF16__)
// P·V with vdpbf16ps for bf16 math over bf16 V (`deployed`): P is already bf16 there (ops/qsa_sparse_gqa.h),
// so each P_j·V_j[d] is exact in fp32 and only the sums round, as with the fp32 FMAs, but two rows per
// instruction and no widening of V. Rows j, j+1 are interleaved per dim (unpacklo/hi of their 16-bit
// lanes); a 32-dim tile's two accumulators then hold dims {0–3, 8–11, 16–19, 24–27} and {4–7, 12–15,
// 20–23, 28–31} of the tile, put back in order once at the end (pv_dp_unpermute).
constexpr int64_t kGqaDpDims = 32;  // dims per tile: one 64-byte vector of bf16 per row

template <int NH>
void pv_tile_dp(const uint8_t* base, const int64_t* rows, int64_t v_off, const uint32_t* pp, int64_t pp_stride,
                int64_t jb, int64_t je, float* acc, int64_t D, int64_t d0) {
    __m512 a[NH][2];
    for (int hh = 0; hh < NH; ++hh)
        for (int v = 0; v < 2; ++v) a[hh][v] = _mm512_loadu_ps(acc + hh * D + d0 + v * 16);
    for (int64_t j = jb; j < je; j += 2) {  // jb even; a last single row pairs with zeros (its P partner is 0)
        const __m512i r0 = _mm512_loadu_si512(base + rows[j] + v_off + d0 * 2);
        const __m512i r1 = j + 1 < je ? _mm512_loadu_si512(base + rows[j + 1] + v_off + d0 * 2) : _mm512_setzero_si512();
        const __m512i lo = _mm512_unpacklo_epi16(r0, r1), hi = _mm512_unpackhi_epi16(r0, r1);
        for (int hh = 0; hh < NH; ++hh) {
            const __m512i w = _mm512_set1_epi32(static_cast<int32_t>(pp[hh * pp_stride + j / 2]));
            a[hh][0] = _mm512_dpbf16_ps(a[hh][0], (__m512bh)lo, (__m512bh)w);
            a[hh][1] = _mm512_dpbf16_ps(a[hh][1], (__m512bh)hi, (__m512bh)w);
        }
    }
    for (int hh = 0; hh < NH; ++hh)
        for (int v = 0; v < 2; ++v) _mm512_storeu_ps(acc + hh * D + d0 + v * 16, a[hh][v]);
}

template <int NH>
void pv_block_dp(const uint8_t* base, const int64_t* rows, int64_t v_off, const uint32_t* pp, int64_t pp_stride,
                 int64_t jb, int64_t je, float* acc, int64_t D, int64_t a0, int64_t a1) {
    for (int64_t d0 = 0; d0 < D; d0 += kGqaDpDims) {
        gqa_prefetch_lines(base, rows, v_off, a0, a1, d0 * 2, (d0 + kGqaDpDims) * 2);
        pv_tile_dp<NH>(base, rows, v_off, pp, pp_stride, jb, je, acc, D, d0);
    }
}

// The dims of each 32-dim tile of acc [nh, D] back in order (see pv_tile_dp).
inline void pv_dp_unpermute(float* acc, int64_t nh, int64_t D) {
    const __m512i first = _mm512_setr_epi32(0, 1, 2, 3, 16, 17, 18, 19, 4, 5, 6, 7, 20, 21, 22, 23);
    const __m512i second = _mm512_setr_epi32(8, 9, 10, 11, 24, 25, 26, 27, 12, 13, 14, 15, 28, 29, 30, 31);
    for (int64_t hh = 0; hh < nh; ++hh)
        for (int64_t d0 = 0; d0 < D; d0 += kGqaDpDims) {
            float* t = acc + hh * D + d0;
            const __m512 x = _mm512_loadu_ps(t), y = _mm512_loadu_ps(t + 16);
            _mm512_storeu_ps(t, _mm512_permutex2var_ps(x, first, y));
            _mm512_storeu_ps(t + 16, _mm512_permutex2var_ps(x, second, y));
        }
}

// pv_rows for bf16 P (w holds bf16 values as f32) and bf16 V, D a multiple of kGqaDpDims; acc stays in the
// tiles' dim order (pv_dp_unpermute). Each head's row of w is packed in place into ⌈n/2⌉ bf16 pairs
// (P_2i | P_2i+1 << 16; slot i is written after slots 2i and 2i + 1 ≥ i are read), so w is no longer f32
// afterwards.
inline void pv_rows_dp(const uint8_t* base, const int64_t* rows, int64_t v_off, float* w, int64_t ws, int64_t n,
                       int64_t nh, float* acc, int64_t D) {
    const int64_t pairs = (n + 1) / 2;
    for (int64_t hh = 0; hh < nh; ++hh) {
        float* row = w + hh * ws;
        for (int64_t i = 0; i < pairs; ++i) {
            uint32_t b0, b1 = 0;
            __builtin_memcpy(&b0, row + 2 * i, 4);
            if (2 * i + 1 < n) __builtin_memcpy(&b1, row + 2 * i + 1, 4);
            const uint32_t packed = (b0 >> 16) | (b1 & 0xffff0000u);  // exact: P is bf16 (low halves are 0)
            __builtin_memcpy(row + i, &packed, 4);
        }
    }
    const uint32_t* pp = reinterpret_cast<const uint32_t*>(w);
    gqa_prefetch_lines(base, rows, v_off, 0, kGqaPvAhead < n ? kGqaPvAhead : n, 0, D * 2);
    for (int64_t jb = 0; jb < n; jb += kGqaRowBlock) {
        const int64_t je = jb + kGqaRowBlock < n ? jb + kGqaRowBlock : n;
        const int64_t a0 = jb + kGqaPvAhead < n ? jb + kGqaPvAhead : n, a1 = je + kGqaPvAhead < n ? je + kGqaPvAhead : n;
        switch (nh) {  // a compile-time head count keeps the tiles in registers
            case 1: pv_block_dp<1>(base, rows, v_off, pp, ws, jb, je, acc, D, a0, a1); break;
            case 2: pv_block_dp<2>(base, rows, v_off, pp, ws, jb, je, acc, D, a0, a1); break;
            case 3: pv_block_dp<3>(base, rows, v_off, pp, ws, jb, je, acc, D, a0, a1); break;
            case 4: pv_block_dp<4>(base, rows, v_off, pp, ws, jb, je, acc, D, a0, a1); break;
            case 5: pv_block_dp<5>(base, rows, v_off, pp, ws, jb, je, acc, D, a0, a1); break;
            case 6: pv_block_dp<6>(base, rows, v_off, pp, ws, jb, je, acc, D, a0, a1); break;
            case 7: pv_block_dp<7>(base, rows, v_off, pp, ws, jb, je, acc, D, a0, a1); break;
            case 8: pv_block_dp<8>(base, rows, v_off, pp, ws, jb, je, acc, D, a0, a1); break;
            case 9: pv_block_dp<9>(base, rows, v_off, pp, ws, jb, je, acc, D, a0, a1); break;
            case 10: pv_block_dp<10>(base, rows, v_off, pp, ws, jb, je, acc, D, a0, a1); break;
            case 11: pv_block_dp<11>(base, rows, v_off, pp, ws, jb, je, acc, D, a0, a1); break;
            default: pv_block_dp<12>(base, rows, v_off, pp, ws, jb, je, acc, D, a0, a1); break;
        }
    }
}
#endif

inline float qsa_sigmoid(float x) { return 1.0f / (1.0f + __builtin_expf(-x)); }

#if defined(__AMX_BF16__)
// ---- the tile path (amx_bf16 level; attention_kernels_impl.inl attn_tiles_chunk) ---------------------------
//
// bf16 q, K and V with math bf16: every product of the attention has bf16 factors (P_j = bf16(p_j)), and the
// tile unit forms the same fp32 products as the FMAs (it reads bf16 subnormals as zero, a change below
// 2^-126·|q|·D). The group's heads are one group of 16 (12 for QSA), the rows go in chunks of
// kQsaGqaTileChunk: K rows copied into kb, V rows interleaved in pairs into kv straight from the cache.

// Prefetches (into L2) the K|V lines of the listed rows after the chunk being computed.
struct QsaNextRows {
    const uint8_t* base;
    const int64_t* rows;
    int64_t off, bytes, n, j;
    void prefetch(int64_t count) {
        const int64_t end = j + count < n ? j + count : n;
        gqa_prefetch_lines(base, rows, off, j, end, 0, bytes);
        j = end;
    }
};

// The item's attention through the tiles; acc [16, D] and sum [16] (max after it) hold the result for the
// output stage, in the layout of the FMA path's acc and running sum.
inline void sparse_gqa_item_tiles(const QsaSparseGqaParams& p, const QsaGqaScratch& s, int64_t n, int64_t G, int64_t D,
                                  int64_t k_off, int64_t v_off) {
    const int64_t CT = kQsaGqaTileChunk;
    float* acc = s.tiles;
    float* mx = acc + 16 * D;
    float* sum = mx + 16;
    float* qt = sum + 16;
    float* kb = qt + 8 * D;
    float* kv = kb + CT * D / 2;
    float* lt = kv + CT * D / 2;
    float* pt = lt + 16 * CT;
    float* pb = pt + 16 * CT;
    const AttnTileBuffers w{reinterpret_cast<uint32_t*>(qt), reinterpret_cast<uint16_t*>(kb), reinterpret_cast<uint16_t*>(kv),
                            reinterpret_cast<uint16_t*>(pb), lt, pt};
    const AttnSoftmaxState st{acc, mx, sum};
    for (int64_t h = 0; h < 16; ++h) {  // no sink: M starts at −inf, the sum at 0
        mx[h] = -__builtin_inff(), sum[h] = 0.0f;
        for (int64_t i = 0; i < D; ++i) acc[h * D + i] = 0.0f;
    }
    amx_tiles_begin();
    attn_q_pairs_t(s.q, G, D, w.qt);
    const uint8_t* base = p.kv.base;
    if (n > 0) gqa_prefetch_lines(base, s.rows, k_off, 0, n < CT ? n : CT, 0, 2 * D * 2);
    for (int64_t c0 = 0; c0 < n; c0 += CT) {
        const int64_t nc = n - c0 < CT ? n - c0 : CT, nc_pad = attn_tile_rows(nc);
        const int64_t* rows = s.rows + c0;
        for (int64_t c = 0; c < nc_pad; c += 2) {
            const uint16_t* k0 = c < nc ? reinterpret_cast<const uint16_t*>(base + rows[c] + k_off) : nullptr;
            const uint16_t* k1 = c + 1 < nc ? reinterpret_cast<const uint16_t*>(base + rows[c + 1] + k_off) : nullptr;
            for (int64_t i = 0; i < D; i += 32) {
                _mm512_storeu_si512(w.kb + c * D + i, k0 ? _mm512_loadu_si512(k0 + i) : _mm512_setzero_si512());
                _mm512_storeu_si512(w.kb + (c + 1) * D + i, k1 ? _mm512_loadu_si512(k1 + i) : _mm512_setzero_si512());
            }
            const uint16_t* v0 = k0 ? reinterpret_cast<const uint16_t*>(base + rows[c] + v_off) : nullptr;
            const uint16_t* v1 = k1 ? reinterpret_cast<const uint16_t*>(base + rows[c + 1] + v_off) : nullptr;
            if (v0) attn_interleave_row_pair(v0, v1, D, w.kv + c * D);
            else
                for (int64_t i = 0; i < 2 * D; i += 32) _mm512_storeu_si512(w.kv + c * D + i, _mm512_setzero_si512());
        }
        QsaNextRows next{base, s.rows, k_off, 2 * D * 2, n, c0 + nc};
        attn_tiles_chunk(G, D, D, nc, CT, p.scale, w, st, next);
    }
    amx_tiles_end();
}
#endif  // __AMX_BF16__

// The chunk's logits lg [G, kGqaChunk] in fp32: K transposed into kt as f32 (gqa_gather_kt), then register
// tiles of heads × 2·kLanes rows over d (broadcast q[h, d], FMA with kt[d]), no horizontal reduction.
template <bool KB>
void gqa_logits_f32(const QsaSparseGqaParams& p, const QsaGqaScratch& s, int64_t k_off, int64_t c0, int64_t nc,
                    int64_t nc_pad, int64_t n, int64_t G, int64_t D) {
    gqa_gather_kt<KB>(p.kv.base, s.rows + c0, k_off, nc, nc_pad, n - c0, D, s.kt);
    // QSA's group of 12 heads is one block on AVX-512 (attn_head_block): each kt vector feeds 12 FMAs.
    for (int64_t h0 = 0, nb = 0; h0 < G; h0 += nb) {
        nb = attn_head_block(G, h0);
        attn_logits_heads(static_cast<int>(nb), s.q + h0 * D, D, s.kt, kGqaChunk, nc_pad, p.scale, s.lg + h0 * kGqaChunk);
    }
}

// The item's attention through the FMA (or vdpbf16ps) tiles, chunk by chunk (see sparse_gqa_item): acc
// [G, D] and the running sum (stats + G) hold the result.
template <bool KB, bool BM>
void gqa_chunks_fma(const QsaSparseGqaParams& p, const QsaGqaScratch& s, int64_t n, int64_t G, int64_t D, int64_t k_off,
                    int64_t v_off, bool qb) {
    const int64_t ke = KB ? 2 : 4;
#if defined(__AVX512BF16__)
    const bool dp = KB && BM && D % kGqaDpDims == 0;     // P·V with vdpbf16ps (pv_rows_dp)
    const bool dp_qk = KB && qb && D % kGqaDpDims == 0;  // the logits too (attn_logits_dp)
#else
    constexpr bool dp_qk = false;
    (void)qb;
#endif
    float* acc = s.acc;
    float* run_max = s.stats;
    float* run_sum = s.stats + G;
    for (int64_t i = 0; i < G * D; ++i) acc[i] = 0.0f;
    // M starts at −inf, not −FLT_MAX: rows whose logits are all −inf (inf inputs) then give −inf − (−inf) =
    // NaN, as the formula does, rather than an average of their values.
    for (int64_t hh = 0; hh < G; ++hh) run_max[hh] = -__builtin_inff(), run_sum[hh] = 0.0f;
    if (n > 0) gqa_prefetch_lines(p.kv.base, s.rows, k_off, 0, n < kGqaChunk ? n : kGqaChunk, 0, 2 * D * ke);
    for (int64_t c0 = 0; c0 < n; c0 += kGqaChunk) {
        const int64_t nc = n - c0 < kGqaChunk ? n - c0 : kGqaChunk;
        const int64_t nc_pad = (nc + 2 * kLanes - 1) / (2 * kLanes) * (2 * kLanes);
#if defined(__AVX512BF16__)
        if (dp_qk) {
            gqa_gather_kt_pairs(p.kv.base, s.rows + c0, k_off, nc, nc_pad, n - c0, D, s.kt);
            attn_logits_dp(reinterpret_cast<const uint32_t*>(s.q), G, D / 2, s.kt, nc_pad, p.scale, s.lg);
        }
#endif
        if (!dp_qk) gqa_logits_f32<KB>(p, s, k_off, c0, nc, nc_pad, n, G, D);
        // Online softmax over the chunk: p = exp(l − M) (P = bf16(p) for bf16 math), Σ p unrounded.
        for (int64_t hh = 0; hh < G; ++hh) {
            float* l = s.lg + hh * kGqaChunk;
            float m = run_max[hh];
            {  // the max per lane, then over the lanes (max is exact: any order gives the same M)
                VF vmax = vf_set1(m);
                int64_t j = 0;
                for (; j + kLanes <= nc; j += kLanes) vmax = vf_max(vf_load(l + j), vmax);
                float lanes[kLanes];
                vf_store(lanes, vmax);
                for (int64_t i = 0; i < kLanes; ++i) m = lanes[i] > m ? lanes[i] : m;
                for (; j < nc; ++j) m = l[j] > m ? l[j] : m;
            }
            if (m > run_max[hh]) {  // rescale what the earlier chunks accumulated (nothing before the first)
                const float alpha = c0 > 0 ? __builtin_expf(run_max[hh] - m) : 0.0f;
                const VF va = vf_set1(alpha);
                float* a = acc + hh * D;
                int64_t i = 0;
                for (; i + kLanes <= D; i += kLanes) vf_store(a + i, vf_mul(vf_load(a + i), va));
                for (; i < D; ++i) a[i] *= alpha;
                run_sum[hh] *= alpha;
                run_max[hh] = m;
            }
            const VF vm = vf_set1(m);
            VF vsum = vf_zero();
            int64_t j = 0;
            for (; j + kLanes <= nc; j += kLanes) {
                VF e = qsa_vf_exp_nonpos(vf_sub(vf_load(l + j), vm));
                vsum = vf_add(vsum, e);
                if constexpr (BM) e = vf_round_bf16(e);
                vf_store(l + j, e);
            }
            float sum = vf_sum(vsum);
            for (; j < nc; ++j) {
                float e = __builtin_expf(l[j] - m);
                sum += e;
                if constexpr (BM) e = s_bf16_to_f32(s_f32_to_bf16(e));
                l[j] = e;
            }
            run_sum[hh] += sum;
        }
        // acc += P·V over the chunk's rows, kGqaHeadBatch heads at a time.
        for (int64_t hb = 0; hb < G; hb += kGqaHeadBatch) {
            const int64_t nh = G - hb < kGqaHeadBatch ? G - hb : kGqaHeadBatch;
#if defined(__AVX512BF16__)
            if (dp) {
                pv_rows_dp(p.kv.base, s.rows + c0, v_off, s.lg + hb * kGqaChunk, kGqaChunk, nc, nh, acc + hb * D, D);
                continue;
            }
#endif
            pv_rows<KB>(p.kv.base, s.rows + c0, v_off, s.lg + hb * kGqaChunk, kGqaChunk, nc, nh, acc + hb * D, D);
        }
    }
#if defined(__AVX512BF16__)
    if (dp) pv_dp_unpermute(acc, G, D);
#endif
}

// One (token, KV head) item in one pass over the listed rows, chunk by chunk (split-K as vLLM's kernel,
// qsa.md §9 item 5): the chunk's K transposed once into kt while the next chunk's K|V lines are
// prefetched; the logits of all the group's heads (register tiles of heads × rows, no horizontal sums);
// the online softmax (running max M_h and sum; when M_h grows, the accumulators and the sum are
// rescaled by exp(M_old − M_new) in fp32); P = exp(l − M_h) (bf16 for bf16 math) and P·V of the chunk's
// rows in register tiles of kGqaHeadBatch heads. Each row's K and V, adjacent in the entry, are read
// once, while they are in cache.
template <bool KB, bool BM>
void sparse_gqa_item(const QsaSparseGqaParams& p, int64_t t, int64_t g, const QsaGqaScratch& s) {
    const int64_t D = p.head_dim, G = p.n_heads / p.n_kv_heads;
    const int64_t ke = KB ? 2 : 4;
    const int64_t q_row = p.tables.token_request[t];
    // Rows listed for the token. Rows are mostly ascending runs: the block of the previous row is
    // reused while the next stays inside it (no division per row).
    int64_t n = 0;
    const int32_t* idx = p.indices + t * p.index_row_stride;
    const int32_t* table = p.tables.block_table + q_row * p.tables.block_table_stride;
    int64_t block_first = 0, block_end = 0, block_base = 0;  // positions [first, end) live at base
    for (int64_t j = 0; j < p.n_indices; ++j) {
        const int64_t pos = idx[j];
        if (pos < 0) continue;
        if (pos < block_first || pos >= block_end) {
            const int64_t b = pos / p.kv.block_size;
            block_first = b * p.kv.block_size;
            block_end = block_first + p.kv.block_size;
            block_base = table[b] * p.kv.block_bytes;
        }
        s.rows[n++] = block_base + (pos - block_first) * p.kv.entry_bytes;
    }
    const bool qb = p.q_type == DType::bf16;
#if defined(__AMX_BF16__)
    const bool tiles = s.tiles && KB && BM && qb && D % 64 == 0 && G <= 16;  // sparse_gqa_item_tiles
#else
    constexpr bool tiles = false;
#endif
#if defined(__AVX512BF16__)
    const bool dp_qk = !tiles && KB && qb && D % kGqaDpDims == 0;  // the logits with vdpbf16ps (attn_logits_dp)
#else
    constexpr bool dp_qk = false;
#endif
    // The group's queries: as f32, or (dp_qk) as their bf16 pairs [G, D/2] in the same buffer.
    for (int64_t hh = 0; hh < G; ++hh) {
        const char* qh = static_cast<const char*>(p.q) + (t * p.q_token_stride + (g * G + hh) * p.q_head_stride) * (qb ? 2 : 4);
        if (dp_qk) __builtin_memcpy(s.q + hh * (D / 2), qh, static_cast<unsigned long>(D) * 2);
        else
            for (int64_t i = 0; i < D; ++i) s.q[hh * D + i] = s_load(qh, qb, i);
    }
    const int64_t k_off = 2 * g * D * ke, v_off = (2 * g + 1) * D * ke;
    float* acc = s.acc;
    float* run_sum = s.stats + G;
#if defined(__AMX_BF16__)
    if (tiles) {
        sparse_gqa_item_tiles(p, s, n, G, D, k_off, v_off);
        acc = s.tiles;
        run_sum = s.tiles + 16 * D + 16;
    }
#endif
    if (!tiles) gqa_chunks_fma<KB, BM>(p, s, n, G, D, k_off, v_off, qb);
    // / Σ p, the gate, the store.
    const bool gb = p.gate_type == DType::bf16, ob = p.out_type == DType::bf16;
    for (int64_t hh = 0; hh < G; ++hh) {
        const int64_t h = g * G + hh;
        const char* gate = p.gate ? static_cast<const char*>(p.gate) +
                                        (t * p.gate_token_stride + h * p.gate_head_stride) * (gb ? 2 : 4)
                                  : nullptr;
        char* out = static_cast<char*>(p.out) + (t * p.out_token_stride + h * p.out_head_stride) * (ob ? 2 : 4);
        const float inv = n > 0 ? 1.0f / run_sum[hh] : 0.0f;
        // Vectors of kLanes dims (only the sigmoid per lane: it keeps expf's rounding), then the tail.
        int64_t i = 0;
        for (; i + kLanes <= D; i += kLanes) {
            VF y = vf_mul(vf_load(acc + hh * D + i), vf_set1(inv));
            float sg[kLanes];
            if (gate)
                for (int64_t l = 0; l < kLanes; ++l) sg[l] = qsa_sigmoid(s_load(gate, gb, i + l));
            if constexpr (BM) {
                y = vf_round_bf16(y);
                if (gate) y = vf_round_bf16(vf_mul(y, vf_round_bf16(vf_load(sg))));
            } else if (gate) {
                y = vf_mul(y, vf_load(sg));
            }
            if (ob) vf_store_bf16(reinterpret_cast<uint16_t*>(out) + i, y);
            else vf_store(reinterpret_cast<float*>(out) + i, y);
        }
        for (; i < D; ++i) {
            float y = acc[hh * D + i] * inv;
            if constexpr (BM) {
                y = s_bf16_to_f32(s_f32_to_bf16(y));
                if (gate) {
                    const float sg = s_bf16_to_f32(s_f32_to_bf16(qsa_sigmoid(s_load(gate, gb, i))));
                    y = s_bf16_to_f32(s_f32_to_bf16(y * sg));
                }
            } else if (gate) {
                y = y * qsa_sigmoid(s_load(gate, gb, i));
            }
            s_store(out, ob, i, y);
        }
    }
}

void sparse_gqa_items(const QsaSparseGqaParams& p, int64_t i0, int64_t i1, const QsaGqaScratch& s) {
    const bool kb = p.kv_type == DType::bf16, bm = p.math == AttentionMath::bf16;
    for (int64_t it = i0; it < i1; ++it) {
        const int64_t t = it / p.n_kv_heads, g = it % p.n_kv_heads;
        if (kb && bm) sparse_gqa_item<true, true>(p, t, g, s);
        else if (kb) sparse_gqa_item<true, false>(p, t, g, s);
        else if (bm) sparse_gqa_item<false, true>(p, t, g, s);
        else sparse_gqa_item<false, false>(p, t, g, s);
    }
}

}  // namespace
}  // namespace sieve::cpu::SIEVE_CPU_ISA_NS

namespace sieve::cpu {

extern const QsaKernels SIEVE_QSA_TABLE = {
    .isa_name = SIEVE_QSA_ISA_NAME,
#if defined(__AMX_BF16__)
    .tiles = true,
#else
    .tiles = false,
#endif
    .pool_groups = SIEVE_CPU_ISA_NS::pool_groups,
    .sparse_gqa_items = SIEVE_CPU_ISA_NS::sparse_gqa_items,
};

}  // namespace sieve::cpu
