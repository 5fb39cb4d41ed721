// Kernel bodies of the linear register tiles and input conversions (ops/linear.h, cpu_linear.h).
// A part of kernels_impl.inl, which includes it inside namespace sieve::cpu::<isa>::{anonymous} once per
// ISA (simd.h "ODR safety"); not a standalone header.

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

// y[row, col … col + kLanes) = out + bias, cast once; columns from a.n on (the last panel's padding) are
// not written.
inline void linear_store_y(const LinearKernelArgs& a, int64_t yrow, int64_t col, VF out) {
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
        // On AVX2 the codes decode through binary16 (vf_load_e4m3): with `dev/bench_ops linear` (2 threads,
        // three interleaved rounds, medians) the V4 wq_a, wq_b and wo_b GEMVs ran 1.3-1.4× faster at one
        // row and 1.15-1.25× at four than with the integer decode (vf_e4m3_decode).
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
                        wv[p * kPanelVecs + v] = vf_load_e4m3(w[p] + k * kPanelCols + v * kLanes);
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
    for (int r = 0; r < MR; ++r)
        for (int p = 0; p < NP; ++p)
            for (int v = 0; v < kPanelVecs; ++v)
                linear_store_y(a, (row0 + r) * a.y_stride, (panel0 + p) * kPanelCols + v * kLanes, acc[r][p * kPanelVecs + v]);
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

// Rows [r0, r1) in register-tile groups: run.template operator()<MR>(row) for groups of Max rows, then 4, then
// the last 1–3.
template <int Max = kMaxRows, typename Run>
void for_row_groups(int64_t r0, int64_t r1, Run&& run) {
    int64_t r = r0;
    for (; r + Max <= r1; r += Max) run.template operator()<Max>(r);
    if constexpr (Max > 4) {
        if (r + 4 <= r1) {
            run.template operator()<4>(r);
            r += 4;
        }
    }
    if constexpr (Max > 1) {
        switch (r1 - r) {
            case 1: run.template operator()<1>(r); break;
            case 2: if constexpr (Max > 2) run.template operator()<2>(r); break;
            case 3: if constexpr (Max > 3) run.template operator()<3>(r); break;
            default: break;
        }
    }
}

template <PanelFormat F>
void linear_tile_t(const LinearKernelArgs& a, int64_t r0, int64_t r1, int64_t p0, int64_t p1) {
    for_row_groups(r0, r1, [&]<int MR>(int64_t r) { linear_rows<MR, F>(a, r, p0, p1); });
}

// Panels whose weights are decoded in the kernel (fp8 by the arithmetic e4m3 decode of the levels without the
// byte tables; bf16 pairs on AVX2) over more rows than one register tile. The register tiles decode every
// weight once per tile of kMaxRows rows, and at 4–8 decoded vectors per 8–16 FMAs the decode, not the FMAs,
// bounds them: from 4 rows to 256 the avx2 GEMM ran at 55–65 GFLOP/s with fp8 weights and 130 with bf16
// ones, of the 200 of its FMAs. Here each panel's weights are decoded once per chunk of kDecodeChunk k into
// an f32 buffer (16 KiB: L1) that every row group of up to kSharedTaskRows rows then reads, in groups of
// kSharedRows rows (AVX2: 6 rows × 2 vectors = 12 accumulators, the weight pair and a broadcast of its 16
// registers, where the register tile holds 4 rows beside the decode). A row group's accumulators pass from
// chunk to chunk through memory (f32 stored and loaded: exact), and each row takes the same FMAs on the same
// values in the same k order as in the register tile, so its result is bit for bit the register tile's,
// whatever rows share the task (LinearConformance.RowsDoNotDependOnTheBatch). Measured with `dev/bench_ops
// linear` (avx2, 2 threads, three interleaved rounds, medians, against the 4-row register tiles with the fp8
// decode shared as here): bf16 [4096, 4096] 1.3× at 16 rows, 1.6–1.7× at 64–256 (126–144 GFLOP/s); fp8
// 1.1–1.3× at 8–256 rows.
constexpr int64_t kDecodeChunk = 256;    // k per decode: a multiple of the 128-k fp8 scale blocks, even
constexpr int64_t kSharedTaskRows = 64;  // rows per decode (the dispatcher's task, cpu_linear.cpp)
static_assert(kDecodeChunk % 128 == 0, "a chunk holds whole scale blocks and whole k pairs");
#if defined(__AVX2__) && !defined(__AVX512F__)
constexpr int kSharedRows = 6;
#else
constexpr int kSharedRows = kMaxRows;
#endif

// decoded[(k − k0)·kPanelCols + c] = W[k, c] as f32 for the panel's k in [k0, k1) (exact widening). Not
// inlined: the e4m3 decode's constants, hoisted out of the caller's loops, took two of the 16 ymm registers
// that the 6-row FMA loop needs (an accumulator then went through the stack every k: half the speed).
template <PanelFormat F>
__attribute__((noinline)) void decode_panel_chunk(const char* panel, int64_t k0, int64_t k1, float* decoded) {
    if constexpr (F == PanelFormat::fp8) {
        const uint8_t* w = reinterpret_cast<const uint8_t*>(panel);
        for (int64_t k = k0; k < k1; ++k)
            for (int v = 0; v < kPanelVecs; ++v)
                vf_store(decoded + (k - k0) * kPanelCols + v * kLanes, vf_load_e4m3(w + k * kPanelCols + v * kLanes));
    } else {  // bf16 pairs: the low half of each 32-bit word is k, the high half k + 1 (k0 even)
        const int32_t* w = reinterpret_cast<const int32_t*>(panel);
        const VI hi_mask = vi_set1(static_cast<int32_t>(0xffff0000u));
        for (int64_t k = k0; k < k1; k += 2)
            for (int v = 0; v < kPanelVecs; ++v) {
                const VI pair = vi_load(w + (k / 2) * kPanelCols + v * kLanes);
                vf_store(decoded + (k - k0) * kPanelCols + v * kLanes, vf_from_bits(vi_shl<16>(pair)));
                if (k + 1 < k1) vf_store(decoded + (k + 1 - k0) * kPanelCols + v * kLanes, vf_from_bits(vi_and(pair, hi_mask)));
            }
    }
}

// Rows [row0, row0 + MR) of one panel over the decoded k chunk [k0, k1), their accumulators in `acc_rows`.
template <int MR, PanelFormat F>
void decoded_chunk_rows(const LinearKernelArgs& a, int64_t row0, const float* decoded, int64_t k0, int64_t k1,
                        const float* scales, float (*acc_rows)[kPanelCols]) {
    VF acc[MR][kPanelVecs];
    for (int r = 0; r < MR; ++r)
        for (int v = 0; v < kPanelVecs; ++v) acc[r][v] = vf_load(acc_rows[r] + v * kLanes);
    // The factor of each k: x, or (fp8) x·S of the chunk's k, multiplied a vector at a time (the register
    // tile's scalar x·S: the same products), so that the FMA loop broadcasts them straight from memory.
    constexpr bool scaled = F == PanelFormat::fp8;
    alignas(64) float xs[scaled ? MR : 1][scaled ? kDecodeChunk : 1];
    const float* xk[MR];  // xk[r][k − xk_first] is row r's factor of k
    const int64_t xk_first = scaled ? k0 : 0;
    for (int r = 0; r < MR; ++r) {
        const float* xr = a.x + (row0 + r) * a.x_stride;
        if constexpr (scaled) {
            for (int64_t k = k0; k < k1; k += kLanes) {
                const int64_t n = s_min(kLanes, k1 - k);
                const VF sc = vf_set1(scales[k / 128]);  // kLanes divides 128: one scale block a vector
                if (n == kLanes) {
                    vf_store(xs[r] + (k - k0), vf_mul(vf_load(xr + k), sc));
                } else {
                    for (int64_t i = 0; i < n; ++i) xs[r][k - k0 + i] = xr[k + i] * scales[k / 128];
                }
            }
            xk[r] = xs[r];
        } else {
            xk[r] = xr;
        }
    }
    for (int64_t k = k0; k < k1; ++k) {
        VF wv[kPanelVecs];
        for (int v = 0; v < kPanelVecs; ++v) wv[v] = vf_load(decoded + (k - k0) * kPanelCols + v * kLanes);
        for (int r = 0; r < MR; ++r) {
            const VF xb = vf_set1(xk[r][k - xk_first]);
            for (int v = 0; v < kPanelVecs; ++v) acc[r][v] = vf_fma(wv[v], xb, acc[r][v]);
        }
    }
    for (int r = 0; r < MR; ++r)
        for (int v = 0; v < kPanelVecs; ++v) vf_store(acc_rows[r] + v * kLanes, acc[r][v]);
}

template <PanelFormat F>
void linear_shared_decode(const LinearKernelArgs& a, int64_t r0, int64_t r1, int64_t p0, int64_t p1) {
    alignas(64) float decoded[kDecodeChunk * kPanelCols];
    alignas(64) float acc_rows[kSharedTaskRows][kPanelCols];
    const int64_t K = a.k, n_kb = (K + 127) / 128;
    for (int64_t p = p0; p < p1; ++p) {
        const char* const panel = static_cast<const char*>(a.panels) + p * a.panel_bytes;
        const float* const scales = F == PanelFormat::fp8 ? a.fp8_scale + (p * kPanelCols / 128) * n_kb : nullptr;
        for (int64_t rb = r0; rb < r1; rb += kSharedTaskRows) {
            const int64_t re = s_min(r1, rb + kSharedTaskRows);
            for (int64_t r = rb; r < re; ++r)
                for (int64_t c = 0; c < kPanelCols; ++c) acc_rows[r - rb][c] = 0.0f;
            for (int64_t k0 = 0; k0 < K; k0 += kDecodeChunk) {
                const int64_t k1 = s_min(K, k0 + kDecodeChunk);
                decode_panel_chunk<F>(panel, k0, k1, decoded);
                for_row_groups<kSharedRows>(rb, re, [&]<int MR>(int64_t r) {
                    decoded_chunk_rows<MR, F>(a, r, decoded, k0, k1, scales, acc_rows + (r - rb));
                });
            }
            for (int64_t r = rb; r < re; ++r)
                for (int v = 0; v < kPanelVecs; ++v)
                    linear_store_y(a, r * a.y_stride, p * kPanelCols + v * kLanes, vf_load(acc_rows[r - rb] + v * kLanes));
        }
    }
}

#if defined(__AMX_TILE__)
// amx_bf16: the bf16 pair panels (with bf16 activations: dpbf16) and the fp8 pair panels as AMX tile
// products, C[rows × 16 columns] += A[rows × 16 k pairs] · B[16 k pairs × 16 columns]. The pair panels are
// already the tiles' B layout (kernels.h: 64 bytes a k pair, two bf16 per column), so a bf16 panel's B tile
// is 16 of its rows; an fp8 panel's is decoded group by group (fp8_pairs_tile's table decode) into a
// buffer (1 KiB a tile). A is 16 pairs of each activation row. fp8: per 128-k block the C tiles start from
// zero and are added to fp32 accumulators times the block's scale (a power of two), as fp8_pairs_tile does. The
// products are bf16 with fp32 sums (inputs and outputs subnormal-flushed, as vdpbf16ps): the dpbf16
// paths' numerics, summed in another order (ops/linear.h leaves it open). Every row count takes this path,
// so that a row's result does not depend on the rows batched with it (the tile's sums run in the same
// order for each row, whatever the tile's height or the row blocks beside it:
// LinearConformance.RowsDoNotDependOnTheBatch).
constexpr int64_t kAmxPairs = 16;  // k pairs of one tile product

// B rows [pair0, pair0 + 16) of panel `panel` into buf (16 × 64 bytes), zero past k2n pairs.
__attribute__((target("avx512vbmi"))) void amx_b_rows(const LinearKernelArgs& a, int64_t panel, int64_t pair0, int64_t k2n, uint8_t* buf) {
    const uint8_t* w = static_cast<const uint8_t*>(a.panels) + panel * a.panel_bytes;
    if (a.format == PanelFormat::bf16_pairs) {
        for (int64_t j = 0; j < kAmxPairs; ++j) {
            const __m512i row = pair0 + j < k2n ? _mm512_loadu_si512(w + (pair0 + j) * 64) : _mm512_setzero_si512();
            _mm512_store_si512(buf + j * 64, row);
        }
        return;
    }
    const __m512i hi0 = _mm512_load_si512(kFp8Tables.hi), hi1 = _mm512_load_si512(kFp8Tables.hi + 64);
    const __m512i lo0 = _mm512_load_si512(kFp8Tables.lo), lo1 = _mm512_load_si512(kFp8Tables.lo + 64);
    const __m512i sign = _mm512_set1_epi8(static_cast<char>(0x80));
    for (int64_t j = 0; j < kAmxPairs; j += 2) {  // a group: pairs pair0 + j, pair0 + j + 1 (pair0 is even)
        __m512i wa = _mm512_setzero_si512(), wb = _mm512_setzero_si512();
        if (pair0 + j < k2n) {  // the group is in the panel (an odd K2's last one half zero bytes)
            const __m512i codes = _mm512_loadu_si512(w + (pair0 + j) / 2 * 64);
            prefetch_panel_ahead(w + (pair0 + j) / 2 * 64);
            const __m512i hi = _mm512_ternarylogic_epi32(_mm512_permutex2var_epi8(hi0, codes, hi1), codes, sign, 0xf8);
            const __m512i lo = _mm512_permutex2var_epi8(lo0, codes, lo1);
            wa = _mm512_unpacklo_epi8(lo, hi);
            wb = _mm512_unpackhi_epi8(lo, hi);
        }
        _mm512_store_si512(buf + j * 64, wa);
        _mm512_store_si512(buf + (j + 1) * 64, wb);
    }
}

// Rows [r0, r1) × panels [p, p + np) (np ≤ 2; fp8: one 128-column scale block; at most kAmxRowBlocks
// blocks of 16 rows) on tiles: C tiles 0 and 1, A tile 2, B tiles 3 and 4. The k pairs go in blocks of
// kAmxBlockPairs (fp8: one 128-k scale block): each block's B tiles are decoded once (fp8) and then taken
// by every row block in turn, so a prefill chunk decodes and reads its weights once per 16·kAmxRowBlocks
// rows instead of once per 16. A row block's C tiles carry over from one k block to the next through its
// fp32 accumulators (bf16: stored and loaded again, exact; fp8: added times the block's scale), so each row
// block runs the same tile products in the same order as it would alone. 64 rows: the dispatcher's task
// (cpu_linear.cpp); 128-row tasks measured slower where K is large (their activation pairs outgrow L2).
constexpr int kAmxRowBlocks = 4;
constexpr int64_t kAmxBlockPairs = 64;
static_assert(kAmxBlockPairs % kAmxPairs == 0 && kAmxBlockPairs * 2 == 128, "an fp8 scale block is one k block");

__attribute__((target("avx512vbmi"))) void linear_amx_rows(const LinearKernelArgs& a, int64_t r0, int64_t r1, int64_t p, int np) {
    constexpr int kSteps = static_cast<int>(kAmxBlockPairs / kAmxPairs);
    alignas(64) uint8_t b_buf[2][kSteps][kAmxPairs * 64];
    alignas(64) uint32_t a_buf[16][kAmxPairs];
    alignas(64) float c_buf[16][16];
    alignas(64) float acc[kAmxRowBlocks][2][16][16];
    const bool fp8 = a.format == PanelFormat::fp8_pairs;
    const int64_t K = a.k, k2n = (K + 1) / 2, n_kb = (K + 127) / 128;
    const int n_rb = static_cast<int>((r1 - r0 + 15) / 16);
    const uint8_t* const panel[2] = {static_cast<const uint8_t*>(a.panels) + p * a.panel_bytes,
                                     static_cast<const uint8_t*>(a.panels) + (p + 1) * a.panel_bytes};
    int configured_rows = 0;
    for (int64_t kb = 0; kb * kAmxBlockPairs < k2n; ++kb) {
        const int64_t first = kb * kAmxBlockPairs, end = s_min(k2n, first + kAmxBlockPairs);
        const int steps = static_cast<int>((end - first + kAmxPairs - 1) / kAmxPairs);
        // A bf16 panel's whole 16-pair steps are its own rows; the rest (fp8, a last partial step) decoded.
        auto direct = [&](int st) { return !fp8 && first + (st + 1) * kAmxPairs <= k2n; };
        for (int q = 0; q < np; ++q)
            for (int st = 0; st < steps; ++st)
                if (!direct(st)) amx_b_rows(a, p + q, first + st * kAmxPairs, k2n, b_buf[q][st]);
        const float scale = fp8 ? a.fp8_scale[(p * kPanelCols / 128) * n_kb + kb] : 1.0f;
        for (int rb = 0; rb < n_rb; ++rb) {
            const int64_t row = r0 + 16 * rb;
            const int m = static_cast<int>(s_min(int64_t{16}, r1 - row));
            if (m != configured_rows) {  // (loading a configuration clears the tiles: every state is in acc)
                AmxTileConfig config;
                for (int t : {0, 1, 2}) config.rows[t] = static_cast<uint8_t>(m);
                _tile_loadconfig(&config);
                configured_rows = m;
            }
            if (fp8 || kb == 0) {
                _tile_zero(0);
                _tile_zero(1);
            } else {
                _tile_loadd(0, acc[rb][0], 64);
                if (np > 1) _tile_loadd(1, acc[rb][1], 64);
            }
            const uint32_t* x = a.x_pairs + row * a.x_pairs_stride;
            for (int st = 0; st < steps; ++st) {
                const int64_t pair0 = first + st * kAmxPairs;
                if (pair0 + kAmxPairs <= k2n) {
                    _tile_loadd(2, x + pair0, a.x_pairs_stride * 4);
                } else {  // the last pairs, zero-padded
                    for (int r = 0; r < m; ++r)
                        for (int64_t j = 0; j < kAmxPairs; ++j) a_buf[r][j] = pair0 + j < k2n ? x[r * a.x_pairs_stride + pair0 + j] : 0u;
                    _tile_loadd(2, a_buf, 64);
                }
                if (direct(st))
                    _tile_loadd(3, panel[0] + pair0 * 64, 64);
                else
                    _tile_loadd(3, b_buf[0][st], 64);
                _tile_dpbf16ps(0, 2, 3);
                if (np > 1) {
                    if (direct(st))
                        _tile_loadd(4, panel[1] + pair0 * 64, 64);
                    else
                        _tile_loadd(4, b_buf[1][st], 64);
                    _tile_dpbf16ps(1, 2, 4);
                }
            }
            if (!fp8) {
                _tile_stored(0, acc[rb][0], 64);
                if (np > 1) _tile_stored(1, acc[rb][1], 64);
                continue;
            }
            const __m512 sc = _mm512_set1_ps(scale);
            for (int q = 0; q < np; ++q) {
                if (q == 0)
                    _tile_stored(0, c_buf, 64);
                else
                    _tile_stored(1, c_buf, 64);
                for (int r = 0; r < m; ++r) {
                    const __m512 prev = kb == 0 ? _mm512_setzero_ps() : _mm512_load_ps(acc[rb][q][r]);
                    _mm512_store_ps(acc[rb][q][r], _mm512_fmadd_ps(_mm512_load_ps(c_buf[r]), sc, prev));
                }
            }
        }
    }
    amx_tiles_end();
    for (int rb = 0; rb < n_rb; ++rb) {
        const int64_t row = r0 + 16 * rb;
        const int m = static_cast<int>(s_min(int64_t{16}, r1 - row));
        for (int r = 0; r < m; ++r)
            for (int q = 0; q < np; ++q) linear_store_y(a, (row + r) * a.y_stride, (p + q) * kPanelCols, vf_load(acc[rb][q][r]));
    }
}
#endif

// The register tiles of the format.
void linear_tile_registers(const LinearKernelArgs& a, int64_t r0, int64_t r1, int64_t p0, int64_t p1) {
    switch (a.format) {
        case PanelFormat::f32: return linear_tile_t<PanelFormat::f32>(a, r0, r1, p0, p1);
        case PanelFormat::bf16_pairs:
#if defined(__AVX2__) && !defined(__AVX512F__)
            if (r1 - r0 > kMaxRows) return linear_shared_decode<PanelFormat::bf16_pairs>(a, r0, r1, p0, p1);
#endif
            return linear_tile_t<PanelFormat::bf16_pairs>(a, r0, r1, p0, p1);
        case PanelFormat::fp8:
            if (r1 - r0 > kMaxRows) return linear_shared_decode<PanelFormat::fp8>(a, r0, r1, p0, p1);
            return linear_tile_t<PanelFormat::fp8>(a, r0, r1, p0, p1);
        case PanelFormat::fp8_pairs:
#if defined(__AVX512BF16__)
            return linear_tile_t<PanelFormat::fp8_pairs>(a, r0, r1, p0, p1);
#else
            __builtin_trap();  // packed only for the avx512_bf16 table (cpu_linear.cpp)
#endif
    }
}

void linear_tile(const LinearKernelArgs& a, int64_t r0, int64_t r1, int64_t p0, int64_t p1) {
#if defined(__AMX_TILE__)
    if (a.format == PanelFormat::fp8_pairs || (a.format == PanelFormat::bf16_pairs && a.dpbf16)) {
        for (int64_t r = r0; r < r1; r += 16 * kAmxRowBlocks) {
            const int64_t r_end = s_min(r1, r + 16 * kAmxRowBlocks);
            for (int64_t p = p0; p < p1;) {
                // two panels at once where they share an fp8 scale block
                const bool two = p + 1 < p1 && (a.format != PanelFormat::fp8_pairs || (p * kPanelCols) / 128 == ((p + 1) * kPanelCols) / 128);
                linear_amx_rows(a, r, r_end, p, two ? 2 : 1);
                p += two ? 2 : 1;
            }
        }
        return;
    }
#endif
    linear_tile_registers(a, r0, r1, p0, p1);
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
