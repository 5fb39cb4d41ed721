// ops/indexer_scores.h, the one indexer-scores op of every family: ref and every backend against the
// contract's formula computed here in double, over paged block tables (a random block permutation, so a
// kernel that ignores the table reads the wrong keys), several requests, ragged candidate counts, every q
// format (f32, bf16, e4m3 with its scale) and key format (f32, bf16, fp8_row_scale), with and without head
// weights, few heads (QSA: 4) and many (V4, DSA: 64), strided q / weights / scores, key counts past one
// key tile and one decode token over 40000 keys; columns past n_keys untouched; the weight scale as one
// fp32 product; the fused selection exactly the top-k of the backend's own scores, with and without score
// rows; the group top-k the QSA layer runs on kept score rows; hand-computed values; validate() and
// check_indices() rejections.
#include <algorithm>
#include <cmath>
#include <cstring>

#include "paged_cache.h"
#include "sieve/ops/cache_store.h"
#include "sieve/ops/indexer_scores.h"
#include "sieve/ops/op_common.h"
#include "sieve/ops/topk.h"

namespace sieve::test {
namespace {

struct ScoreCase {
    int64_t n_tokens, n_heads, head_dim, n_requests, block_size;
    DType q_type;
    CacheRecordFormat key_format;
    bool weights;     // head weights given (V4, DSA) or nullptr (QSA)
    bool padded;      // strided q, weights and score rows, spare bytes per cache block
    float q_bias;     // shifts q negative: many heads ≤ 0, many exact-zero scores
    int64_t max_entries = 300;  // entries per request: up to this many
    bool all_keys = false;      // every token scores every entry of its request
    int64_t min_entries = 0;    // entries per request: at least this many
};

std::vector<ScoreCase> score_cases() {
    using F = CacheRecordFormat;
    return {
        // QSA: 4 heads, no weights, f32 / bf16 q and keys.
        {1, 4, 128, 1, 16, DType::f32, F::f32, false, false, 0.0f},       // decode, real indexer shape
        {1, 4, 128, 1, 16, DType::bf16, F::bf16, false, true, 0.0f},
        {7, 4, 16, 3, 4, DType::f32, F::f32, false, true, -0.5f},         // fixture shape, many zero scores
        {5, 1, 1, 2, 1, DType::f32, F::bf16, false, false, 0.0f},
        {9, 3, 37, 2, 5, DType::bf16, F::f32, false, true, -1.0f},
        {33, 4, 64, 4, 16, DType::bf16, F::bf16, false, false, 0.0f},
        {2, 8, 130, 1, 3, DType::f32, F::f32, false, true, 0.25f},
        {4, 2, 8, 1, 16, DType::f32, F::f32, false, false, -3.0f},        // nearly all heads ≤ 0: rows of 0s
        {3, 4, 128, 2, 64, DType::bf16, F::bf16, false, false, 0.0f},     // several key tiles per request
        // Several bf16 tokens per request (the cpu backend's keys-in-lanes path at avx512_bf16: 16 / heads
        // tokens a group): a prefill chunk over several key tiles, odd dims and head counts that leave
        // accumulators unused, one head, and more heads than a group of two tokens holds.
        {20, 4, 128, 1, 16, DType::bf16, F::bf16, false, false, 0.0f, 1100, true},
        {24, 3, 37, 2, 5, DType::bf16, F::bf16, false, true, -1.0f, 300},
        {17, 1, 3, 1, 4, DType::bf16, F::bf16, false, true, 0.0f},
        {21, 5, 64, 3, 8, DType::bf16, F::bf16, true, true, -0.25f, 400},
        {12, 9, 40, 2, 16, DType::bf16, F::bf16, true, false, 0.0f},
        // Few heads with weights (the dims-in-lanes kernel with per-head weights, both dot paths).
        {6, 4, 128, 2, 16, DType::bf16, F::bf16, true, false, 0.0f},
        {6, 4, 64, 2, 8, DType::f32, F::f32, true, true, -0.25f},
        // DeepSeek-V4: bf16 / f32 q, f32 / fp8_row_scale keys, weights.
        {4, 64, 128, 3, 5, DType::bf16, F::fp8_row_scale, true, true, 0.0f},
        {9, 8, 20, 1, 4, DType::f32, F::f32, true, false, 0.0f},
        {1, 64, 16, 3, 16, DType::bf16, F::f32, true, true, 0.0f},
        {48, 64, 128, 1, 64, DType::bf16, F::fp8_row_scale, true, true, 0.0f, 700},
        {20, 64, 128, 2, 16, DType::f32, F::f32, true, false, 0.0f, 1100, true},
        {30, 24, 33, 3, 8, DType::bf16, F::fp8_row_scale, true, true, 0.0f, 530},  // odd dims: a zero bf16 partner
        {9, 16, 65, 2, 4, DType::f32, F::fp8_row_scale, true, false, 0.0f, 300, true},
        // DSA: e4m3 q with its scale and fp8_row_scale keys, f32 q and keys.
        {8, 16, 6, 2, 4, DType::f32, F::f32, true, false, 0.0f},
        {8, 16, 5, 3, 4, DType::f8_e4m3, F::fp8_row_scale, true, true, 0.0f},
        {64, 128, 3, 1, 64, DType::f8_e4m3, F::fp8_row_scale, true, false, 0.0f},
        {64, 128, 40, 1, 64, DType::f8_e4m3, F::fp8_row_scale, true, true, 0.0f, 1300},
        {17, 33, 24, 2, 16, DType::f8_e4m3, F::fp8_row_scale, true, false, 0.0f, 1300},
        {7, 128, 2, 2, 16, DType::f8_e4m3, F::fp8_row_scale, true, true, 0.0f},
        // The deployed shape (cuda: the wgmma kernel), odd blocks with many heads ≤ 0, fewer heads and dims.
        {24, 64, 128, 3, 64, DType::f8_e4m3, F::fp8_row_scale, true, true, 0.0f, 700},
        {9, 64, 128, 2, 5, DType::f8_e4m3, F::fp8_row_scale, true, false, -0.5f, 300},
        {6, 48, 72, 2, 16, DType::f8_e4m3, F::fp8_row_scale, true, true, 0.0f, 400},
        // Deployed key layouts in larger blocks (cuda: runs of 64 entries inside a block), bf16 and e4m3 q.
        {12, 64, 128, 2, 128, DType::bf16, F::fp8_row_scale, true, false, 0.0f, 900},
        {10, 32, 128, 3, 256, DType::f8_e4m3, F::fp8_row_scale, true, true, -0.5f, 1500},
        // Many key tiles for every thread block (cuda: each kernel's ring of stages wraps around).
        {64, 8, 128, 1, 64, DType::bf16, F::fp8_row_scale, true, false, 0.0f, 6000, true, 6000},
        // Combinations no family uses today, which the contract allows.
        {5, 64, 32, 2, 8, DType::f32, F::bf16, true, true, 0.0f},
        {5, 4, 16, 2, 8, DType::f8_e4m3, F::f32, false, false, 0.0f},
        {5, 2, 16, 2, 8, DType::bf16, F::fp8_row_scale, false, true, 0.0f},
    };
}

// One case's inputs: the key cache (entries through ref cache_store or written directly), q, the head
// weights and q scales, each token's request and candidate count.
struct ScoreSetup {
    ScoreCase c;
    RowsLayout ql;
    GuardedBuffer q;
    std::vector<float> w, w_pre, q_scale;
    int64_t w_stride = 0;
    float weight_scale = 1.0f;
    std::unique_ptr<PagedTestCache> keys;
    std::vector<int32_t> token_request, n_keys;
    int64_t n_cols = 0, row_stride = 0;
    CacheRecordLayout layout() const { return {c.key_format, c.head_dim, 0}; }

