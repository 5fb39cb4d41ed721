// ops/sparse_attention.h on every backend against ref and against hand-computed values, in the layouts of
// both families that call it:
//   MQA (DeepSeek-V4: v_dim = qk_dim, K = V rows; main = the window list, extra = the compressed list, f32 and
//   fp8_model1 caches): −1 holes, duplicated slots, tokens with no valid row, with and without a sink, bf16 /
//   f32, strided q / out, decode-sized batches that split heads, tolerances derived from the dot-product length;
//   MLA (DSA on MLA: K = [c | kr], V = c, one main list over latent caches written by cache_store, f32 and
//   fp8_v32, whose bytes tests/ops/cache_store_test.cpp checks): a derived bound, sinks, lonely rows,
//   duplicates, ±inf sinks.
// Non-finite inputs give non-finite outputs in both; validate() and check_indices() reject malformed calls,
// and the cpu backends refuse the layouts none of their kernels serve.
#include <cmath>
#include <limits>

#include "backends/cpu/cpu_backend.h"
#include "core/cpu_features.h"
#include "core/thread_pool.h"
#include "paged_cache.h"
#include "sieve/ops/cache_store.h"
#include "sieve/ops/kv_load.h"
#include "sieve/ops/op_common.h"
#include "sieve/ops/sparse_attention.h"
#include "rows.h"

