// ops/sparse_mqa.h: every cpu backend against ref (f32 and fp8_model1 caches, −1 holes, duplicated
// slots, tokens with no valid row, with and without a sink, bf16 / f32, strided q / out, decode-sized
// batches that split heads), with tolerances derived from the dot-product length; and the semantics
// of the sink against values computed by hand.
#include <cmath>
#include <limits>

#include "dsv4_cache_util.h"
#include "ops/cache_record.h"
#include "ops/cache_store.h"
#include "ops/kv_load.h"
#include "ops/sparse_mqa.h"

namespace sieve::test {
namespace {

enum class SinkValues { random, minus_inf, huge };  // normal(2); −inf (no virtual key); 1e30 (it takes all the weight)

struct MqaCase {
    int64_t n_tokens, n_heads, head_dim, rope_dim, n_window, n_compressed;
    CacheRecordFormat window_format, compressed_format;
    bool sink, padded;
    DType q_type, out_type;
    SinkValues sink_values = SinkValues::random;
    bool all_holes = false;  // every slot of every token is −1
};

// Fills `n` entries of a cache with random rows through ref cache_store; returns their slots.
std::vector<int32_t> fill_cache(Backend& ref, Rng& rng, TestCache& cache, const CacheRecordLayout& l, int64_t n) {
    std::vector<float> rows(static_cast<size_t>(n * l.dim));
    for (float& v : rows) v = rng.normal(1.0f);
    std::vector<int32_t> slots = random_slots(rng, n, cache.capacity());
    CacheStoreParams p;
    p.x = rows.data();
    p.slots = slots.data();
    p.cache = cache.view();
    p.layout = l;
    p.n_slots = cache.capacity();
    p.n_rows = n;
    p.dim = l.dim;
    p.x_row_stride = l.dim;
    p.round_bf16 = true;
    EXPECT_TRUE(ref.cache_store(p).is_ok());
    return slots;
}

std::vector<float> load_rows(Backend& ref, TestCache& cache, const CacheRecordLayout& l, const std::vector<int32_t>& slots) {
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

void check_cases(const std::vector<MqaCase>& cases, Rng& rng);

TEST(SparseMqaConformance, EveryBackendMatchesRef) {
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
    check_cases(cases, rng);
}

// The shapes of the chunked kernel's edges (rows in chunks of 64, heads in register blocks of 4, decode
// tokens split by heads): many tokens, row counts across chunk boundaries and not multiples of the
// chunk or the vector width, V4-Flash / -Pro head counts at head_dim 512, lists of only −1, and the
// sink at −inf (no virtual key) and at 1e30 (the virtual key takes all the weight: o ≈ 0).
TEST(SparseMqaConformance, ChunkEdgesAndRealShapes) {
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
    check_cases(cases, rng);
}

void check_cases(const std::vector<MqaCase>& cases, Rng& rng) {
    auto ref = ref_backend();
    auto backends = backends_under_test();
    for (size_t ci = 0; ci < cases.size(); ++ci) {
        const MqaCase& c = cases[ci];
        SCOPED_TRACE(fmt::format("case {}: T {} H {} d {} r {} window {} ({}) compressed {} ({}) sink {} ({}) q {} out {}{}", ci,
                                 c.n_tokens, c.n_heads, c.head_dim, c.rope_dim, c.n_window,
                                 cache_record_format_name(c.window_format), c.n_compressed,
                                 cache_record_format_name(c.compressed_format), c.sink, static_cast<int>(c.sink_values),
                                 dtype_name(c.q_type), dtype_name(c.out_type), c.all_holes ? " only -1" : ""));
        const CacheRecordLayout wl{c.window_format, c.head_dim, c.rope_dim}, cl{c.compressed_format, c.head_dim, c.rope_dim};
        TestCache wcache(wl.entry_bytes(), 3, 8), ccache(cl.entry_bytes(), 5, 6);
        const std::vector<int32_t> wslots_all = fill_cache(*ref, rng, wcache, wl, 20);
        const std::vector<int32_t> cslots_all = fill_cache(*ref, rng, ccache, cl, 25);
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

        auto run = [&](Backend& b, RowsTensor& out) {
            SparseMqaParams p;
            p.q = q.data();
            p.q_type = c.q_type;
            p.q_token_stride = ql.token_stride;
            p.q_head_stride = ql.head_stride;
            p.window = wcache.view();
            p.window_format = c.window_format;
            p.window_slots = wlist.data();
            p.n_window = c.n_window;
            p.window_slots_stride = ws;
            p.compressed = ccache.view();
            p.compressed_format = c.compressed_format;
            p.compressed_slots = c.n_compressed ? clist.data() : nullptr;
            p.n_compressed = c.n_compressed;
            p.compressed_slots_stride = cs;
            p.sink = c.sink ? sink.data() : nullptr;
            p.scale = scale;
            p.out = out.data();
            p.out_type = c.out_type;
            p.out_token_stride = ol.token_stride;
            p.out_head_stride = ol.head_stride;
            p.n_tokens = c.n_tokens;
            p.n_heads = c.n_heads;
            p.head_dim = c.head_dim;
            p.rope_dim = c.rope_dim;
            GuardedBuffer w(std::max<size_t>(b.sparse_mqa_workspace_size(p), 1));
            const Status st = b.sparse_mqa(p, Workspace{w.data(), b.sparse_mqa_workspace_size(p)});
            EXPECT_TRUE(w.guards_intact("sparse_mqa workspace"));
            return st;
        };
        RowsTensor want(ol, c.out_type);
        ASSERT_TRUE(run(*ref, want).is_ok());

        // Tolerance (the harness's rules): a logit l_j = scale·<q, v_j> is off by at most
        // ε_l = |scale|·γ_{d+1}·Σ_i|q_i v_ji| (+ one rounding), so each softmax weight by a relative
        // 2ε_l + a few u (exp, max shift); o is a convex combination of rows (and 0 for the sink), so a
        // relative weight error δ moves it by ≤ 2δ·max|v|, and its own accumulation adds γ_{n+2}·max|v|
        // (doubled: the normalisation by the reciprocal rounds once more; factor 2 of margin on δ).
        std::vector<double> tol;
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
                    const double w = want.get(t, h, i);
                    tol.push_back(bound + (c.out_type == DType::bf16 ? bf16_ulp(std::fabs(w) + bound) : 0.0));
                }
            }
        }
        for (auto& nb : backends) {
            SCOPED_TRACE(nb.spec);
            RowsTensor got(ol, c.out_type);
            const Status st = run(*nb.backend, got);
            ASSERT_TRUE(st.is_ok()) << st.to_string();
            EXPECT_TRUE(all_close(want.values(), got.values(), tol, "sparse_mqa out"));
            EXPECT_TRUE(got.intact("sparse_mqa out"));
            for (int64_t t = 0; t < c.n_tokens; ++t) {  // tokens without valid rows: exactly 0 (§3.8)
                if (!c.all_holes && (t < c.n_tokens - 1 || c.n_tokens == 1)) continue;
                for (int64_t h = 0; h < c.n_heads; ++h)
                    for (int64_t i = 0; i < c.head_dim; ++i) ASSERT_EQ(got.get(t, h, i), 0.0f);
            }
        }
    }
}