    ScoreSetup(Rng& rng, const ScoreCase& sc, Backend& ref)
        : c(sc),
          ql(make_rows_layout(rng, sc.n_tokens, sc.n_heads, sc.head_dim, sc.padded)),
          q(static_cast<size_t>(std::max<int64_t>(ql.extent(), 1)) * dtype_size(sc.q_type)) {
        for (int64_t t = 0; t < c.n_tokens; ++t)
            for (int64_t h = 0; h < c.n_heads; ++h)
                for (int64_t i = 0; i < c.head_dim; ++i) {
                    const int64_t o = ql.offset(t, h, i);
                    const float v = rng.normal(1.0f) + c.q_bias;
                    if (c.q_type == DType::f8_e4m3) {
                        uint8_t b = static_cast<uint8_t>(rng.integer(0, 255));
                        if ((b & 0x7f) == 0x7f) b = 0x38;  // no NaN codes in q
                        q.as<uint8_t>()[o] = b;
                    } else if (c.q_type == DType::bf16) {
                        q.as<uint16_t>()[o] = f32_to_bf16(v);
                    } else {
                        q.as<float>()[o] = v;
                    }
                }
        w_stride = c.n_heads + (c.padded ? 2 : 0);
        w.resize(static_cast<size_t>(c.n_tokens * w_stride));
        q_scale.resize(w.size());
        for (float& v : w) v = rng.normal(1.0f);
        for (float& v : q_scale) v = std::ldexp(1.0f, static_cast<int>(rng.integer(-8, 2)));
        weight_scale = rng.pick<float>({1.0f, 0.125f, 0.011048543f});
        // The weights scaled by the caller in fp32, which the op must reproduce bit for bit with scale 1.
        w_pre.resize(w.size());
        for (size_t i = 0; i < w.size(); ++i) w_pre[i] = w[i] * weight_scale;

        std::vector<int64_t> entries(static_cast<size_t>(c.n_requests));
        for (auto& e : entries) e = rng.integer(c.min_entries, c.max_entries);
        for (int64_t t = 0; t < c.n_tokens; ++t) {
            const int32_t r = static_cast<int32_t>(rng.integer(0, c.n_requests - 1));
            token_request.push_back(r);
            const int64_t avail = entries[static_cast<size_t>(r)];
            const int64_t choice = c.all_keys ? 1 : rng.integer(0, 3);
            n_keys.push_back(static_cast<int32_t>(choice == 0 ? 0 : choice == 1 ? avail : rng.integer(0, avail)));
            n_cols = std::max<int64_t>(n_cols, n_keys.back());
        }
        n_cols += rng.integer(0, 2);
        row_stride = n_cols + (c.padded ? rng.integer(1, 5) : 0);
        keys = std::make_unique<PagedTestCache>(rng, entries, c.block_size, layout().entry_bytes(), c.padded ? 32 : 0);
        if (c.key_format == CacheRecordFormat::fp8_row_scale) {  // quantized by the store op, as the models do
            for (size_t r = 0; r < entries.size(); ++r) {
                const int64_t n = entries[r];
                if (n == 0) continue;
                std::vector<float> x(static_cast<size_t>(n * c.head_dim));
                for (float& v : x) v = rng.normal(1.0f);
                std::vector<int32_t> slots(static_cast<size_t>(n));
                for (int64_t e = 0; e < n; ++e) slots[static_cast<size_t>(e)] = static_cast<int32_t>(keys->slot(static_cast<int64_t>(r), e));
                CacheStoreParams sp;
                sp.x = x.data();
                sp.slots = slots.data();
                sp.cache = keys->view();
                sp.layout = layout();
                sp.n_slots = keys->n_slots();
                sp.n_rows = n;
                sp.dim = c.head_dim;
                sp.x_row_stride = c.head_dim;
                EXPECT_TRUE(ref.cache_store(sp).is_ok());
            }
        } else {
            keys->fill(c.key_format == CacheRecordFormat::bf16 ? DType::bf16 : DType::f32, c.head_dim,
                       [&] { return rng.normal(1.0f); });
        }
    }