namespace sieve::test {
namespace {

// ================================ MQA layout (DeepSeek-V4, §3.8) ================================

enum class SinkValues { random, minus_inf, huge };  // normal(2); −inf (no virtual key); 1e30 (it takes all the weight)

struct MqaCase {
    int64_t n_tokens, n_heads, head_dim, rope_dim, n_window, n_compressed;
    CacheRecordFormat window_format, compressed_format;
    bool sink, padded;
    DType q_type, out_type;
    SinkValues sink_values = SinkValues::random;
    bool all_holes = false;  // every slot of every token is −1
    // fp8_model1 caches: the first scale byte of this many stored rows of each cache set to 9, so that their
    // first 64 values lie near 2^-118 and the smallest are not normal in bf16 (2^-127): the amx_bf16 kernel
    // takes such chunks through its fp32 tiles (dsv4_kernels_impl.inl), between chunks of tile products.
    int64_t low_scale_rows = 0;
};

// Sets the first UE8M0 scale byte of `n` of the slots to 9 (MqaCase::low_scale_rows).
void lower_first_scales(PagedTestCache& cache, const CacheRecordLayout& l, const std::vector<int32_t>& slots, int64_t n) {
    if (l.format != CacheRecordFormat::fp8_model1) return;
    for (int64_t i = 0; i < n && i < static_cast<int64_t>(slots.size()); ++i)
        cache_record_scales(cache.view(), l, slots[static_cast<size_t>(i)])[0] = 9;
}

// Fills `n` entries of a cache with random rows through ref cache_store; returns their slots.
std::vector<int32_t> fill_row_cache(Backend& ref, Rng& rng, PagedTestCache& cache, const CacheRecordLayout& l, int64_t n) {
    std::vector<float> rows(static_cast<size_t>(n * l.dim));
    for (float& v : rows) v = rng.normal(1.0f);
    std::vector<int32_t> slots = random_slots(rng, n, cache.n_slots());
    CacheStoreParams p;
    p.x = rows.data();
    p.slots = slots.data();
    p.cache = cache.view();
    p.layout = l;
    p.n_slots = cache.n_slots();
    p.n_rows = n;
    p.dim = l.dim;
    p.x_row_stride = l.dim;
    p.round_bf16 = true;
    EXPECT_TRUE(ref.cache_store(p).is_ok());
    return slots;
}

std::vector<float> load_rows(Backend& ref, PagedTestCache& cache, const CacheRecordLayout& l, const std::vector<int32_t>& slots) {
    std::vector<float> y(slots.size() * static_cast<size_t>(l.dim));
    KvLoadParams p;
    p.cache = cache.view();
    p.layout = l;
    p.slots = slots.data();
    p.y = y.data();
    p.n_rows = static_cast<int64_t>(slots.size());
    p.y_row_stride = l.dim;
    EXPECT_TRUE(ref.kv_load(p).is_ok());
    return y;
}

void check_mqa_cases(const std::vector<MqaCase>& cases, Rng& rng);

TEST(SparseAttentionConformance, MqaEveryBackendMatchesRef) {
    Rng rng(4202);
    std::vector<MqaCase> cases;
    for (int c = 0; c < 24; ++c) {
        MqaCase m;
        const int64_t dims[][2] = {{32, 8}, {512, 64}, {72, 8}, {40, 0}, {17, 4}};
        m.head_dim = dims[c % 5][0];
        m.rope_dim = dims[c % 5][1];
        m.n_tokens = rng.pick<int64_t>({1, 2, 5});  // 1, 2: fewer tokens than threads, heads are split
        m.n_heads = rng.pick<int64_t>({1, 3, 4, 8});
        m.n_window = rng.pick<int64_t>({1, 8, 13});
        m.n_compressed = c % 4 == 0 ? 0 : rng.pick<int64_t>({1, 6, 20});
        const bool fp8 = m.head_dim % 2 == 0 && (m.head_dim - m.rope_dim) > 0 && rng.coin(0.6);
        m.window_format = fp8 ? CacheRecordFormat::fp8_model1 : CacheRecordFormat::f32;
        m.compressed_format = fp8 && rng.coin(0.8) ? CacheRecordFormat::fp8_model1 : CacheRecordFormat::f32;
        m.sink = rng.coin(0.75);
        m.padded = rng.coin();
        m.q_type = rng.coin() ? DType::bf16 : DType::f32;
        m.out_type = rng.coin() ? DType::bf16 : DType::f32;
        cases.push_back(m);
    }
    check_mqa_cases(cases, rng);
}

// The shapes of the chunked kernel's edges (rows in chunks of 64, heads in register blocks of 4, decode
// tokens split by heads): many tokens, row counts across chunk boundaries and not multiples of the
// chunk or the vector width, V4-Flash / -Pro head counts at head_dim 512, lists of only −1, and the
// sink at −inf (no virtual key) and at 1e30 (the virtual key takes all the weight: o ≈ 0).
TEST(SparseAttentionConformance, MqaChunkEdgesAndRealShapes) {
    Rng rng(4203);
    const CacheRecordFormat fp8 = CacheRecordFormat::fp8_model1, f32 = CacheRecordFormat::f32;
    std::vector<MqaCase> cases = {
        // T   H    d    r   window compressed  formats     sink   padded q            out
        {37, 5, 72, 8, 13, 20, fp8, fp8, true, true, DType::bf16, DType::f32},     // many tokens, odd heads
        {3, 8, 40, 0, 64, 0, f32, f32, true, false, DType::f32, DType::f32},       // 64 listed (one chunk with holes)
        {2, 6, 32, 8, 65, 64, fp8, f32, true, true, DType::f32, DType::bf16},      // 129 listed: 2 chunks + 1 row
        {1, 64, 512, 64, 128, 79, fp8, fp8, true, false, DType::bf16, DType::bf16},  // V4-Flash decode, 207 rows
        {1, 128, 512, 64, 50, 150, fp8, fp8, true, false, DType::bf16, DType::bf16},  // V4-Pro head count
        {4, 9, 17, 4, 70, 3, f32, f32, false, true, DType::f32, DType::f32},       // d below one vector, no sink
        {3, 4, 32, 8, 8, 6, fp8, fp8, true, true, DType::f32, DType::f32, SinkValues::random, true},  // only −1
        {1, 64, 32, 8, 8, 6, fp8, fp8, true, false, DType::f32, DType::f32, SinkValues::random, true},  // split, only −1
        {2, 7, 40, 0, 30, 45, f32, f32, true, false, DType::f32, DType::f32, SinkValues::minus_inf},
        {2, 7, 40, 0, 30, 45, f32, f32, true, false, DType::f32, DType::f32, SinkValues::huge},
    };
    check_mqa_cases(cases, rng);
}

// The shapes of the cuda backend's warpgroup kernel (64 heads a block, steps of 32 entries, splits of whole
// steps): more tokens than the GPU has multiprocessors (no split) with a partial step, two head blocks over
// splits of several steps, blocks with padded heads, and the sink and empty-list cases at head_dim 512.
TEST(SparseAttentionConformance, MqaHeadBlocksOfSixtyFour) {
    Rng rng(4206);
    const CacheRecordFormat fp8 = CacheRecordFormat::fp8_model1;
    std::vector<MqaCase> cases = {
        // T    H    d    r   window compressed  formats   sink   padded q            out
        {140, 64, 512, 64, 10, 30, fp8, fp8, true, true, DType::bf16, DType::bf16},   // one split, a partial step
        {4, 128, 512, 64, 128, 400, fp8, fp8, true, false, DType::bf16, DType::f32},  // two head blocks, splits
        {20, 48, 512, 64, 128, 79, fp8, fp8, false, true, DType::bf16, DType::bf16},  // 16 padded heads, no sink
        {16, 64, 512, 64, 100, 200, fp8, fp8, true, false, DType::bf16, DType::bf16, SinkValues::minus_inf},
        {16, 64, 512, 64, 100, 200, fp8, fp8, true, false, DType::bf16, DType::bf16, SinkValues::huge},
        {64, 64, 512, 64, 40, 30, fp8, fp8, true, false, DType::bf16, DType::f32, SinkValues::random, true},  // only −1
    };
    check_mqa_cases(cases, rng);
}

// The shapes of the amx_bf16 kernel's tile path (bf16 q, fp8_model1 rows, math bf16 — check_mqa_cases runs
// both maths): head groups of 16 with padded heads, chunks under 32 rows (one weight tile), and chunks that
// hold a row not exact in bf16 (low scales), run through the fp32 tiles between tile chunks.
TEST(SparseAttentionConformance, MqaTilePathShapes) {
    Rng rng(4207);
    const CacheRecordFormat fp8 = CacheRecordFormat::fp8_model1;
    std::vector<MqaCase> cases = {
        // T    H    d    r   window compressed  formats   sink   padded q            out
        {6, 20, 512, 64, 128, 200, fp8, fp8, true, true, DType::bf16, DType::bf16},    // 20 heads: groups of 16, padded
        {9, 64, 512, 64, 10, 12, fp8, fp8, true, false, DType::bf16, DType::f32},      // under 32 rows a chunk
        {8, 64, 512, 64, 128, 300, fp8, fp8, true, false, DType::bf16, DType::bf16, SinkValues::random, false, 3},
        {3, 36, 128, 64, 70, 40, fp8, fp8, false, true, DType::bf16, DType::bf16, SinkValues::random, false, 2},
    };
    check_mqa_cases(cases, rng);
}

// Split-K (cpu_sparse_attention.cpp): a decode of fewer tokens than threads splits each token's rows into
// ranges of at least 128 (the window list, the compressed list and the boundary between them), computes them
// apart and merges their softmax states; with and without a sink (the split at row 0 holds it), in both
// kernel paths (fp8 rows and bf16 q: tiles at amx_bf16; f32), a split whose rows are all holes, a token
// without any valid row, and the sink's edge values. check_mqa_cases adds a backend of 5 threads, so these
// split on any machine.
TEST(SparseAttentionConformance, MqaRowSplits) {
    Rng rng(4208);
    const CacheRecordFormat fp8 = CacheRecordFormat::fp8_model1, f32 = CacheRecordFormat::f32;
    std::vector<MqaCase> cases = {
        // T    H    d    r   window compressed  formats   sink   padded q            out
        {1, 64, 512, 64, 128, 512, fp8, fp8, true, false, DType::bf16, DType::bf16},  // V4-Flash CSA decode
        {2, 64, 512, 64, 128, 1024, fp8, fp8, true, false, DType::bf16, DType::f32},  // HCA, two tokens
        {1, 20, 512, 64, 300, 0, fp8, fp8, false, true, DType::bf16, DType::bf16},    // window only, no sink
        {1, 8, 64, 8, 140, 260, f32, f32, true, false, DType::f32, DType::f32},       // the FMA path
        {1, 16, 64, 8, 200, 200, fp8, fp8, true, false, DType::f32, DType::f32, SinkValues::random, true},  // only −1
        {1, 16, 512, 64, 128, 400, fp8, fp8, true, false, DType::bf16, DType::bf16, SinkValues::minus_inf},
        {1, 16, 512, 64, 128, 400, fp8, fp8, true, false, DType::bf16, DType::bf16, SinkValues::huge},
    };
    check_mqa_cases(cases, rng);
}

// The cpu backend at the best ISA on a pool of `threads` threads (kept for the process), whatever this machine
// has: a decode of fewer tokens than threads splits each token's rows (split-K, cpu_sparse_attention.cpp)
// and merges the splits.
NamedBackend cpu_on_threads(int threads) {
    static ThreadPool five(5), sixteen(16);
    CpuBackendOptions o;
    o.isa = active_isa();
    o.pool = threads == 5 ? &five : &sixteen;
    EXPECT_TRUE(threads == 5 || threads == 16);
    auto b = make_cpu_backend(o);
    EXPECT_TRUE(b.has_value()) << b.status().to_string();
    return {fmt::format("cpu on {} threads", threads), std::move(b).value()};
}

void check_mqa_cases(const std::vector<MqaCase>& cases, Rng& rng) {
    auto ref = ref_backend();
    auto backends = backends_under_test();
    backends.push_back(cpu_on_threads(5));
    for (size_t ci = 0; ci < cases.size(); ++ci) {
        const MqaCase& c = cases[ci];
        SCOPED_TRACE(fmt::format("case {}: T {} H {} d {} r {} window {} ({}) compressed {} ({}) sink {} ({}) q {} out {}{}", ci,
                                 c.n_tokens, c.n_heads, c.head_dim, c.rope_dim, c.n_window,
                                 cache_record_format_name(c.window_format), c.n_compressed,
                                 cache_record_format_name(c.compressed_format), c.sink, static_cast<int>(c.sink_values),
                                 dtype_name(c.q_type), dtype_name(c.out_type), c.all_holes ? " only -1" : ""));
        const CacheRecordLayout wl{c.window_format, c.head_dim, c.rope_dim}, cl{c.compressed_format, c.head_dim, c.rope_dim};
        PagedTestCache wcache(8, 3, wl.entry_bytes(), 64), ccache(6, 5, cl.entry_bytes(), 64);
        const std::vector<int32_t> wslots_all = fill_row_cache(*ref, rng, wcache, wl, 20);
        const std::vector<int32_t> cslots_all = fill_row_cache(*ref, rng, ccache, cl, 25);
        lower_first_scales(wcache, wl, wslots_all, c.low_scale_rows);
        lower_first_scales(ccache, cl, cslots_all, c.low_scale_rows);
        // Slot lists: random picks (duplicates allowed), −1 holes; the last token (of several) has only −1.
        const int64_t ws = c.n_window + (c.padded ? 3 : 0), cs = c.n_compressed + (c.padded ? 2 : 0);
        std::vector<int32_t> wlist(static_cast<size_t>(c.n_tokens * ws), -7), clist(static_cast<size_t>(c.n_tokens * std::max<int64_t>(cs, 1)), -7);
        for (int64_t t = 0; t < c.n_tokens; ++t) {
            const bool empty = (t == c.n_tokens - 1 && c.n_tokens > 1) || c.all_holes;
            for (int64_t j = 0; j < c.n_window; ++j)
                wlist[static_cast<size_t>(t * ws + j)] = empty || rng.coin(0.2) ? -1 : rng.pick(wslots_all);
            for (int64_t j = 0; j < c.n_compressed; ++j)
                clist[static_cast<size_t>(t * cs + j)] = empty || rng.coin(0.3) ? -1 : rng.pick(cslots_all);
        }
        const RowsLayout ql = make_rows_layout(rng, c.n_tokens, c.n_heads, c.head_dim, c.padded);
        const RowsLayout ol = make_rows_layout(rng, c.n_tokens, c.n_heads, c.head_dim, c.padded);
        RowsTensor q(ql, c.q_type);
        q.fill([&] { return rng.normal(1.5f); });
        std::vector<float> sink(static_cast<size_t>(c.n_heads));
        for (float& s : sink)
            s = c.sink_values == SinkValues::random    ? rng.normal(2.0f)
                : c.sink_values == SinkValues::minus_inf ? -std::numeric_limits<float>::infinity()
                                                         : 1e30f;
        const float scale = 1.0f / std::sqrt(static_cast<float>(c.head_dim));

        auto run = [&](Backend& b, RowsTensor& out, AttentionMath math) {
            SparseAttentionParams p;
            p.math = math;
            p.q = q.data();
            p.q_type = c.q_type;
            p.q_token_stride = ql.token_stride;
            p.q_head_stride = ql.head_stride;
            p.main.cache = wcache.view();
            p.main.format = c.window_format;
            p.main.n_slots = wcache.n_slots();
            p.main.slots = wlist.data();
            p.main.width = c.n_window;
            p.main.slots_stride = ws;
            p.extra.cache = ccache.view();
            p.extra.format = c.compressed_format;
            p.extra.n_slots = ccache.n_slots();
            p.extra.slots = c.n_compressed ? clist.data() : nullptr;
            p.extra.width = c.n_compressed;
            p.extra.slots_stride = cs;
            p.sink = c.sink ? sink.data() : nullptr;
            p.scale = scale;
            p.out = out.data();
            p.out_type = c.out_type;
            p.out_token_stride = ol.token_stride;
            p.out_head_stride = ol.head_stride;
            p.n_tokens = c.n_tokens;
            p.n_heads = c.n_heads;
            p.qk_dim = p.v_dim = c.head_dim;
            p.rope_dim = c.rope_dim;
            GuardedBuffer w(std::max<size_t>(b.sparse_attention_workspace_size(p), 1));
            const Status st = b.sparse_attention(p, Workspace{w.data(), b.sparse_attention_workspace_size(p)});
            EXPECT_TRUE(w.guards_intact("sparse_attention workspace"));
            return st;
        };
        // Tolerance (the harness's rules): a logit l_j = scale·<q, v_j> is off by at most
        // ε_l = |scale|·γ_{d+1}·Σ_i|q_i v_ji| (+ one rounding), so each softmax weight by a relative
        // 2ε_l + a few u (exp, max shift); o is a convex combination of rows (and 0 for the sink), so a
        // relative weight error δ moves it by ≤ 2δ·max|v|, and its own accumulation adds γ_{n+2}·max|v|
        // (doubled: the normalisation by the reciprocal rounds once more; factor 2 of margin on δ).
        // Math bf16 (below) adds the weights' own rounding: ref rounds exp(l_j − M), a backend exp(l_j − M_chunk),
        // each within 2^-9 relative, so o moves by ≤ 2^-8·max|v|.
        std::vector<double> tol;
        std::vector<double> vmax_of;  // per output element, max|v| of its token's rows
        for (int64_t t = 0; t < c.n_tokens; ++t) {
            std::vector<int32_t> wl_t(wlist.begin() + t * ws, wlist.begin() + t * ws + c.n_window);
            std::vector<int32_t> cl_t;
            if (c.n_compressed) cl_t.assign(clist.begin() + t * cs, clist.begin() + t * cs + c.n_compressed);
            const std::vector<float> wrows = load_rows(*ref, wcache, wl, wl_t), crows = load_rows(*ref, ccache, cl, cl_t);
            std::vector<const float*> rows;
            for (size_t j = 0; j < wl_t.size(); ++j)
                if (wl_t[j] >= 0) rows.push_back(wrows.data() + j * static_cast<size_t>(c.head_dim));
            for (size_t j = 0; j < cl_t.size(); ++j)
                if (cl_t[j] >= 0) rows.push_back(crows.data() + j * static_cast<size_t>(c.head_dim));
            double vmax = 0.0;
            for (const float* r : rows)
                for (int64_t i = 0; i < c.head_dim; ++i) vmax = std::max(vmax, std::fabs(static_cast<double>(r[i])));
            for (int64_t h = 0; h < c.n_heads; ++h) {
                double eps_l = 0.0;
                for (const float* r : rows) {
                    double s = 0.0, l = 0.0;
                    for (int64_t i = 0; i < c.head_dim; ++i) {
                        s += std::fabs(q.get(t, h, i) * static_cast<double>(r[i]));
                        l += q.get(t, h, i) * static_cast<double>(r[i]);
                    }
                    eps_l = std::max(eps_l, scale * (gamma_n(static_cast<double>(c.head_dim) + 1) * s) + 2 * kU * std::fabs(scale * l));
                }
                const double n = static_cast<double>(rows.size());
                const double bound = vmax * (4.0 * (2.0 * eps_l + 8.0 * kU) + 2.0 * gamma_n(n + 2)) + 1e-30;
                for (int64_t i = 0; i < c.head_dim; ++i) {
                    tol.push_back(bound);
                    vmax_of.push_back(vmax);
                }
            }
        }
        for (const AttentionMath math : {AttentionMath::f32, AttentionMath::bf16}) {
            SCOPED_TRACE(fmt::format("math {}", attention_math_name(math)));
            RowsTensor want(ol, c.out_type);
            ASSERT_TRUE(run(*ref, want, math).is_ok());
            const std::vector<double> want_values = want.values();
            std::vector<double> tol_m(tol.size());
            for (size_t e = 0; e < tol.size(); ++e) {
                const double bound = tol[e] + (math == AttentionMath::bf16 ? std::ldexp(vmax_of[e], -8) : 0.0);
                tol_m[e] = bound + (c.out_type == DType::bf16 ? bf16_ulp(std::fabs(want_values[e]) + bound) : 0.0);
            }
            for (auto& nb : backends) {
                SCOPED_TRACE(nb.spec);
                RowsTensor got(ol, c.out_type);
                const Status st = run(*nb.backend, got, math);
                ASSERT_TRUE(st.is_ok()) << st.to_string();
                EXPECT_TRUE(all_close(want_values, got.values(), tol_m, "sparse_attention out"));
                EXPECT_TRUE(got.intact("sparse_attention out"));
                for (int64_t t = 0; t < c.n_tokens; ++t) {  // tokens without valid rows: exactly 0 (§3.8)
                    if (!c.all_holes && (t < c.n_tokens - 1 || c.n_tokens == 1)) continue;
                    for (int64_t h = 0; h < c.n_heads; ++h)
                        for (int64_t i = 0; i < c.head_dim; ++i) ASSERT_EQ(got.get(t, h, i), 0.0f);
                }
            }
        }
    }
}

// The known-value tests' setting: ref and every host backend, and a cache of f32 rows of 4 values with
// slot 0 = r0 and slot 3 = r3.
struct KnownRows {
    static constexpr float r0[4] = {1, 2, 3, 4}, r3[4] = {-4, 0, 0, 0};
    std::unique_ptr<Backend> ref = ref_backend();
    std::vector<NamedBackend> host = host_backends_under_test();
    PagedTestCache cache{2, 2, CacheRecordLayout{CacheRecordFormat::f32, 4, 0}.entry_bytes(), 64};
    KnownRows() {
        std::memcpy(cache.view().row(0), r0, 16);
        std::memcpy(cache.view().row(3), r3, 16);
    }
    std::vector<Backend*> all() const {
        std::vector<Backend*> b = {ref.get()};
        for (const NamedBackend& nb : host) b.push_back(nb.backend.get());
        return b;
    }
};

// The sink semantics by hand: one row v with logit l, sink s: o = v·e^l / (e^l + e^s).
TEST(SparseAttentionKnownValues, MqaSinkDuplicatesAndEmptyLists) {
    KnownRows k;
    PagedTestCache& cache = k.cache;
    const float(&r0)[4] = KnownRows::r0;
    const float(&r3)[4] = KnownRows::r3;
    const std::vector<Backend*> all = k.all();
    const float q[2][4] = {{0.5f, 0, 0, 0}, {0.25f, 0, 0, 0}};  // head 0: l0 = 0.5, l3 = −2 (scale 1)
    const float sink[2] = {0.0f, -1e30f};
    for (Backend* b : all) {
        SCOPED_TRACE(b->name());
        auto attend = [&](std::vector<int32_t> window, const float* sink_ptr) {
            std::vector<float> out(8, 99.0f);
            SparseAttentionParams p;
            p.q = q;
            p.q_token_stride = 8;
            p.q_head_stride = 4;
            p.main.cache = cache.view();
            p.main.n_slots = cache.n_slots();
            p.main.slots = window.data();
            p.main.width = static_cast<int64_t>(window.size());
            p.main.slots_stride = p.main.width;
            p.sink = sink_ptr;
            p.scale = 1.0f;
            p.out = out.data();
            p.out_token_stride = 8;
            p.out_head_stride = 4;
            p.n_tokens = 1;
            p.n_heads = 2;
            p.qk_dim = p.v_dim = 4;
            GuardedBuffer w(std::max<size_t>(b->sparse_attention_workspace_size(p), 1));
            EXPECT_TRUE(b->sparse_attention(p, Workspace{w.data(), b->sparse_attention_workspace_size(p)}).is_ok());
            return out;
        };
        const double e05 = std::exp(0.5), em2 = std::exp(-2.0);
        // One row, sink 0: o = v · e^0.5 / (e^0.5 + 1).
        std::vector<float> o = attend({0, -1}, sink);
        for (int i = 0; i < 4; ++i) EXPECT_NEAR(o[static_cast<size_t>(i)], r0[i] * e05 / (e05 + 1.0), 1e-6);
        // Head 1 with a sink of −1e30: plain softmax over one row = the row.
        for (int i = 0; i < 4; ++i) EXPECT_NEAR(o[static_cast<size_t>(4 + i)], r0[i], 1e-6);
        // The same row listed twice counts twice; two rows mix by their weights.
        o = attend({0, 0, 3}, sink);
        for (int i = 0; i < 4; ++i)
            EXPECT_NEAR(o[static_cast<size_t>(i)], (2 * e05 * r0[i] + em2 * r3[i]) / (2 * e05 + em2 + 1.0), 1e-6);
        // No sink pointer: no virtual key.
        o = attend({3}, nullptr);
        for (int i = 0; i < 4; ++i) EXPECT_NEAR(o[static_cast<size_t>(i)], r3[i], 1e-6);
        // No valid row: 0 even with a sink.
        o = attend({-1, -1}, sink);
        for (float v : o) EXPECT_EQ(v, 0.0f);
        // A sink of +inf takes all the weight, with its zero value: o = 0 (dsa_mla.md §2.8); head 1's sink 0 with
        // l = 0.25: o = v · e^0.25 / (e^0.25 + 1).
        const float inf_sink[2] = {std::numeric_limits<float>::infinity(), 0.0f};
        o = attend({0, -1}, inf_sink);
        const double e025 = std::exp(0.25);
        for (int i = 0; i < 4; ++i) EXPECT_EQ(o[static_cast<size_t>(i)], 0.0f);
        for (int i = 0; i < 4; ++i) EXPECT_NEAR(o[static_cast<size_t>(4 + i)], r0[i] * e025 / (e025 + 1.0), 1e-6);
    }
}

// One fp8_model1 row by hand, every finite e4m3 code under scale bytes 10 … 246 (the range the tile paths
// take as exact bf16: dsv4_kernels_impl.inl; they decode in the bf16 bit fields, attention_kernels_impl.inl
// attn_e4m3_to_bf16). q = 0 gives the one listed row weight 1, so the output is the row: code · 2^(e − 127)
// exactly, for bf16 and f32 math alike, on every backend.
TEST(SparseAttentionKnownValues, MqaOneFp8RowIsItsDecodedValuesForEveryCode) {
    const std::unique_ptr<Backend> ref = ref_backend();
    const std::vector<NamedBackend> host = host_backends_under_test();
    const CacheRecordLayout l{CacheRecordFormat::fp8_model1, 512, 64};  // 7 groups of 64 e4m3 + 64 bf16
    const uint8_t scale_bytes[7] = {10, 60, 127, 100, 200, 246, 127};
    const int64_t H = 16, d = l.dim, nope = d - l.rope_dim;
    std::vector<double> want(static_cast<size_t>(d));
    for (int round = 0; round < 2; ++round) {  // the codes in two orders: every code sees two scales
        PagedTestCache cache(1, 1, l.entry_bytes());
        uint8_t* data = cache_record_data(cache.view(), l, 0);
        uint8_t* scales = cache_record_scales(cache.view(), l, 0);
        for (int64_t i = 0, c = round * 101; i < nope; ++i, ++c) {
            uint8_t code = static_cast<uint8_t>(c % 256);
            if ((code & 0x7f) == 0x7f) code = static_cast<uint8_t>(code ^ 0x01);  // not NaN: 0x7E / 0xFE
            data[i] = code;
            const int e = scale_bytes[i / 64];
            const int exp = (code >> 3) & 15, man = code & 7;
            const double v = exp == 0 ? std::ldexp(man, -9) : std::ldexp(1.0 + man / 8.0, exp - 7);
            want[static_cast<size_t>(i)] = std::ldexp(code & 0x80 ? -v : v, e - 127);
        }
        std::memcpy(scales, scale_bytes, 7);
        uint16_t* rope = reinterpret_cast<uint16_t*>(cache_record_bf16_tail(cache.view(), l, 0));
        for (int64_t i = 0; i < l.rope_dim; ++i) {
            rope[i] = f32_to_bf16(static_cast<float>(i - 20) / 8.0f);
            want[static_cast<size_t>(nope + i)] = (i - 20) / 8.0;
        }
        std::vector<uint16_t> q(static_cast<size_t>(H * d), 0);  // bf16 zeros
        const int32_t slot = 0;
        std::vector<Backend*> all = {ref.get()};
        for (const NamedBackend& nb : host) all.push_back(nb.backend.get());
        for (Backend* b : all)
            for (AttentionMath math : {AttentionMath::bf16, AttentionMath::f32}) {
                SCOPED_TRACE(fmt::format("{} math {} round {}", b->name(), math == AttentionMath::bf16 ? "bf16" : "f32", round));
                std::vector<float> out(static_cast<size_t>(H * d), 99.0f);
                SparseAttentionParams p;
                p.q = q.data();
                p.q_type = DType::bf16;
                p.q_token_stride = H * d;
                p.q_head_stride = d;
                p.main.cache = cache.view();
                p.main.format = l.format;
                p.main.n_slots = cache.n_slots();
                p.main.slots = &slot;
                p.main.width = 1;
                p.main.slots_stride = 1;
                p.scale = 0.05f;
                p.math = math;
                p.out = out.data();
                p.out_type = DType::f32;
                p.out_token_stride = H * d;
                p.out_head_stride = d;
                p.n_tokens = 1;
                p.n_heads = H;
                p.qk_dim = p.v_dim = d;
                p.rope_dim = l.rope_dim;
                const size_t need = b->sparse_attention_workspace_size(p);
                GuardedBuffer w(std::max<size_t>(need, 1));
                const Status st = b->sparse_attention(p, Workspace{w.data(), need});
                ASSERT_TRUE(st.is_ok()) << st.to_string();
                int64_t wrong = 0;
                for (int64_t h = 0; h < H; ++h)
                    for (int64_t i = 0; i < d; ++i)
                        if (out[static_cast<size_t>(h * d + i)] != static_cast<float>(want[static_cast<size_t>(i)]) && wrong++ < 5)
                            ADD_FAILURE() << "head " << h << " dim " << i << " (code 0x" << std::hex
                                          << (i < nope ? static_cast<int>(data[i]) : -1) << std::dec << "): "
                                          << out[static_cast<size_t>(h * d + i)] << " != " << want[static_cast<size_t>(i)];
                EXPECT_EQ(wrong, 0);
            }
    }
}

// Math bf16 by hand: rows v0 (logit 0.5) and v3 (logit −2), sink 0. The weights relative to the max 0.5 are
// p0 = 1 and p3 = e^-2.5 = 0.0820850, whose bf16 is 0.08203125; the denominator takes p unrounded:
//   o = (v0 + bf16(e^-2.5)·v3) / (1 + e^-2.5 + e^-0.5).
// Dim 0 then differs from math f32's by 4·5.4e-5 / 1.69 = 1.3e-4, far beyond the 1e-6 checked here.
TEST(SparseAttentionKnownValues, MqaBf16MathRoundsTheWeightsNotTheirSum) {
    KnownRows k;
    const float(&r0)[4] = KnownRows::r0;
    const float(&r3)[4] = KnownRows::r3;
    const float q[4] = {0.5f, 0, 0, 0};
    const float sink[1] = {0.0f};
    std::vector<int32_t> window = {0, 3};
    const double p3 = std::exp(-2.5), den = 1.0 + p3 + std::exp(-0.5);
    const double p3_bf16 = static_cast<double>(round_to_bf16(static_cast<float>(p3)));
    ASSERT_EQ(p3_bf16, 0.08203125);
    for (Backend* b : k.all()) {
        SCOPED_TRACE(b->name());
        for (const AttentionMath math : {AttentionMath::f32, AttentionMath::bf16}) {
            SCOPED_TRACE(attention_math_name(math));
            std::vector<float> out(4, 99.0f);
            SparseAttentionParams p;
            p.math = math;
            p.q = q;
            p.q_token_stride = p.q_head_stride = 4;
            p.main.cache = k.cache.view();
            p.main.n_slots = k.cache.n_slots();
            p.main.slots = window.data();
            p.main.width = p.main.slots_stride = 2;
            p.sink = sink;
            p.scale = 1.0f;
            p.out = out.data();
            p.out_token_stride = p.out_head_stride = 4;
            p.n_tokens = p.n_heads = 1;
            p.qk_dim = p.v_dim = 4;
            GuardedBuffer w(std::max<size_t>(b->sparse_attention_workspace_size(p), 1));
            ASSERT_TRUE(b->sparse_attention(p, Workspace{w.data(), b->sparse_attention_workspace_size(p)}).is_ok());
            const double w3 = math == AttentionMath::bf16 ? p3_bf16 : p3;
            for (int i = 0; i < 4; ++i) EXPECT_NEAR(out[static_cast<size_t>(i)], (r0[i] + w3 * r3[i]) / den, 1e-6) << "dim " << i;
        }
    }
}

// Non-finite inputs give non-finite outputs and only a token without valid rows gives 0 (ops/sparse_attention.h),
// on ref and every backend, q f32 and bf16, both maths, with and without a sink, over a window list and a
// compressed list of 528 rows in all (also on a backend of 16 threads, which splits them into three ranges:
// split-K). Rows of f32 or fp8_model1 (d 512, rope 64); slots 0 and 1 hold a NaN
// (f32: a value; fp8_model1: an e4m3 NaN byte in slot 0, a NaN scale byte 0xFF in slot 1), slot 2 an inf (a
// rope value of the fp8_model1 rows), and slot 3 of fp8_model1 a low scale byte (MqaCase::low_scale_rows).
// Tokens:
//   0 clean rows: finite      1 no valid row: exactly 0      2 NaN in head 3 of q: head 3 NaN
//   3 slot 0 first in the window list: NaN      4 slot 1 last in the compressed list: NaN
//   5 slot 2 listed: non-finite      and a NaN sink of head 2: head 2 NaN in every non-empty token.
class MqaNonFinite : public ::testing::TestWithParam<CacheRecordFormat> {};

TEST_P(MqaNonFinite, InputsGiveNonFiniteOutputsAndEmptyRowsZero) {
    auto backends = backends_under_test();
    auto ref = ref_backend();
    backends.push_back({"ref", ref_backend()});
    backends.push_back(cpu_on_threads(16));
    Rng rng(4205);
    const float nan = std::numeric_limits<float>::quiet_NaN(), inf = std::numeric_limits<float>::infinity();
    const CacheRecordLayout l{GetParam(), 512, GetParam() == CacheRecordFormat::f32 ? 0 : 64};
    const int64_t d = l.dim, H = 16, T = 6, NW = 128, NC = 400;
    PagedTestCache window(16, 16, l.entry_bytes(), 64), compressed(16, 16, l.entry_bytes(), 64);
    if (l.format == CacheRecordFormat::f32) {
        for (PagedTestCache* c : {&window, &compressed})
            for (int64_t slot = 0; slot < c->n_slots(); ++slot) {
                float* row = reinterpret_cast<float*>(c->view().row(slot));
                for (int64_t i = 0; i < d; ++i) row[i] = rng.normal(1.0f);
            }
        reinterpret_cast<float*>(window.view().row(0))[17] = nan;
        reinterpret_cast<float*>(compressed.view().row(1))[400] = nan;
        reinterpret_cast<float*>(window.view().row(2))[300] = inf;
    } else {
        for (PagedTestCache* c : {&window, &compressed}) {
            std::vector<float> rows(static_cast<size_t>(c->n_slots() * d));
            for (float& v : rows) v = rng.normal(1.0f);
            std::vector<int32_t> slots(static_cast<size_t>(c->n_slots()));
            for (size_t s = 0; s < slots.size(); ++s) slots[s] = static_cast<int32_t>(s);
            CacheStoreParams sp;
            sp.x = rows.data();
            sp.slots = slots.data();
            sp.cache = c->view();
            sp.layout = l;
            sp.n_slots = c->n_slots();
            sp.n_rows = c->n_slots();
            sp.dim = d;
            sp.x_row_stride = d;
            sp.round_bf16 = true;
            ASSERT_TRUE(ref->cache_store(sp).is_ok());
            lower_first_scales(*c, l, {3}, 1);
        }
        cache_record_data(window.view(), l, 0)[17] = 0x7f;         // e4m3 NaN
        cache_record_scales(compressed.view(), l, 1)[6] = 0xff;    // NaN scale of dims 384 … 447
        reinterpret_cast<uint16_t*>(cache_record_bf16_tail(window.view(), l, 2))[12] = 0x7f80;  // +inf, dim 460
    }
    std::vector<int32_t> wslots(static_cast<size_t>(T * NW), -1), cslots(static_cast<size_t>(T * NC), -1);
    for (int64_t tk = 0; tk < T; ++tk) {
        if (tk == 1) continue;  // no valid row
        for (int64_t j = 0; j < NW; ++j)
            if (!rng.coin(0.1)) wslots[static_cast<size_t>(tk * NW + j)] = static_cast<int32_t>(rng.integer(3, window.n_slots() - 1));
        for (int64_t j = 0; j < NC; ++j)
            if (!rng.coin(0.1)) cslots[static_cast<size_t>(tk * NC + j)] = static_cast<int32_t>(rng.integer(3, compressed.n_slots() - 1));
    }
    wslots[static_cast<size_t>(3 * NW)] = 0;
    cslots[static_cast<size_t>(4 * NC + NC - 1)] = 1;
    wslots[static_cast<size_t>(5 * NW + 50)] = 2;
    for (const DType q_type : {DType::f32, DType::bf16})
        for (const int sink_kind : {0, 1, 2}) {  // none, finite, finite with head 2 NaN
            SCOPED_TRACE(fmt::format("q {} sink {}", dtype_name(q_type), sink_kind));
            const RowsLayout ql{T, H, d, H * d, d};
            RowsTensor q(ql, q_type);
            q.fill([&] { return rng.normal(1.0f); });
            if (q_type == DType::bf16)
                q.buf.as<uint16_t>()[ql.offset(2, 3, 11)] = f32_to_bf16(nan);
            else
                q.buf.as<float>()[ql.offset(2, 3, 11)] = nan;
            std::vector<float> sink(static_cast<size_t>(H));
            for (auto& v : sink) v = rng.normal(2.0f);
            if (sink_kind == 2) sink[2] = nan;
            auto expect = [&](int64_t tk, int64_t h) {
                if (tk == 1) return RowExpect::zero;
                if (tk >= 3) return tk == 5 ? RowExpect::non_finite : RowExpect::nan;
                if ((tk == 2 && h == 3) || (sink_kind == 2 && h == 2)) return RowExpect::nan;
                return RowExpect::finite;
            };
            for (auto& nb : backends)
                for (const AttentionMath math : {AttentionMath::f32, AttentionMath::bf16}) {
                    RowsTensor out(RowsLayout{T, H, d, H * d, d}, DType::f32);
                    SparseAttentionParams p;
                    p.math = math;
                    p.q = q.data();
                    p.q_type = q_type;
                    p.q_token_stride = H * d;
                    p.q_head_stride = d;
                    p.main.cache = window.view();
                    p.main.format = p.extra.format = l.format;
                    p.rope_dim = l.rope_dim;
                    p.main.n_slots = window.n_slots();
                    p.main.slots = wslots.data();
                    p.main.width = NW;
                    p.main.slots_stride = NW;
                    p.extra.cache = compressed.view();
                    p.extra.n_slots = compressed.n_slots();
                    p.extra.slots = cslots.data();
                    p.extra.width = NC;
                    p.extra.slots_stride = NC;
                    p.sink = sink_kind ? sink.data() : nullptr;
                    p.scale = 0.05f;
                    p.out = out.data();
                    p.out_token_stride = H * d;
                    p.out_head_stride = d;
                    p.n_tokens = T;
                    p.n_heads = H;
                    p.qk_dim = p.v_dim = d;
                    const size_t ws_bytes = nb.backend->sparse_attention_workspace_size(p);
                    GuardedBuffer ws(std::max<size_t>(ws_bytes, 1));
                    const Status st = nb.backend->sparse_attention(p, Workspace{ws.data(), ws_bytes});
                    ASSERT_TRUE(st.is_ok()) << nb.spec << ": " << st.to_string();
                    const std::string what = nb.spec + " math " + std::string(attention_math_name(math));
                    for (int64_t tk = 0; tk < T; ++tk)
                        for (int64_t h = 0; h < H; ++h) EXPECT_TRUE(row_is(out, tk, h, expect(tk, h), what));
                    EXPECT_TRUE(out.intact(what));
                }
        }
}

INSTANTIATE_TEST_SUITE_P(SparseAttentionConformance, MqaNonFinite,
                         ::testing::Values(CacheRecordFormat::f32, CacheRecordFormat::fp8_model1),
                         [](const auto& info) { return std::string(cache_record_format_name(info.param)); });

TEST(SparseAttentionValidate, MqaLayoutRejectsBadInputs) {
    const CacheRecordLayout l{CacheRecordFormat::fp8_model1, 32, 8};
    PagedTestCache cache(2, 2, l.entry_bytes(), 64);
    float q[32] = {}, out[32];
    int32_t slots[2] = {0, -1};
    SparseAttentionParams p;
    p.q = q;
    p.out = out;
    p.scale = 1.0f;
    p.main.cache = cache.view();
    p.main.format = CacheRecordFormat::fp8_model1;
    p.main.n_slots = cache.n_slots();
    p.main.slots = slots;
    p.main.width = 2;
    p.main.slots_stride = 2;
    p.n_tokens = 1;
    p.n_heads = 1;
    p.qk_dim = p.v_dim = 32;
    p.rope_dim = 8;
    p.q_token_stride = p.out_token_stride = 32;
    EXPECT_TRUE(validate(p).is_ok()) << validate(p).message();
    SparseAttentionParams b = p;
    b.main.format = CacheRecordFormat::f32;  // entry bytes 128 ≠ 48
    EXPECT_NE(validate(b).message().find("entry_bytes"), std::string::npos);
    b = p;
    b.math = static_cast<AttentionMath>(7);
    EXPECT_NE(validate(b).message().find("math = 7 is not an AttentionMath"), std::string::npos) << validate(b).message();
    b = p;
    b.extra.width = 3;  // no list
    EXPECT_NE(validate(b).message().find("extra.slots is null"), std::string::npos) << validate(b).message();
    b = p;
    slots[1] = -3;
    EXPECT_TRUE(validate(b).is_ok());
    EXPECT_NE(check_indices(b).message().find("main.slots[0, 1] = -3"), std::string::npos) << check_indices(b).message();
    for (auto& nb : host_backends_under_test()) {  // the host backends run check_indices
        const size_t ws_bytes = nb.backend->sparse_attention_workspace_size(b);
        GuardedBuffer ws(std::max<size_t>(ws_bytes, 1));
        EXPECT_NE(nb.backend->sparse_attention(b, {ws.data(), ws_bytes}).message().find("main.slots[0, 1] = -3"),
                  std::string::npos)
            << nb.spec;
    }
    slots[1] = 4;  // past the cache's 4 slots
    EXPECT_TRUE(validate(b).is_ok());
    EXPECT_NE(check_indices(b).message().find("main.slots[0, 1] = 4"), std::string::npos) << check_indices(b).message();
    slots[1] = -1;
    b = p;
    int32_t compressed_slots[2] = {-1, -5};
    b.extra.cache = cache.view();
    b.extra.format = CacheRecordFormat::fp8_model1;
    b.extra.n_slots = cache.n_slots();
    b.extra.slots = compressed_slots;
    b.extra.width = 2;
    b.extra.slots_stride = 2;
    EXPECT_TRUE(validate(b).is_ok()) << validate(b).message();
    EXPECT_NE(check_indices(b).message().find("extra.slots[0, 1] = -5"), std::string::npos)
        << check_indices(b).message();
    compressed_slots[1] = 1;
    EXPECT_TRUE(check_indices(b).is_ok()) << check_indices(b).message();
    b = p;
    b.out = q;  // out overlaps q
    EXPECT_EQ(validate(b).code(), StatusCode::invalid_argument);
    b = p;
    b.scale = NAN;
    EXPECT_EQ(validate(b).code(), StatusCode::invalid_argument);
    b = p;
    b.v_dim = 33;  // V is a prefix of K
    EXPECT_NE(validate(b).message().find("v_dim = 33"), std::string::npos) << validate(b).message();
    b = p;
    b.main.format = CacheRecordFormat::bf16;  // not a format of these caches
    EXPECT_NE(validate(b).message().find("main.format = bf16"), std::string::npos) << validate(b).message();
}

// A layout no cpu kernel serves (V ⊂ K with an extra list, or V ⊂ K over fp8_model1 records) is refused by the
// cpu backends as unsupported; ref computes it (the formula of ops/sparse_attention.h does not depend on it).
TEST(SparseAttentionValidate, CpuRefusesLayoutsWithoutAKernel) {
    const CacheRecordLayout f32{CacheRecordFormat::f32, 8, 0}, fp8{CacheRecordFormat::fp8_model1, 8, 2};
    PagedTestCache cache(2, 2, f32.entry_bytes(), 64), records(2, 2, fp8.entry_bytes(), 64);
    std::memset(cache.buf.data(), 0, cache.buf.bytes());
    std::memset(records.buf.data(), 0, records.buf.bytes());
    float q[8] = {}, out[8];
    int32_t slots[2] = {0, 3};
    SparseAttentionParams p;
    p.q = q;
    p.out = out;
    p.scale = 1.0f;
    p.main.cache = cache.view();
    p.main.n_slots = cache.n_slots();
    p.main.slots = slots;
    p.main.width = 2;
    p.main.slots_stride = 2;
    p.n_tokens = 1;
    p.n_heads = 1;
    p.qk_dim = 8;
    p.v_dim = 6;
    p.rope_dim = 2;
    p.q_token_stride = 8;
    p.out_token_stride = 6;
    SparseAttentionParams with_extra = p, fp8_main = p;
    with_extra.extra = p.main;
    fp8_main.main.cache = records.view();
    fp8_main.main.format = CacheRecordFormat::fp8_model1;
    for (const SparseAttentionParams& c : {with_extra, fp8_main}) {
        EXPECT_TRUE(ref_backend()->sparse_attention(c, {}).is_ok());
        for (auto& nb : host_backends_under_test()) {
            if (nb.spec.rfind("cpu", 0) != 0) continue;
            EXPECT_EQ(nb.backend->sparse_attention_workspace_size(c), 0u) << nb.spec;
            const Status st = nb.backend->sparse_attention(c, {});
            EXPECT_EQ(st.code(), StatusCode::unsupported) << nb.spec << ": " << st.to_string();
            EXPECT_NE(st.message().find("no kernel"), std::string::npos) << st.to_string();
        }
    }
}

// ============================== MLA layout (DSA on MLA, §2.5, §2.8) =============================

constexpr float kInf = std::numeric_limits<float>::infinity();

// Independent decode of one latent entry (dsa_mla.md §3.4 / ops/kv_load.h), for the tolerance and the
// known-value checks.
std::vector<double> decode_entry(const CacheView& c, CacheRecordFormat f, int64_t r, int64_t dr, int64_t slot) {
    const uint8_t* e = c.base + (slot / c.block_size) * c.block_bytes + (slot % c.block_size) * c.entry_bytes;
    std::vector<double> out(static_cast<size_t>(r + dr));
    if (f == CacheRecordFormat::f32) {
        for (int64_t i = 0; i < r + dr; ++i) {
            float v;
            std::memcpy(&v, e + 4 * i, 4);
            out[static_cast<size_t>(i)] = v;
        }
        return out;
    }
    const int64_t g = std::min<int64_t>(r, 128);
    for (int64_t i = 0; i < r; ++i) {
        float s;
        std::memcpy(&s, e + r + 4 * (i / g), 4);
        out[static_cast<size_t>(i)] = static_cast<double>(fp8_e4m3_to_f32(e[i])) * s;
    }
    for (int64_t j = 0; j < dr; ++j) {
        uint16_t b;
        std::memcpy(&b, e + r + 4 * (r / g) + 2 * j, 2);
        out[static_cast<size_t>(r + j)] = bf16_to_f32(b);
    }
    return out;
}

struct AttnCase {
    int64_t r, dr, heads, tokens, topk;
    CacheRecordFormat format;
    DType q_type, out_type;
    int sink;  // 0 none, 1 finite, 2 with ±inf heads
    // fp8_v32: the first group scale of every third entry times 1.25, no longer a power of two (the amx_bf16
    // kernel takes chunks holding such an entry through its fp32 tiles, between chunks of tile products)
    bool odd_scales = false;
};

// Bytes of a latent entry [c | kr] (ops/cache_record.h).
int64_t latent_entry_bytes(CacheRecordFormat f, int64_t r, int64_t dr) { return CacheRecordLayout{f, r + dr, dr}.entry_bytes(); }

// Fills every slot of a cache with random entries [c | kr] (through ref's cache_store, so fp8 records are
// valid).
void fill_latent_cache(Backend& ref, PagedTestCache& cache, CacheRecordFormat f, int64_t r, int64_t dr, Rng& rng) {
    const int64_t n = cache.n_slots();
    std::vector<float> rows(static_cast<size_t>(n * (r + dr)));
    for (auto& v : rows) v = rng.normal(1.0f);
    std::vector<int32_t> slots(static_cast<size_t>(n));
    std::iota(slots.begin(), slots.end(), 0);
    CacheStoreParams p;
    p.x = rows.data();
    p.slots = slots.data();
    p.cache = cache.view();
    p.layout = {f, r + dr, dr};
    p.n_slots = n;
    p.n_rows = n;
    p.dim = r + dr;
    p.x_row_stride = r + dr;
    ASSERT_TRUE(ref.cache_store(p).is_ok());
}

TEST(SparseAttentionConformance, MlaEveryBackendAgreesWithRef) {
    auto ref = ref_backend();
    auto backends = backends_under_test();
    Rng rng(7103);
    const std::vector<AttnCase> cases = {
        {32, 8, 4, 5, 16, CacheRecordFormat::f32, DType::f32, DType::f32, 1},
        {32, 8, 4, 3, 16, CacheRecordFormat::fp8_v32, DType::bf16, DType::bf16, 1},
        {512, 64, 16, 2, 70, CacheRecordFormat::fp8_v32, DType::bf16, DType::f32, 0},
        {512, 64, 3, 1, 150, CacheRecordFormat::f32, DType::f32, DType::bf16, 2},
        {40, 8, 5, 4, 9, CacheRecordFormat::f32, DType::f32, DType::f32, 2},
        {40, 8, 2, 7, 65, CacheRecordFormat::fp8_v32, DType::f32, DType::f32, 1},
        {128, 0, 1, 3, 1, CacheRecordFormat::f32, DType::bf16, DType::f32, 0},
        {256, 64, 8, 6, 33, CacheRecordFormat::fp8_v32, DType::bf16, DType::bf16, 1},
        {128, 0, 3, 2, 70, CacheRecordFormat::fp8_v32, DType::f32, DType::bf16, 2},  // V = K, an fp8_v32 list
        // DeepSeek-V3.2's and Hy4's shapes (the cuda backend's warpgroup kernel: 64 heads a block): splits of
        // several steps, top-2048 over two
        // head blocks with ±inf sinks, and more tokens than one split each.
        {512, 64, 64, 8, 520, CacheRecordFormat::fp8_v32, DType::bf16, DType::bf16, 1},
        {512, 64, 128, 4, 2048, CacheRecordFormat::fp8_v32, DType::bf16, DType::f32, 2},
        {512, 64, 64, 136, 40, CacheRecordFormat::fp8_v32, DType::bf16, DType::bf16, 0},
        {512, 64, 32, 3, 900, CacheRecordFormat::fp8_v32, DType::bf16, DType::bf16, 1, true},
    };
    for (size_t ci = 0; ci < cases.size(); ++ci) {
        const AttnCase& k = cases[ci];
        const int64_t dqk = k.r + k.dr, block_size = 16, n_blocks = 12;
        SCOPED_TRACE(fmt::format("case {}: R {} Dr {} H {} T {} topk {} {} q {} out {} sink {}", ci, k.r, k.dr, k.heads,
                                 k.tokens, k.topk, cache_record_format_name(k.format), dtype_name(k.q_type),
                                 dtype_name(k.out_type), k.sink));
        PagedTestCache cache(n_blocks, block_size, latent_entry_bytes(k.format, k.r, k.dr));
        fill_latent_cache(*ref, cache, k.format, k.r, k.dr, rng);
        if (k.odd_scales)
            for (int64_t slot = 0; slot < cache.n_slots(); slot += 3) {
                uint8_t* s = cache_record_scales(cache.view(), CacheRecordLayout{k.format, dqk, k.dr}, slot);
                float v;
                std::memcpy(&v, s, 4);
                v *= 1.25f;
                std::memcpy(s, &v, 4);
            }
        const int64_t q_head = dqk + rng.integer(0, 3), q_token = k.heads * q_head + rng.integer(0, 7);
        const int64_t o_head = k.r + rng.integer(0, 3), o_token = k.heads * o_head + rng.integer(0, 7);
        const int64_t s_row = k.topk + rng.integer(0, 3);
        std::vector<uint8_t> q(static_cast<size_t>(k.tokens * q_token) * dtype_size(k.q_type));
        fill_rows(q.data(), k.q_type, k.tokens, k.heads, dqk, q_token, q_head, [&] { return rng.normal(1.0f); });
        std::vector<int32_t> slots(static_cast<size_t>(k.tokens * s_row), -7);
        for (int64_t t = 0; t < k.tokens; ++t)
            for (int64_t j = 0; j < k.topk; ++j) {
                const bool empty_row = t == 1;  // a lonely row
                slots[static_cast<size_t>(t * s_row + j)] =
                    empty_row || rng.coin(0.2) ? -1 : static_cast<int32_t>(rng.integer(0, cache.n_slots() - 1));
            }
        std::vector<float> sink(static_cast<size_t>(k.heads));
        for (auto& s : sink) s = rng.normal(2.0f);
        if (k.sink == 2) {
            sink[0] = kInf;
            if (k.heads > 1) sink[1] = -kInf;
        }
        const float scale = rng.uniform(0.05f, 0.4f);
        auto params = [&](void* out, AttentionMath math) {
            SparseAttentionParams p;
            p.math = math;
            p.q = q.data();
            p.main.cache = cache.view();
            p.main.format = k.format;
            p.main.n_slots = cache.n_slots();
            p.main.slots = slots.data();
            p.main.width = k.topk;
            p.main.slots_stride = s_row;
            p.sink = k.sink ? sink.data() : nullptr;
            p.out = out;
            p.scale = scale;
            p.n_tokens = k.tokens;
            p.n_heads = k.heads;
            p.qk_dim = dqk;
            p.v_dim = k.r;
            p.rope_dim = k.dr;
            p.q_token_stride = q_token;
            p.q_head_stride = q_head;
            p.out_token_stride = o_token;
            p.out_head_stride = o_head;
            p.q_type = k.q_type;
            p.out_type = k.out_type;
            return p;
        };
        const RowsLayout ol{k.tokens, k.heads, k.r, o_token, o_head};
        // Tolerance per element (see the derivation in the file comment of harness.h and below): the logits
        // carry |δl| ≤ γ(dqk+2)·scale·Σ|q·K| + u|l|; a perturbation ε of the logits moves the output by at most
        // 2ε·Σ_j p_j|c_j| (numerator and denominator); exp, the online-softmax rescales (one per chunk of 64)
        // and the sums add a few u each. Math bf16 adds the weights' rounding: 2^-9 relative on each side (ref:
        // exp(l_j − M), a backend exp(l_j − M_chunk)), and one more where a backend rounds bf16(p_j)·s_jg
        // (ops/sparse_attention.h): ≤ 3·2^-9 of Σ_j p_j|c_j| / den.
        std::vector<double> tol, mass_of;
        for (int64_t t = 0; t < k.tokens; ++t)
            for (int64_t h = 0; h < k.heads; ++h) {
                std::vector<std::vector<double>> ent;
                std::vector<double> l, s1;
                for (int64_t j = 0; j < k.topk; ++j) {
                    const int32_t sl = slots[static_cast<size_t>(t * s_row + j)];
                    if (sl < 0) continue;
                    ent.push_back(decode_entry(cache.view(), k.format, k.r, k.dr, sl));
                    double dot = 0, sabs = 0;
                    for (int64_t i = 0; i < dqk; ++i) {
                        const double qi = load_as_f32(q.data(), k.q_type, t * q_token + h * q_head + i);
                        dot += qi * ent.back()[static_cast<size_t>(i)];
                        sabs += std::fabs(qi * ent.back()[static_cast<size_t>(i)]);
                    }
                    l.push_back(scale * dot);
                    s1.push_back(scale * sabs);
                }
                const double sg = k.sink ? sink[static_cast<size_t>(h)] : -INFINITY;
                double m = sg, eps = 0;
                for (size_t j = 0; j < l.size(); ++j) {
                    m = std::max(m, l[j]);
                    eps = std::max(eps, gamma_n(static_cast<double>(dqk) + 2) * s1[j] + kU * std::fabs(l[j]));
                }
                const int64_t chunks = static_cast<int64_t>(l.size()) / 64 + 1;
                eps = 2 * eps + 4 * kU * static_cast<double>(chunks + 2);
                double den = std::isfinite(sg) ? std::exp(sg - m) : 0.0;
                for (double lj : l) den += std::exp(lj - m);
                for (int64_t i = 0; i < k.r; ++i) {
                    double mass = 0;
                    for (size_t j = 0; j < l.size(); ++j) mass += std::exp(l[j] - m) / den * std::fabs(ent[j][static_cast<size_t>(i)]);
                    if (!std::isfinite(mass)) mass = 0;  // σ = +inf or a lonely row: exact 0 on both sides
                    tol.push_back((2 * eps + gamma_n(static_cast<double>(l.size()) + 4)) * mass + 1e-30);
                    mass_of.push_back(mass);
                }
            }
        for (const AttentionMath math : {AttentionMath::f32, AttentionMath::bf16}) {
            SCOPED_TRACE(fmt::format("math {}", attention_math_name(math)));
            RowsTensor want(ol, k.out_type);
            ASSERT_TRUE(ref->sparse_attention(params(want.data(), math), {}).is_ok());
            const std::vector<double> want_values = want.values();
            std::vector<double> tol_m(tol.size());
            for (size_t e = 0; e < tol.size(); ++e) {
                const double w = want_values[e];
                tol_m[e] = tol[e] + (math == AttentionMath::bf16 ? 3 * std::ldexp(mass_of[e], -9) : 0.0) + 2 * kU * std::fabs(w);
                if (k.out_type == DType::bf16) tol_m[e] += bf16_ulp(std::fabs(w) + tol_m[e]);
            }
            for (auto& nb : backends) {
                RowsTensor got(ol, k.out_type);
                auto p = params(got.data(), math);
                GuardedBuffer ws(std::max<size_t>(1, nb.backend->sparse_attention_workspace_size(p)));
                const Status st = nb.backend->sparse_attention(p, {ws.data(), nb.backend->sparse_attention_workspace_size(p)});
                ASSERT_TRUE(st.is_ok()) << nb.spec << ": " << st.to_string();
                EXPECT_TRUE(all_close(want_values, got.values(), tol_m, nb.spec));
                EXPECT_TRUE(got.intact(nb.spec));
                EXPECT_TRUE(ws.guards_intact(nb.spec + " workspace"));
            }
        }
    }
}

// Hand-computed values (ops/sparse_attention.h semantics), R = 2, Dr = 1, f32 cache, on every backend and ref.
TEST(SparseAttentionKnownValues, MlaSinkDuplicatesAndLonelyRows) {
    auto backends = host_backends_under_test();
    backends.push_back({"ref", ref_backend()});
    PagedTestCache cache(1, 4, latent_entry_bytes(CacheRecordFormat::f32, 2, 1));
    // Entries: c = (1, 0), (0, 1), (2, 2); rope dim 1 holds the logit driver.
    const float entries[4][3] = {{1, 0, 0}, {0, 1, static_cast<float>(std::log(3.0))}, {2, 2, 0}, {5, 5, 100}};
    std::memcpy(cache.buf.data(), entries, sizeof(entries));
    const float q[3] = {0, 0, 1};  // logit of entry j = scale · rope_j; scale 1
    struct Known {
        std::vector<int32_t> slots;
        float sink;  // NaN: no sink
        float want0, want1;
    };
    const float nan = std::numeric_limits<float>::quiet_NaN();
    const std::vector<Known> known = {
        {{0, -1}, nan, 1.0f, 0.0f},                        // one entry: its c
        {{0, 1}, nan, 0.25f, 0.75f},                       // logits 0 and ln 3: weights 1/4, 3/4
        {{0, 0, 2}, nan, 4.0f / 3, 2.0f / 3},              // a slot listed twice counts twice
        {{0}, 0.0f, 0.5f, 0.0f},                           // sink logit 0 = the entry's: 1/(1 + e^0)
        {{0, 1}, static_cast<float>(std::log(4.0)), 0.125f, 0.375f},  // den 1 + 3 + 4
        {{-1, -1}, 0.0f, 0.0f, 0.0f},                      // lonely row: 0 even with a sink
        {{0, 1}, kInf, 0.0f, 0.0f},                        // σ = +inf: 0
        {{0, 1}, -kInf, 0.25f, 0.75f},                     // σ = −inf: no effect
        {{3, 0}, nan, 5.0f, 5.0f},                         // logit 100 vs 0: overflow-safe (max subtracted)
    };
    for (auto& nb : backends) {
        for (size_t i = 0; i < known.size(); ++i) {
            const Known& kn = known[i];
            SCOPED_TRACE(fmt::format("{} case {}", nb.spec, i));
            float out[2] = {-1, -1};
            SparseAttentionParams p;
            p.q = q;
            p.main.cache = cache.view();
            p.main.n_slots = 4;
            p.main.slots = kn.slots.data();
            p.main.width = static_cast<int64_t>(kn.slots.size());
            p.main.slots_stride = p.main.width;
            p.sink = std::isnan(kn.sink) ? nullptr : &kn.sink;
            p.out = out;
            p.scale = 1.0f;
            p.n_tokens = 1;
            p.n_heads = 1;
            p.qk_dim = 3;
            p.v_dim = 2;
            p.rope_dim = 1;
            p.q_token_stride = 3;
            p.q_head_stride = 3;
            p.out_token_stride = 2;
            p.out_head_stride = 2;
            std::vector<uint8_t> ws(nb.backend->sparse_attention_workspace_size(p) + 64);
            void* aligned = ws.data() + (64 - reinterpret_cast<uintptr_t>(ws.data()) % 64) % 64;
            ASSERT_TRUE(nb.backend->sparse_attention(p, {aligned, nb.backend->sparse_attention_workspace_size(p)}).is_ok());
            EXPECT_NEAR(out[0], kn.want0, 1e-6);
            EXPECT_NEAR(out[1], kn.want1, 1e-6);
        }
    }
}

// Non-finite inputs give non-finite outputs and only an empty row gives 0 (ops/sparse_attention.h), on ref and
// every backend, for both cache formats and q types, with and without a sink, over three chunks of 64
// listed entries. Cache slots 0-2 are corrupted: a NaN latent value (or e4m3 NaN byte), a NaN rope value,
// and an infinite latent value (fp8: a huge block scale, FLT_MAX · e4m3 overflowing to inf). Tokens:
//   0 clean entries: finite          1 no valid entry: exactly 0 (sink or not)
//   2 NaN in head 3's rope part of q: head 3 NaN     3 NaN in head 0's latent part of q: head 0 NaN
//   4 slot 0 listed first: NaN       5 slot 1 listed last, in the third chunk: NaN
//   6 slot 2 listed: non-finite      and a NaN sink of head 2: head 2 NaN in every non-empty token.
TEST(SparseAttentionConformance, MlaNonFiniteInputsGiveNonFiniteOutputsAndEmptyRowsZero) {
    auto backends = backends_under_test();
    backends.push_back({"ref", ref_backend()});
    auto ref = ref_backend();
    Rng rng(7104);
    const float nan = std::numeric_limits<float>::quiet_NaN();
    const int64_t r = 512, dr = 64, dqk = r + dr, H = 16, T = 7, K = 150, block_size = 16, n_blocks = 16;
    for (const auto format : {CacheRecordFormat::f32, CacheRecordFormat::fp8_v32})
        for (const DType q_type : {DType::f32, DType::bf16})
            for (const int sink_kind : {0, 1, 2}) {  // none, finite, finite with head 2 NaN
                SCOPED_TRACE(fmt::format("{} q {} sink {}", cache_record_format_name(format), dtype_name(q_type),
                                         sink_kind));
                PagedTestCache cache(n_blocks, block_size, latent_entry_bytes(format, r, dr));
                fill_latent_cache(*ref, cache, format, r, dr, rng);
                auto entry = [&](int64_t slot) {
                    return cache.buf.as<uint8_t>() + (slot / block_size) * cache.view().block_bytes +
                           (slot % block_size) * cache.view().entry_bytes;
                };
                const int64_t g = CacheRecordLayout{format, r + dr, dr}.group_size();
                if (format == CacheRecordFormat::f32) {
                    const float inf = kInf;
                    std::memcpy(entry(0) + 4 * 17, &nan, 4);        // latent dim 17
                    std::memcpy(entry(1) + 4 * (r + 9), &nan, 4);   // rope dim 9
                    std::memcpy(entry(2) + 4 * 300, &inf, 4);       // latent dim 300
                } else {
                    entry(0)[17] = 0x7f;                            // e4m3 NaN byte
                    const uint16_t nan_bf16 = f32_to_bf16(nan);
                    std::memcpy(entry(1) + r + 4 * (r / g) + 2 * 9, &nan_bf16, 2);
                    const float huge = std::numeric_limits<float>::max();
                    std::memcpy(entry(2) + r + 4 * 2, &huge, 4);    // the scale of latent dims [256, 384)
                }
                RowsLayout ql{T, H, dqk, H * dqk, dqk};
                RowsTensor q(ql, q_type);
                q.fill([&] { return rng.normal(1.0f); });
                auto poison_q = [&](int64_t tk, int64_t h, int64_t i) {
                    if (q_type == DType::bf16)
                        q.buf.as<uint16_t>()[ql.offset(tk, h, i)] = f32_to_bf16(nan);
                    else
                        q.buf.as<float>()[ql.offset(tk, h, i)] = nan;
                };
                poison_q(2, 3, r + 5);
                poison_q(3, 0, 7);
                std::vector<int32_t> slots(static_cast<size_t>(T * K), -1);
                for (int64_t tk = 0; tk < T; ++tk) {
                    if (tk == 1) continue;  // the empty row
                    for (int64_t j = 0; j < K; ++j)
                        if (!rng.coin(0.1)) slots[static_cast<size_t>(tk * K + j)] = static_cast<int32_t>(rng.integer(3, cache.n_slots() - 1));
                }
                slots[static_cast<size_t>(4 * K)] = 0;
                slots[static_cast<size_t>(5 * K + K - 1)] = 1;
                slots[static_cast<size_t>(6 * K + 40)] = 2;
                std::vector<float> sink(static_cast<size_t>(H));
                for (auto& v : sink) v = rng.normal(2.0f);
                if (sink_kind == 2) sink[2] = nan;
                auto expect = [&](int64_t tk, int64_t h) {
                    if (tk == 1) return RowExpect::zero;
                    if (tk >= 4) return tk == 6 ? RowExpect::non_finite : RowExpect::nan;
                    if ((tk == 2 && h == 3) || (tk == 3 && h == 0) || (sink_kind == 2 && h == 2)) return RowExpect::nan;
                    return RowExpect::finite;
                };
                for (auto& nb : backends) {
                    const RowsLayout ol{T, H, r, H * r, r};
                    RowsTensor out(ol, DType::f32);
                    SparseAttentionParams p;
                    p.q = q.data();
                    p.main.cache = cache.view();
                    p.main.format = format;
                    p.main.n_slots = cache.n_slots();
                    p.main.slots = slots.data();
                    p.main.width = K;
                    p.main.slots_stride = K;
                    p.sink = sink_kind ? sink.data() : nullptr;
                    p.out = out.data();
                    p.scale = 0.05f;
                    p.n_tokens = T;
                    p.n_heads = H;
                    p.qk_dim = dqk;
                    p.v_dim = r;
                    p.rope_dim = dr;
                    p.q_token_stride = H * dqk;
                    p.q_head_stride = dqk;
                    p.out_token_stride = H * r;
                    p.out_head_stride = r;
                    p.q_type = q_type;
                    const size_t ws_bytes = nb.backend->sparse_attention_workspace_size(p);
                    GuardedBuffer ws(std::max<size_t>(1, ws_bytes));
                    const Status st = nb.backend->sparse_attention(p, {ws.data(), ws_bytes});
                    ASSERT_TRUE(st.is_ok()) << nb.spec << ": " << st.to_string();
                    for (int64_t tk = 0; tk < T; ++tk)
                        for (int64_t h = 0; h < H; ++h) EXPECT_TRUE(row_is(out, tk, h, expect(tk, h), nb.spec));
                    EXPECT_TRUE(out.intact(nb.spec));
                }
            }
}

TEST(SparseAttentionValidate, MlaLayoutRejectsMalformedCalls) {
    PagedTestCache cache(2, 4, latent_entry_bytes(CacheRecordFormat::f32, 8, 2));
    std::vector<float> q(2 * 10, 0.0f), out(2 * 8, 0.0f);
    std::vector<int32_t> slots = {0, 7, -1, 3};
    auto base = [&] {
        SparseAttentionParams p;
        p.q = q.data();
        p.main.cache = cache.view();
        p.main.n_slots = cache.n_slots();
        p.main.slots = slots.data();
        p.main.width = 2;
        p.main.slots_stride = 2;
        p.out = out.data();
        p.scale = 0.5f;
        p.n_tokens = 2;
        p.n_heads = 1;
        p.qk_dim = 10;
        p.v_dim = 8;
        p.rope_dim = 2;
        p.q_token_stride = 10;
        p.q_head_stride = 10;
        p.out_token_stride = 8;
        p.out_head_stride = 8;
        return p;
    };
    EXPECT_TRUE(validate(base()).is_ok());
    auto expect_bad = [&](SparseAttentionParams p, StatusCode code, const char* needle) {
        const Status s = validate(p);
        EXPECT_EQ(s.code(), code) << s.to_string();
        EXPECT_NE(s.message().find(needle), std::string::npos) << s.to_string();
    };
    // Found by check_indices (the slots): validate (which reads no array) accepts.
    auto expect_bad_indices = [&](SparseAttentionParams p, StatusCode code, const char* needle) {
        EXPECT_TRUE(validate(p).is_ok()) << validate(p).to_string();
        for (const Status& s : {check_indices(p), validate_and_check_indices(p)}) {
            EXPECT_EQ(s.code(), code) << s.to_string();
            EXPECT_NE(s.message().find(needle), std::string::npos) << s.to_string();
        }
    };
    auto p = base();
    slots[1] = 8;
    expect_bad_indices(p, StatusCode::invalid_argument, "main.slots[0, 1] = 8");
    slots[1] = -2;
    expect_bad_indices(p, StatusCode::invalid_argument, "main.slots[0, 1] = -2");
    slots[1] = 7;
    p = base();
    p.scale = 0.0f;
    expect_bad(p, StatusCode::invalid_argument, "scale");
    // The cache view is geometry, not an index: validate checks it (a device backend runs validate only).
    p = base();
    p.main.cache.entry_bytes = 36;
    expect_bad(p, StatusCode::invalid_argument, "entry_bytes = 36");
    p = base();
    p.main.format = CacheRecordFormat::fp8_v32;
    p.qk_dim = 194;  // R = 192: not a multiple of its 128-value scale group
    expect_bad(p, StatusCode::unsupported, "qk_dim = 194");
    p = base();
    p.out = q.data();  // overlaps q
    expect_bad(p, StatusCode::invalid_argument, "overlap");
    p = base();
    p.out_token_stride = 4;  // output rows overlap
    expect_bad(p, StatusCode::invalid_argument, "out_token_stride");
    p = base();
    p.q_type = DType::f8_e4m3;
    expect_bad(p, StatusCode::invalid_argument, "q_type");
    p = base();
    p.main.n_slots = 6;  // not whole blocks
    expect_bad(p, StatusCode::invalid_argument, "n_slots = 6");
}

}  // namespace
}  // namespace sieve::test