// The sink semantics by hand: one row v with logit l, sink s: o = v·e^l / (e^l + e^s).
TEST(SparseMqaKnownValues, SinkDuplicatesAndEmptyLists) {
    auto ref = ref_backend();
    auto backends = host_backends_under_test();
    std::vector<Backend*> all = {ref.get()};
    for (auto& nb : backends) all.push_back(nb.backend.get());
    const CacheRecordLayout l{CacheRecordFormat::f32, 4, 0};
    TestCache cache(l.entry_bytes(), 2, 2);
    // rows: slot 0 = (1, 2, 3, 4), slot 3 = (−4, 0, 0, 0)
    float* base0 = reinterpret_cast<float*>(cache.view().row(0));
    float* base3 = reinterpret_cast<float*>(cache.view().row(3));
    const float r0[4] = {1, 2, 3, 4}, r3[4] = {-4, 0, 0, 0};
    std::memcpy(base0, r0, 16);
    std::memcpy(base3, r3, 16);
    const float q[2][4] = {{0.5f, 0, 0, 0}, {0.25f, 0, 0, 0}};  // head 0: l0 = 0.5, l3 = −2 (scale 1)
    const float sink[2] = {0.0f, -1e30f};
    for (Backend* b : all) {
        SCOPED_TRACE(b->name());
        auto attend = [&](std::vector<int32_t> window, const float* sink_ptr) {
            std::vector<float> out(8, 99.0f);
            SparseMqaParams p;
            p.q = q;
            p.q_token_stride = 8;
            p.q_head_stride = 4;
            p.window = cache.view();
            p.window_slots = window.data();
            p.n_window = static_cast<int64_t>(window.size());
            p.window_slots_stride = p.n_window;
            p.sink = sink_ptr;
            p.scale = 1.0f;
            p.out = out.data();
            p.out_token_stride = 8;
            p.out_head_stride = 4;
            p.n_tokens = 1;
            p.n_heads = 2;
            p.head_dim = 4;
            GuardedBuffer w(std::max<size_t>(b->sparse_mqa_workspace_size(p), 1));
            EXPECT_TRUE(b->sparse_mqa(p, Workspace{w.data(), b->sparse_mqa_workspace_size(p)}).is_ok());
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
    }
}

// Non-finite inputs give non-finite outputs and only a token without valid rows gives 0 (ops/sparse_mqa.h),
// on ref and every backend, q f32 and bf16, with and without a sink, over a window list and a compressed
// list of four chunks in all. f32 rows; slots 0 and 1 hold a NaN, slot 2 an inf. Tokens:
//   0 clean rows: finite      1 no valid row: exactly 0      2 NaN in head 3 of q: head 3 NaN
//   3 slot 0 first in the window list: NaN      4 slot 1 last in the compressed list: NaN
//   5 slot 2 listed: non-finite      and a NaN sink of head 2: head 2 NaN in every non-empty token.
TEST(SparseMqaConformance, NonFiniteInputsGiveNonFiniteOutputsAndEmptyRowsZero) {
    auto backends = backends_under_test();
    backends.push_back({"ref", ref_backend()});
    Rng rng(4205);
    const float nan = std::numeric_limits<float>::quiet_NaN(), inf = std::numeric_limits<float>::infinity();
    const CacheRecordLayout l{CacheRecordFormat::f32, 512, 0};
    const int64_t d = l.dim, H = 16, T = 6, NW = 128, NC = 100;
    TestCache window(l.entry_bytes(), 16, 16), compressed(l.entry_bytes(), 16, 16);
    for (TestCache* c : {&window, &compressed})
        for (int64_t slot = 0; slot < c->capacity(); ++slot) {
            float* row = reinterpret_cast<float*>(c->view().row(slot));
            for (int64_t i = 0; i < d; ++i) row[i] = rng.normal(1.0f);
        }
    reinterpret_cast<float*>(window.view().row(0))[17] = nan;
    reinterpret_cast<float*>(compressed.view().row(1))[400] = nan;
    reinterpret_cast<float*>(window.view().row(2))[300] = inf;
    std::vector<int32_t> wslots(static_cast<size_t>(T * NW), -1), cslots(static_cast<size_t>(T * NC), -1);
    for (int64_t tk = 0; tk < T; ++tk) {
        if (tk == 1) continue;  // no valid row
        for (int64_t j = 0; j < NW; ++j)
            if (!rng.coin(0.1)) wslots[static_cast<size_t>(tk * NW + j)] = static_cast<int32_t>(rng.integer(3, window.capacity() - 1));
        for (int64_t j = 0; j < NC; ++j)
            if (!rng.coin(0.1)) cslots[static_cast<size_t>(tk * NC + j)] = static_cast<int32_t>(rng.integer(3, compressed.capacity() - 1));
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
            for (auto& nb : backends) {
                RowsTensor out(RowsLayout{T, H, d, H * d, d}, DType::f32);
                SparseMqaParams p;
                p.q = q.data();
                p.q_type = q_type;
                p.q_token_stride = H * d;
                p.q_head_stride = d;
                p.window = window.view();
                p.window_slots = wslots.data();
                p.n_window = NW;
                p.window_slots_stride = NW;
                p.compressed = compressed.view();
                p.compressed_slots = cslots.data();
                p.n_compressed = NC;
                p.compressed_slots_stride = NC;
                p.sink = sink_kind ? sink.data() : nullptr;
                p.scale = 0.05f;
                p.out = out.data();
                p.out_token_stride = H * d;
                p.out_head_stride = d;
                p.n_tokens = T;
                p.n_heads = H;
                p.head_dim = d;
                const size_t ws_bytes = nb.backend->sparse_mqa_workspace_size(p);
                GuardedBuffer ws(std::max<size_t>(ws_bytes, 1));
                const Status st = nb.backend->sparse_mqa(p, Workspace{ws.data(), ws_bytes});
                ASSERT_TRUE(st.is_ok()) << nb.spec << ": " << st.to_string();
                for (int64_t tk = 0; tk < T; ++tk)
                    for (int64_t h = 0; h < H; ++h) EXPECT_TRUE(row_is(out, tk, h, expect(tk, h), nb.spec));
                EXPECT_TRUE(out.intact(nb.spec));
            }
        }
}

TEST(SparseMqaValidate, RejectsBadInputs) {
    const CacheRecordLayout l{CacheRecordFormat::fp8_model1, 32, 8};
    TestCache cache(l.entry_bytes(), 2, 2);
    float q[32] = {}, out[32];
    int32_t slots[2] = {0, -1};
    SparseMqaParams p;
    p.q = q;
    p.out = out;
    p.window = cache.view();
    p.window_format = CacheRecordFormat::fp8_model1;
    p.window_slots = slots;
    p.n_window = 2;
    p.window_slots_stride = 2;
    p.n_tokens = 1;
    p.n_heads = 1;
    p.head_dim = 32;
    p.rope_dim = 8;
    p.q_token_stride = p.out_token_stride = 32;
    EXPECT_TRUE(validate(p).is_ok()) << validate(p).message();
    SparseMqaParams b = p;
    b.window_format = CacheRecordFormat::f32;  // entry bytes 128 ≠ 48
    EXPECT_NE(validate(b).message().find("entry_bytes"), std::string::npos);
    b = p;
    b.n_compressed = 3;  // no list
    EXPECT_NE(validate(b).message().find("compressed_slots is null"), std::string::npos) << validate(b).message();
    b = p;
    slots[1] = -3;
    EXPECT_TRUE(validate(b).is_ok());
    EXPECT_NE(check_indices(b).message().find("window_slots[0, 1] = -3"), std::string::npos) << check_indices(b).message();
    for (auto& nb : host_backends_under_test()) {  // the host backends run check_indices
        const size_t ws_bytes = nb.backend->sparse_mqa_workspace_size(b);
        GuardedBuffer ws(std::max<size_t>(ws_bytes, 1));
        EXPECT_NE(nb.backend->sparse_mqa(b, {ws.data(), ws_bytes}).message().find("window_slots[0, 1] = -3"),
                  std::string::npos)
            << nb.spec;
    }
    slots[1] = -1;
    b = p;
    int32_t compressed_slots[2] = {-1, -5};
    b.compressed = cache.view();
    b.compressed_format = CacheRecordFormat::fp8_model1;
    b.compressed_slots = compressed_slots;
    b.n_compressed = 2;
    b.compressed_slots_stride = 2;
    EXPECT_TRUE(validate(b).is_ok()) << validate(b).message();
    EXPECT_NE(check_indices(b).message().find("compressed_slots[0, 1] = -5"), std::string::npos)
        << check_indices(b).message();
    compressed_slots[1] = 1;
    EXPECT_TRUE(check_indices(b).is_ok()) << check_indices(b).message();
    b = p;
    b.out = q;  // out overlaps q
    EXPECT_EQ(validate(b).code(), StatusCode::invalid_argument);
    b = p;
    b.scale = NAN;
    EXPECT_EQ(validate(b).code(), StatusCode::invalid_argument);
}

}  // namespace
}  // namespace sieve::test