    IndexerScoresParams params(float* scores, bool prescaled = false) const {
        IndexerScoresParams p;
        p.q = q.data();
        p.q_type = c.q_type;
        p.q_token_stride = ql.token_stride;
        p.q_head_stride = ql.head_stride;
        if (c.q_type == DType::f8_e4m3) {
            p.q_scale = q_scale.data();
            p.q_scale_token_stride = w_stride;
        }
        if (c.weights) {
            p.weights = prescaled ? w_pre.data() : w.data();
            p.weights_token_stride = w_stride;
        }
        p.weight_scale = prescaled ? 1.0f : weight_scale;
        p.keys = keys->view();
        p.key_format = c.key_format;
        p.n_slots = keys->n_slots();
        p.tables = keys->tables(token_request);
        p.n_keys = n_keys.data();
        p.scores = scores;
        p.n_tokens = c.n_tokens;
        p.n_heads = c.n_heads;
        p.head_dim = c.head_dim;
        p.n_cols = n_cols;
        p.scores_row_stride = row_stride;
        return p;
    }
    IndexerScoresParams fused_params(float* scores, int32_t* selected, int64_t k) const {
        IndexerScoresParams p = params(scores);
        p.selected = selected;
        p.k = k;
        p.selected_row_stride = k;
        return p;
    }
    TopkParams topk_params(const float* scores, int64_t k, int32_t* out) const {
        TopkParams p;
        p.scores = scores;
        p.valid_len = n_keys.data();
        p.out = out;
        p.n_rows = c.n_tokens;
        p.n_cols = n_cols;
        p.k = k;
        p.scores_row_stride = row_stride;
        p.out_row_stride = k;
        return p;
    }
    size_t score_bytes() const { return static_cast<size_t>(std::max<int64_t>(1, c.n_tokens * row_stride)) * 4; }

    double q_value(int64_t t, int64_t h, int64_t i) const {
        const int64_t o = ql.offset(t, h, i);
        if (c.q_type == DType::f8_e4m3) return fp8_e4m3_to_f32(q.as<uint8_t>()[o]);
        return load_as_f32(q.data(), c.q_type, o);
    }
    // The contract's score of entry j for token t, exactly (double), and its bound for an fp32 evaluation:
    // each head's dot within γ_{D+1}·Σ|q_i·v_i| (harness.h), unchanged by the ReLU (1-Lipschitz), weighted
    // by |w_h|; the head sum γ_{H+1}·Σ|w_h·ReLU|; the common factor (key scale, weight_scale without
    // weights) one rounding more; then ref's own rounding of the result.
    std::pair<double, double> exact(int64_t t, int64_t j) const {
        const int64_t slot = keys->slot(token_request[static_cast<size_t>(t)], j);
        const CacheView v = keys->view();
        const uint8_t* data = cache_record_data(v, layout(), slot);
        double ks = 1.0;
        std::vector<double> key(static_cast<size_t>(c.head_dim));
        for (int64_t i = 0; i < c.head_dim; ++i) {
            if (c.key_format == CacheRecordFormat::fp8_row_scale)
                key[static_cast<size_t>(i)] = fp8_e4m3_to_f32(data[i]);
            else
                key[static_cast<size_t>(i)] = load_as_f32(data, c.key_format == CacheRecordFormat::bf16 ? DType::bf16 : DType::f32, i);
        }
        if (c.key_format == CacheRecordFormat::fp8_row_scale) {
            float s;
            std::memcpy(&s, cache_record_scales(v, layout(), slot), 4);
            ks = s;
        }
        double total = 0, bound = 0, mass = 0;
        for (int64_t h = 0; h < c.n_heads; ++h) {
            float wh = c.weights ? w_pre[static_cast<size_t>(t * w_stride + h)] : weight_scale;
            if (c.q_type == DType::f8_e4m3) wh = wh * q_scale[static_cast<size_t>(t * w_stride + h)];
            double d = 0, sabs = 0;
            for (int64_t i = 0; i < c.head_dim; ++i) {
                const double pr = q_value(t, h, i) * key[static_cast<size_t>(i)];
                d += pr;
                sabs += std::fabs(pr);
            }
            total += wh * std::max(d, 0.0);
            mass += std::fabs(wh * std::max(d, 0.0));
            bound += std::fabs(wh) * gamma_n(static_cast<double>(c.head_dim) + 1.0) * sabs;
        }
        const double tol = ks * (bound + (gamma_n(static_cast<double>(c.n_heads) + 1.0) + 4.0 * kU) * mass) +
                           2.0 * kU * std::fabs(ks * total) + 1e-30;
        return {ks * total, tol};
    }
};

Status run_scores(Backend& b, const IndexerScoresParams& p) {
    const size_t bytes = b.indexer_scores_workspace_size(p);
    GuardedBuffer ws(std::max<size_t>(bytes, 1));
    const Status st = b.indexer_scores(p, {ws.data(), bytes});
    EXPECT_TRUE(ws.guards_intact("indexer_scores workspace"));
    return st;
}

std::string case_name(const ScoreCase& c) {
    return fmt::format("T {} H {} D {} requests {} B {} q {} keys {}{}", c.n_tokens, c.n_heads, c.head_dim, c.n_requests,
                       c.block_size, dtype_name(c.q_type), cache_record_format_name(c.key_format),
                       c.weights ? " weights" : "");
}

TEST(IndexerScoresConformance, EveryBackendMatchesTheFormula) {
    auto ref = ref_backend();
    auto backends = backends_under_test();
    Rng rng(4404);
    for (const ScoreCase& sc : score_cases()) {
        SCOPED_TRACE(case_name(sc));
        ScoreSetup s(rng, sc, *ref);
        std::vector<double> want, tol;
        for (int64_t t = 0; t < sc.n_tokens; ++t)
            for (int64_t j = 0; j < s.n_keys[static_cast<size_t>(t)]; ++j) {
                const auto [v, e] = s.exact(t, j);
                want.push_back(v);
                tol.push_back(e);
            }
        for (auto& [name, b] : ref_and(*ref, backends)) {
            SCOPED_TRACE(name);
            GuardedBuffer got(s.score_bytes());
            const Status st = run_scores(*b, s.params(got.as<float>()));
            ASSERT_TRUE(st.is_ok()) << st.to_string();
            std::vector<double> got_v;
            for (int64_t t = 0; t < sc.n_tokens; ++t)
                for (int64_t j = 0; j < s.n_keys[static_cast<size_t>(t)]; ++j)
                    got_v.push_back(got.as<float>()[t * s.row_stride + j]);
            EXPECT_TRUE(all_close(want, got_v, tol, "scores"));
            // Columns j ≥ n_keys[t] and the row padding are never written.
            for (int64_t t = 0; t < sc.n_tokens; ++t)
                for (int64_t j = s.n_keys[static_cast<size_t>(t)]; j < s.row_stride; ++j) {
                    uint32_t bits;
                    std::memcpy(&bits, got.as<float>() + t * s.row_stride + j, 4);
                    ASSERT_EQ(bits, 0x7f7f7f7fu) << "column " << j << " of token " << t << " written";
                }
            EXPECT_TRUE(got.guards_intact("scores"));
            if (sc.weights) {  // weight_scale is one fp32 product per head weight
                GuardedBuffer pre(s.score_bytes());
                ASSERT_TRUE(run_scores(*b, s.params(pre.as<float>(), true)).is_ok());
                for (int64_t t = 0; t < sc.n_tokens; ++t)
                    EXPECT_TRUE(bytes_equal(pre.as<float>() + t * s.row_stride, got.as<float>() + t * s.row_stride,
                                            static_cast<size_t>(s.n_keys[static_cast<size_t>(t)]) * 4,
                                            "weights pre-scaled in fp32"));
            }
            // The fused selection is exactly the top-k of this backend's own scores, with or without score
            // rows written (k below, around and above the candidate counts); a row without candidates is −1.
            for (int64_t k : {int64_t{1}, std::max<int64_t>(1, s.n_cols / 3), s.n_cols + 2}) {
                SCOPED_TRACE("fused k " + std::to_string(k));
                std::vector<int32_t> want_sel(static_cast<size_t>(sc.n_tokens * k), -7);
                ASSERT_TRUE(ref->topk(s.topk_params(got.as<float>(), k, want_sel.data()), {}).is_ok());
                for (bool with_scores : {false, true}) {
                    GuardedBuffer sel(static_cast<size_t>(sc.n_tokens * k) * 4), rows(s.score_bytes());
                    const Status fs = run_scores(*b, s.fused_params(with_scores ? rows.as<float>() : nullptr,
                                                                    sel.as<int32_t>(), k));
                    ASSERT_TRUE(fs.is_ok()) << fs.to_string();
                    EXPECT_TRUE(std::equal(want_sel.begin(), want_sel.end(), sel.as<int32_t>()))
                        << "selection differs, with scores " << with_scores;
                    if (with_scores) {
                        for (int64_t t = 0; t < sc.n_tokens; ++t)
                            EXPECT_TRUE(bytes_equal(rows.as<float>() + t * s.row_stride, got.as<float>() + t * s.row_stride,
                                                    static_cast<size_t>(s.n_keys[static_cast<size_t>(t)]) * 4,
                                                    "fused score rows"));
                    }
                    EXPECT_TRUE(sel.guards_intact("selected"));
                }
            }
        }
    }
}

// One decode token over 40000 keys: many key tiles, every thread, fused and not.
TEST(IndexerScoresConformance, OneDecodeTokenOverManyKeys) {
    auto ref = ref_backend();
    auto backends = backends_under_test();
    Rng rng(4405);
    const ScoreCase sc{1, 8, 128, 1, 64, DType::bf16, CacheRecordFormat::fp8_row_scale, true, false, 0.0f, 40000, true, 40000};
    ScoreSetup s(rng, sc, *ref);
    GuardedBuffer want(s.score_bytes());
    ASSERT_TRUE(run_scores(*ref, s.params(want.as<float>())).is_ok());
    const int64_t n = s.n_keys[0];
    std::vector<double> want_v, tol;
    for (int64_t j = 0; j < n; ++j) {
        want_v.push_back(want.as<float>()[j]);
        tol.push_back(2.0 * s.exact(0, j).second);  // both sides within the bound of the exact value
    }
    for (auto& nb : backends) {
        SCOPED_TRACE(nb.spec);
        GuardedBuffer got(s.score_bytes());
        ASSERT_TRUE(run_scores(*nb.backend, s.params(got.as<float>())).is_ok());
        EXPECT_TRUE(all_close(want_v, std::vector<double>(got.as<float>(), got.as<float>() + n), tol, "scores"));
        const int64_t k = 512;
        std::vector<int32_t> want_sel(static_cast<size_t>(k)), sel(static_cast<size_t>(k), -7);
        ASSERT_TRUE(ref->topk(s.topk_params(got.as<float>(), k, want_sel.data()), {}).is_ok());
        ASSERT_TRUE(run_scores(*nb.backend, s.fused_params(nullptr, sel.data(), k)).is_ok());
        EXPECT_EQ(want_sel, sel);
    }
}

// A GPU reads no index array on the host (the validate test below), so its kernels meet bad block-table
// entries themselves: every candidate of a released block or of a block past the cache scores NaN, the
// sentinel a downstream top-k ranks last, and every other candidate scores as ever. The cases take the
// copy-engine kernel (bf16 and e4m3 q) and the mma.sync one (16-entry blocks).
TEST(IndexerScoresConformance, GpuScoresKeysOfBadBlocksAsNaN) {
    auto ref = ref_backend();
    auto backends = backends_under_test();
    std::erase_if(backends, [](const NamedBackend& nb) { return !nb.spec.starts_with("cuda"); });
    if (backends.empty()) GTEST_SKIP() << "no cuda backend under test";
    Rng rng(4406);
    using F = CacheRecordFormat;
    for (const ScoreCase& sc : {ScoreCase{6, 64, 128, 1, 64, DType::bf16, F::fp8_row_scale, true, false, 0.0f, 400, true, 300},
                                ScoreCase{5, 32, 128, 1, 128, DType::f8_e4m3, F::fp8_row_scale, true, true, 0.0f, 600, true, 450},
                                ScoreCase{5, 64, 128, 1, 16, DType::f8_e4m3, F::fp8_row_scale, true, false, 0.0f, 100, true, 60}}) {
        SCOPED_TRACE(case_name(sc));
        ScoreSetup s(rng, sc, *ref);
        const int64_t B = sc.block_size;
        std::vector<double> want, tol;
        for (int64_t t = 0; t < sc.n_tokens; ++t)
            for (int64_t j = 0; j < s.n_keys[static_cast<size_t>(t)]; ++j) {
                if (j / B == 1 || j / B == 2) continue;
                const auto [v, e] = s.exact(t, j);
                want.push_back(v);
                tol.push_back(e);
            }
        s.keys->table[1] = -1;                                        // released
        s.keys->table[2] = static_cast<int32_t>(s.keys->n_blocks);  // past the cache
        for (auto& nb : backends) {
            SCOPED_TRACE(nb.spec);
            GuardedBuffer got(s.score_bytes());
            const Status st = run_scores(*nb.backend, s.params(got.as<float>()));
            ASSERT_TRUE(st.is_ok()) << st.to_string();
            std::vector<double> got_v;
            for (int64_t t = 0; t < sc.n_tokens; ++t)
                for (int64_t j = 0; j < s.n_keys[static_cast<size_t>(t)]; ++j) {
                    const float v = got.as<float>()[t * s.row_stride + j];
                    if (j / B == 1 || j / B == 2)
                        ASSERT_TRUE(std::isnan(v)) << "token " << t << " candidate " << j << " of a bad block scored " << v;
                    else
                        got_v.push_back(v);
                }
            EXPECT_TRUE(all_close(want, got_v, tol, "scores of the other blocks"));
        }
    }
}

// The group top-k as the QSA layer runs it when it keeps the score rows: k = block_topk over each row's
// first n_keys[t] scores (rows with fewer candidates than k take them all; rows with 0 take none), ties
// broken toward the lower group (exact zeros from the ReLU are common, qsa.md §9 item 3).
TEST(IndexerScoresConformance, GroupTopkOfKeptRowsPicksRefGroups) {
    auto ref = ref_backend();
    auto backends = backends_under_test();
    Rng rng(6161);
    for (const ScoreCase& sc : score_cases()) {
        if (sc.weights) continue;  // QSA's cases
        ScoreSetup s(rng, sc, *ref);
        GuardedBuffer scores(s.score_bytes());
        ASSERT_TRUE(run_scores(*ref, s.params(scores.as<float>())).is_ok());
        for (int64_t k : {int64_t{1}, int64_t{4}, int64_t{16}, int64_t{512}}) {
            SCOPED_TRACE(case_name(sc) + fmt::format(" k {}", k));
            TopkParams p = s.topk_params(scores.as<float>(), k, nullptr);  // out: set per run
            auto run = [&](Backend& b, std::vector<int32_t>& out) {
                out.assign(static_cast<size_t>(sc.n_tokens * k), 99);
                p.out = out.data();
                GuardedBuffer ws(std::max<size_t>(b.topk_workspace_size(p), 1));
                const Status st = b.topk(p, {ws.data(), b.topk_workspace_size(p)});
                EXPECT_TRUE(ws.guards_intact("topk workspace"));
                return st;
            };
            std::vector<int32_t> want;
            ASSERT_TRUE(run(*ref, want).is_ok());
            // Ties to the lower group: a picked group never has a worse-or-equal-scoring lower group left out.
            for (int64_t t = 0; t < sc.n_tokens; ++t) {
                const float* row = scores.as<float>() + t * s.row_stride;
                std::vector<bool> picked(static_cast<size_t>(s.n_keys[static_cast<size_t>(t)]), false);
                for (int64_t j = 0; j < k; ++j)
                    if (want[static_cast<size_t>(t * k + j)] >= 0) picked[static_cast<size_t>(want[static_cast<size_t>(t * k + j)])] = true;
                for (size_t a = 0; a < picked.size(); ++a)
                    for (size_t b = 0; b < a; ++b)
                        if (picked[a] && !picked[b]) {
                            EXPECT_LT(row[b], row[a]) << "row " << t << ": group " << a << " over " << b;
                        }
            }
            for (auto& nb : backends) {
                SCOPED_TRACE(nb.spec);
                std::vector<int32_t> got;
                ASSERT_TRUE(run(*nb.backend, got).is_ok());
                EXPECT_EQ(want, got);
            }
        }
    }
}

// Hand-computed scores, 2 heads, 2 dims, keys k_0 = (1, 0), k_1 = (0, 2), k_2 = (−1, −1) in blocks of 2
// under the table {1, 0}: q_0 = (1, 1), q_1 = (2, −1), weights (1, −0.5), weight_scale 2:
//   score[j] = 2·(1·ReLU(q_0·k_j) − 0.5·ReLU(q_1·k_j)) → 2·(1 − 1) = 0, 2·(2 − 0) = 4, 0.
// The fp8 form of the same keys and q (e4m3 with power-of-two scales: exact) gives the same values; without
// weights (every head weight weight_scale) 2·(1 + 2) = 6, 2·(2 + 0) = 4, 0. Column 3 stays untouched.
TEST(IndexerScoresKnownValues, ReluWeightedHeadSum) {
    auto ref = ref_backend();
    auto backends = host_backends_under_test();
    const float keys[6] = {1, 0, 0, 2, -1, -1};
    const float q[4] = {1, 1, 2, -1};
    const float w[2] = {1, -0.5f};
    for (const auto format : {CacheRecordFormat::f32, CacheRecordFormat::bf16, CacheRecordFormat::fp8_row_scale}) {
        for (bool weighted : {true, false}) {
            for (auto& [name, b] : ref_and(*ref, backends)) {
                SCOPED_TRACE(fmt::format("{} {} weights {}", name, cache_record_format_name(format), weighted));
                const CacheRecordLayout layout{format, 2, 0};
                GuardedBuffer cache(static_cast<size_t>(2 * 2 * layout.entry_bytes()), 0);
                const CacheView view{cache.as<uint8_t>(), 2 * layout.entry_bytes(), 2, layout.entry_bytes()};
                const int32_t slots[3] = {2, 3, 0};  // entries 0, 1 in block 1, entry 2 in block 0
                CacheStoreParams kw;
                kw.x = keys;
                kw.slots = slots;
                kw.cache = view;
                kw.layout = layout;
                kw.n_slots = 4;
                kw.n_rows = 3;
                kw.dim = 2;
                kw.x_row_stride = 2;
                ASSERT_TRUE(b->cache_store(kw).is_ok());
                const int32_t table[2] = {1, 0}, request = 0, n_keys = 3;
                const bool fp8 = format == CacheRecordFormat::fp8_row_scale;
                uint8_t q8[4];
                float q_scale[2];
                for (int h = 0; h < 2; ++h) {  // q quantized as the DSA model does: one UE8M0 scale per head
                    const float amax = std::max(std::fabs(q[2 * h]), std::fabs(q[2 * h + 1]));
                    q_scale[h] = ue8m0_scale_for_amax(amax);
                    for (int i = 0; i < 2; ++i) q8[2 * h + i] = f32_to_fp8_e4m3(q[2 * h + i] / q_scale[h]);
                }
                float scores[4] = {7, 7, 7, 7};
                IndexerScoresParams p;
                p.q = fp8 ? static_cast<const void*>(q8) : q;
                p.q_type = fp8 ? DType::f8_e4m3 : DType::f32;
                p.q_scale = fp8 ? q_scale : nullptr;
                p.q_scale_token_stride = 2;
                p.weights = weighted ? w : nullptr;
                p.weights_token_stride = 2;
                p.weight_scale = 2.0f;
                p.keys = view;
                p.key_format = format;
                p.n_slots = 4;
                p.tables = {table, &request, 1, 2};
                p.n_keys = &n_keys;
                p.scores = scores;
                p.n_tokens = 1;
                p.n_heads = 2;
                p.head_dim = 2;
                p.n_cols = 4;
                p.q_token_stride = 4;
                p.q_head_stride = 2;
                p.scores_row_stride = 4;
                ASSERT_TRUE(run_scores(*b, p).is_ok());
                EXPECT_EQ(scores[0], weighted ? 0.0f : 6.0f);
                EXPECT_EQ(scores[1], 4.0f);
                EXPECT_EQ(scores[2], 0.0f);
                EXPECT_EQ(scores[3], 7.0f) << "a column past n_keys was written";
            }
        }
    }
}

TEST(IndexerScoresValidate, RejectsMalformedCalls) {
    Rng rng(1);
    PagedTestCache keys(rng, {8}, 4, 16 * 4);
    std::vector<int32_t> token_request = {0, 0}, n_keys = {5, 8};
    std::vector<float> q(2 * 2 * 16), w(4, 1.0f), scores(2 * 8);
    auto base = [&] {
        IndexerScoresParams p;
        p.q = q.data();
        p.q_token_stride = 32;
        p.q_head_stride = 16;
        p.weights = w.data();
        p.weights_token_stride = 2;
        p.weight_scale = 0.5f;
        p.keys = keys.view();
        p.n_slots = keys.n_slots();
        p.tables = keys.tables(token_request);
        p.n_keys = n_keys.data();
        p.scores = scores.data();
        p.n_tokens = 2;
        p.n_heads = 2;
        p.head_dim = 16;
        p.n_cols = 8;
        p.scores_row_stride = 8;
        return p;
    };
    ASSERT_TRUE(validate_and_check_indices(base()).is_ok()) << validate_and_check_indices(base()).to_string();
    auto expect_bad = [&](const IndexerScoresParams& p, StatusCode code, const char* needle) {
        const Status s = validate(p);
        EXPECT_EQ(s.code(), code) << s.to_string();
        EXPECT_NE(s.message().find(needle), std::string::npos) << s.to_string() << "\n  lacks: " << needle;
    };
    // A content error: validate (which reads no array) accepts, check_indices and the host check refuse.
    auto expect_bad_indices = [&](const IndexerScoresParams& p, const char* needle) {
        EXPECT_TRUE(validate(p).is_ok()) << validate(p).to_string();
        for (const Status& s : {check_indices(p), validate_and_check_indices(p)}) {
            EXPECT_EQ(s.code(), StatusCode::invalid_argument) << s.to_string();
            EXPECT_NE(s.message().find(needle), std::string::npos) << s.to_string() << "\n  lacks: " << needle;
        }
    };
    auto p = base();
    p.key_format = CacheRecordFormat::fp8_model1;
    expect_bad(p, StatusCode::invalid_argument, "key_format = fp8_model1");
    p = base();
    p.q_type = DType::i32;
    expect_bad(p, StatusCode::invalid_argument, "q_type");
    p = base();
    p.head_dim = 256;
    p.q_token_stride = 512;
    p.q_head_stride = 256;
    p.key_format = CacheRecordFormat::fp8_row_scale;
    expect_bad(p, StatusCode::unsupported, "head_dim = 256");
    p = base();
    p.weight_scale = std::numeric_limits<float>::infinity();
    expect_bad(p, StatusCode::invalid_argument, "weight_scale");
    p = base();
    p.q_scale = w.data();  // q_scale with f32 q
    expect_bad(p, StatusCode::invalid_argument, "q_scale");
    p = base();
    p.scores = q.data();  // scores over q
    expect_bad(p, StatusCode::invalid_argument, "overlap");
    p = base();
    p.scores = nullptr;
    int32_t selected[4];
    p.selected = selected;
    p.k = 0;
    expect_bad(p, StatusCode::invalid_argument, "k = 0");
    p.k = 2;
    p.selected_row_stride = 2;
    EXPECT_TRUE(validate_and_check_indices(p).is_ok()) << validate_and_check_indices(p).to_string();  // fused only
    p.selected = n_keys.data();  // over an input
    expect_bad(p, StatusCode::invalid_argument, "selected");
    p = base();
    p.scores = nullptr;  // neither scores nor a selection, with candidates to score
    expect_bad_indices(p, "scores");
    p = base();
    p.q_type = DType::f8_e4m3;  // e4m3 q without its scale
    expect_bad_indices(p, "q_scale");

    n_keys[1] = 9;
    expect_bad_indices(base(), "n_keys[1] = 9");
    n_keys[1] = 8;
    token_request[1] = 1;
    expect_bad_indices(base(), "token_request[1] = 1");
    token_request[1] = 0;
    const int32_t block1 = keys.table[1];
    keys.table[1] = -1;  // entries 4..7 released
    expect_bad_indices(base(), "block 1 (entries [4, 8)) is not resident");
    keys.table[1] = static_cast<int32_t>(keys.n_blocks);  // past the cache
    expect_bad_indices(base(), fmt::format("block id {}, the cache has {} blocks", keys.n_blocks, keys.n_blocks).c_str());
    keys.table[1] = block1;
    // Every backend whose index arrays the host reads returns check_indices' Status (backend.h). A GPU's
    // arrays live in its memory, which no host code reads on the hot path: its kernels skip bad entries
    // instead (backends/cuda/selection_kernels.cu), so it is not asked for the host's message.
    auto ref = ref_backend();
    auto backends = backends_under_test();
    n_keys[1] = 9;
    for (auto& [name, b] : ref_and(*ref, backends)) {
        if (name.starts_with("cuda")) continue;
        EXPECT_NE(run_scores(*b, base()).message().find("n_keys[1] = 9"), std::string::npos) << name;
    }
    n_keys[1] = 8;
}

}  // namespace
}  // namespace sieve::test
