// ops/indexer_scores.h: every cpu backend against ref (f32 and fp8_row_scale keys, several lists,
// per-token candidate counts, −1 key slots, strided q / scores, bf16 q) with dot-length tolerances;
// the ReLU-weighted sum by hand; columns past n_keys left untouched; validate() rejections.
#include <cmath>

#include "dsv4_cache_util.h"
#include "ops/indexer_scores.h"
#include "ops/op_common.h"
#include "ops/topk.h"

namespace sieve::test {
namespace {

// One conformance case against ref on every backend: n_tokens tokens over n_lists lists of max_keys keys
// (slot −1 at key 1 of list 0, and at every key j ≡ 3 mod missing_every when missing_every > 0); token 0
// (or every token when all_keys) scores all max_keys keys, the others a random prefix.
void check_indexer_case(Rng& rng, Backend& ref_b, std::vector<NamedBackend>& backends, int64_t n_heads, int64_t head_dim,
                        int64_t n_tokens, int64_t n_lists, int64_t max_keys, CacheRecordFormat fmt, DType qt, bool padded,
                        int64_t missing_every = 0, bool all_keys = false) {
    Backend* ref = &ref_b;
    const CacheRecordLayout kl{fmt, head_dim, 0};
    TestCache cache(kl.entry_bytes(), 5, (n_lists * max_keys) / 5 + 2);
    // Keys through ref cache_store.
    std::vector<float> keys(static_cast<size_t>(n_lists * max_keys * head_dim));
    for (float& v : keys) v = rng.normal(1.0f);
    const std::vector<int32_t> key_slots_flat = random_slots(rng, n_lists * max_keys, cache.capacity());
    CacheStoreParams sp;
    sp.x = keys.data();
    sp.slots = key_slots_flat.data();
    sp.cache = cache.view();
    sp.layout = kl;
    sp.n_slots = cache.capacity();
    sp.n_rows = n_lists * max_keys;
    sp.dim = head_dim;
    sp.x_row_stride = head_dim;
    sp.round_bf16 = true;
    ASSERT_TRUE(ref->cache_store(sp).is_ok());
    const int64_t ks_stride = max_keys + (padded ? 2 : 0);
    std::vector<int32_t> key_slots(static_cast<size_t>(n_lists * ks_stride), -5);
    for (int64_t l = 0; l < n_lists; ++l)
        for (int64_t j = 0; j < max_keys; ++j)
            key_slots[static_cast<size_t>(l * ks_stride + j)] =
                ((j == 1 && l == 0) || (missing_every > 0 && j % missing_every == 3))
                    ? -1
                    : key_slots_flat[static_cast<size_t>(l * max_keys + j)];
    std::vector<int32_t> token_list(static_cast<size_t>(n_tokens)), n_keys(static_cast<size_t>(n_tokens));
    for (int64_t t = 0; t < n_tokens; ++t) {
        token_list[static_cast<size_t>(t)] = static_cast<int32_t>(rng.integer(0, n_lists - 1));
        n_keys[static_cast<size_t>(t)] = static_cast<int32_t>(t == 0 || all_keys ? max_keys : rng.integer(0, max_keys));
    }
    const RowsLayout ql = make_rows_layout(rng, n_tokens, n_heads, head_dim, padded);
    RowsTensor q(ql, qt);
    q.fill([&] { return rng.normal(1.0f); });
    const int64_t w_stride = n_heads + (padded ? 1 : 0), s_stride = max_keys + (padded ? 3 : 0);
    std::vector<float> w(static_cast<size_t>(n_tokens * w_stride));
    for (float& v : w) v = rng.normal(0.3f);
    // The head-weight scale (c_I^-0.5 · H_I^-0.5 in the model) or none; w_pre holds the weights scaled by
    // the caller in fp32, which the op must reproduce bit for bit with weight_scale 1.
    const float weight_scale = rng.coin() ? 1.0f : 0.011048543f;
    std::vector<float> w_pre(w.size());
    for (size_t i = 0; i < w.size(); ++i) w_pre[i] = w[i] * weight_scale;
    bool prescaled = false;

    // scores and/or a fused selection of width k (ops/indexer_scores.h "Fused selection").
    auto run = [&](Backend& b, float* scores, int32_t* selected = nullptr, int64_t k = 0) {
        IndexerScoresParams p;
        p.q = q.data();
        p.q_type = qt;
        p.q_token_stride = ql.token_stride;
        p.q_head_stride = ql.head_stride;
        p.weights = prescaled ? w_pre.data() : w.data();
        p.weight_scale = prescaled ? 1.0f : weight_scale;
        p.weights_row_stride = w_stride;
        p.keys = cache.view();
        p.key_format = fmt;
        p.key_slots = key_slots.data();
        p.key_slots_stride = ks_stride;
        p.token_list = token_list.data();
        p.n_keys = n_keys.data();
        p.scores = scores;
        p.scores_row_stride = s_stride;
        p.selected = selected;
        p.k = k;
        p.selected_row_stride = k;
        p.n_tokens = n_tokens;
        p.n_heads = n_heads;
        p.head_dim = head_dim;
        p.n_lists = n_lists;
        p.max_keys = max_keys;
        GuardedBuffer ws(std::max<size_t>(b.indexer_scores_workspace_size(p), 1));
        const Status st = b.indexer_scores(p, Workspace{ws.data(), b.indexer_scores_workspace_size(p)});
        EXPECT_TRUE(ws.guards_intact("indexer workspace"));
        return st;
    };
    const size_t s_bytes = static_cast<size_t>(n_tokens * s_stride) * 4;
    GuardedBuffer want(s_bytes);
    ASSERT_TRUE(run(*ref, want.as<float>()).is_ok());
    // Tolerance: each head's dot is off by ≤ γ_{d+1}·Σ|q_i k_i| (ReLU is 1-Lipschitz), weighted by |w_h|,
    // plus the head sum γ_{H+1}·Σ_h |w_h·ReLU(dot_h)|.
    std::vector<double> want_v, tol;
    std::vector<float> key(static_cast<size_t>(head_dim));
    for (int64_t t = 0; t < n_tokens; ++t)
        for (int64_t j = 0; j < n_keys[static_cast<size_t>(t)]; ++j) {
            want_v.push_back(want.as<float>()[t * s_stride + j]);
            const int32_t slot = key_slots[static_cast<size_t>(token_list[static_cast<size_t>(t)] * ks_stride + j)];
            if (slot < 0) {
                EXPECT_EQ(want_v.back(), -INFINITY);
                tol.push_back(0.0);
                continue;
            }
            KvLoadParams lp;
            lp.cache = cache.view();
            lp.layout = kl;
            lp.slots = &slot;
            lp.y = key.data();
            lp.n_rows = 1;
            ASSERT_TRUE(ref->kv_load(lp).is_ok());
            double bound = 0.0, sum_abs = 0.0;
            for (int64_t h = 0; h < n_heads; ++h) {
                double s = 0.0, dot = 0.0;
                for (int64_t i = 0; i < head_dim; ++i) {
                    s += std::fabs(q.get(t, h, i) * static_cast<double>(key[static_cast<size_t>(i)]));
                    dot += q.get(t, h, i) * static_cast<double>(key[static_cast<size_t>(i)]);
                }
                const double wh = std::fabs(w_pre[static_cast<size_t>(t * w_stride + h)]);
                bound += wh * (gamma_n(static_cast<double>(head_dim) + 1) * s + kU * std::fabs(dot));
                sum_abs += wh * std::max(dot, 0.0);
            }
            tol.push_back(bound + gamma_n(static_cast<double>(n_heads) + 1) * sum_abs + 1e-30);
        }
    for (auto& nb : backends) {
        SCOPED_TRACE(nb.spec);
        GuardedBuffer got(s_bytes);
        const Status st = run(*nb.backend, got.as<float>());
        ASSERT_TRUE(st.is_ok()) << st.to_string();
        std::vector<double> got_v;
        for (int64_t t = 0; t < n_tokens; ++t)
            for (int64_t j = 0; j < n_keys[static_cast<size_t>(t)]; ++j) got_v.push_back(got.as<float>()[t * s_stride + j]);
        EXPECT_TRUE(all_close(want_v, got_v, tol, "scores"));
        // Columns j ≥ n_keys[t] and the row padding are never written.
        for (int64_t t = 0; t < n_tokens; ++t)
            for (int64_t j = n_keys[static_cast<size_t>(t)]; j < s_stride; ++j) {
                uint32_t bits;
                std::memcpy(&bits, got.as<float>() + t * s_stride + j, 4);
                ASSERT_EQ(bits, 0x7f7f7f7fu) << "column " << j << " of token " << t << " written";
            }
        EXPECT_TRUE(got.guards_intact("scores"));
        {
            prescaled = true;
            GuardedBuffer pre(s_bytes);
            ASSERT_TRUE(run(*nb.backend, pre.as<float>()).is_ok());
            prescaled = false;
            for (int64_t t = 0; t < n_tokens; ++t)
                EXPECT_TRUE(bytes_equal(pre.as<float>() + t * s_stride, got.as<float>() + t * s_stride,
                                        static_cast<size_t>(n_keys[static_cast<size_t>(t)]) * 4,
                                        "weight_scale applied as one fp32 product per head weight"));
        }

        // The fused selection is exactly the top-k of this backend's own scores, with or without a
        // score row written (k below, around and above the candidate counts).
        for (int64_t k : {int64_t{1}, std::max<int64_t>(1, max_keys / 3), max_keys + 2}) {
            SCOPED_TRACE("fused k " + std::to_string(k));
            std::vector<int32_t> want_sel(static_cast<size_t>(n_tokens * k), -7);
            TopkParams tp;
            tp.scores = got.as<float>();
            tp.valid_len = n_keys.data();
            tp.out = want_sel.data();
            tp.n_rows = n_tokens;
            tp.n_cols = max_keys;
            tp.k = k;
            tp.scores_row_stride = s_stride;
            tp.out_row_stride = k;
            ASSERT_TRUE(ref->topk(tp, {}).is_ok());
            for (bool with_scores : {false, true}) {
                GuardedBuffer sel(static_cast<size_t>(n_tokens * k) * 4), rows(s_bytes);
                const Status fs = run(*nb.backend, with_scores ? rows.as<float>() : nullptr, sel.as<int32_t>(), k);
                ASSERT_TRUE(fs.is_ok()) << fs.to_string();
                EXPECT_TRUE(std::equal(want_sel.begin(), want_sel.end(), sel.as<int32_t>()))
                    << "selection differs, with scores " << with_scores;
                EXPECT_TRUE(sel.guards_intact("selected"));
            }
        }
    }
}

TEST(IndexerScoresConformance, EveryBackendMatchesRef) {
    auto ref = ref_backend();
    auto backends = backends_under_test();
    Rng rng(4404);
    for (int ci = 0; ci < 20; ++ci) {
        const int64_t n_heads = rng.pick<int64_t>({1, 8, 64}), head_dim = rng.pick<int64_t>({16, 128, 20});
        const int64_t n_tokens = rng.pick<int64_t>({1, 4, 9}), n_lists = rng.pick<int64_t>({1, 3});
        const int64_t max_keys = rng.pick<int64_t>({1, 9, 37});
        const CacheRecordFormat fmt = ci % 2 ? CacheRecordFormat::fp8_row_scale : CacheRecordFormat::f32;
        const DType qt = rng.coin() ? DType::bf16 : DType::f32;
        const bool padded = rng.coin();
        SCOPED_TRACE(fmt::format("case {}: T {} H {} d {} lists {} keys {} {} q {}", ci, n_tokens, n_heads, head_dim,
                                 n_lists, max_keys, cache_record_format_name(fmt), dtype_name(qt)));
        check_indexer_case(rng, *ref, backends, n_heads, head_dim, n_tokens, n_lists, max_keys, fmt, qt, padded);
    }
}

// The cpu kernel's work units are key tiles of a list scored for all the list's tokens: many tokens of
// one list, key counts past one tile and not a multiple of it, missing slots inside tiles, odd head_dim
// (a zero partner for the last bf16 pair), and one decode token over 40000 keys (many tiles, all threads).
TEST(IndexerScoresConformance, KeyTilesAndManyTokensPerList) {
    auto ref = ref_backend();
    auto backends = backends_under_test();
    Rng rng(4405);
    struct C {
        int64_t heads, dim, tokens, lists, keys;
        CacheRecordFormat fmt;
        DType qt;
        int64_t missing_every;
        bool all_keys;
    };
    const C cases[] = {
        {64, 128, 48, 1, 700, CacheRecordFormat::fp8_row_scale, DType::bf16, 7, false},
        {64, 128, 20, 2, 1100, CacheRecordFormat::f32, DType::f32, 11, true},
        {24, 33, 30, 3, 530, CacheRecordFormat::fp8_row_scale, DType::bf16, 5, false},
        {16, 65, 9, 2, 300, CacheRecordFormat::fp8_row_scale, DType::f32, 0, true},
        {8, 128, 1, 1, 40000, CacheRecordFormat::fp8_row_scale, DType::bf16, 97, true},
    };
    for (const C& c : cases) {
        SCOPED_TRACE(fmt::format("T {} H {} d {} lists {} keys {} {} q {}", c.tokens, c.heads, c.dim, c.lists, c.keys,
                                 cache_record_format_name(c.fmt), dtype_name(c.qt)));
        check_indexer_case(rng, *ref, backends, c.heads, c.dim, c.tokens, c.lists, c.keys, c.fmt, c.qt, true,
                           c.missing_every, c.all_keys);
    }
}

TEST(IndexerScoresKnownValues, ReluWeightedHeadSum) {
    // Two heads, key k = (1, −1): head 0 q = (2, 0) → dot 2; head 1 q = (0, 3) → dot −3 → ReLU 0.
    // Weights (0.5, 10): score = 0.5·2 + 10·0 = 1. A key −k: dots −2, 3 → 10·3 = 30.
    auto ref = ref_backend();
    auto backends = host_backends_under_test();
    std::vector<Backend*> all = {ref.get()};
    for (auto& nb : backends) all.push_back(nb.backend.get());
    const CacheRecordLayout kl{CacheRecordFormat::f32, 2, 0};
    TestCache cache(kl.entry_bytes(), 2, 1);
    const float k0[2] = {1, -1}, k1[2] = {-1, 1};
    std::memcpy(cache.view().row(1), k0, 8);
    std::memcpy(cache.view().row(0), k1, 8);
    const float q[4] = {2, 0, 0, 3}, w[2] = {0.5f, 10.0f};
    const int32_t key_slots[2] = {1, 0}, token_list[1] = {0}, n_keys[1] = {2};
    for (Backend* b : all) {
        SCOPED_TRACE(b->name());
        float scores[2] = {0, 0};
        IndexerScoresParams p;
        p.q = q;
        p.q_token_stride = 4;
        p.q_head_stride = 2;
        p.weights = w;
        p.weights_row_stride = 2;
        p.keys = cache.view();
        p.key_slots = key_slots;
        p.key_slots_stride = 2;
        p.token_list = token_list;
        p.n_keys = n_keys;
        p.scores = scores;
        p.scores_row_stride = 2;
        p.n_tokens = 1;
        p.n_heads = 2;
        p.head_dim = 2;
        p.n_lists = 1;
        p.max_keys = 2;
        GuardedBuffer ws(std::max<size_t>(b->indexer_scores_workspace_size(p), 1));
        ASSERT_TRUE(b->indexer_scores(p, Workspace{ws.data(), b->indexer_scores_workspace_size(p)}).is_ok());
        EXPECT_EQ(scores[0], 1.0f);
        EXPECT_EQ(scores[1], 30.0f);
    }
}

TEST(IndexerScoresValidate, RejectsBadInputs) {
    const CacheRecordLayout kl{CacheRecordFormat::fp8_row_scale, 16, 0};
    TestCache cache(kl.entry_bytes(), 2, 1);
    float q[16] = {}, w[1] = {1}, scores[2];
    int32_t key_slots[2] = {0, 1}, token_list[1] = {0}, n_keys[1] = {2};
    IndexerScoresParams p;
    p.q = q;
    p.q_token_stride = 16;
    p.weights = w;
    p.keys = cache.view();
    p.key_format = CacheRecordFormat::fp8_row_scale;
    p.key_slots = key_slots;
    p.key_slots_stride = 2;
    p.token_list = token_list;
    p.n_keys = n_keys;
    p.scores = scores;
    p.scores_row_stride = 2;
    p.n_tokens = 1;
    p.n_heads = 1;
    p.head_dim = 16;
    p.n_lists = 1;
    p.max_keys = 2;
    EXPECT_TRUE(validate(p).is_ok()) << validate(p).message();
    IndexerScoresParams b = p;
    b.key_format = CacheRecordFormat::fp8_model1;
    EXPECT_NE(validate(b).message().find("key_format = fp8_model1"), std::string::npos);
    n_keys[0] = 3;
    EXPECT_TRUE(validate(p).is_ok());
    EXPECT_NE(check_indices(p).message().find("n_keys[0] = 3"), std::string::npos) << check_indices(p).message();
    n_keys[0] = 2;
    token_list[0] = 1;
    EXPECT_TRUE(validate(p).is_ok());
    EXPECT_NE(check_indices(p).message().find("token_list[0] = 1"), std::string::npos) << check_indices(p).message();
    token_list[0] = 0;
    key_slots[1] = -2;
    EXPECT_NE(check_indices(p).message().find("key_slots[0, 1] = -2"), std::string::npos) << check_indices(p).message();
    key_slots[1] = 1;
    EXPECT_TRUE(validate_and_check_indices(p).is_ok());
    b = p;
    b.scores = reinterpret_cast<float*>(key_slots);  // scores over an input
    EXPECT_EQ(validate(b).code(), StatusCode::invalid_argument);
    // Neither scores nor a selection; a selection of width 0; a selection over an input.
    b = p;
    b.scores = nullptr;
    EXPECT_NE(validate(b).message().find("scores"), std::string::npos) << validate(b).message();
    int32_t selected[2];
    b.selected = selected;
    b.k = 0;
    EXPECT_NE(validate(b).message().find("k = 0"), std::string::npos) << validate(b).message();
    b.k = 2;
    b.selected_row_stride = 2;
    EXPECT_TRUE(validate(b).is_ok()) << validate(b).message();  // fused selection without score rows
    b.selected = key_slots;
    EXPECT_NE(validate(b).message().find("selected"), std::string::npos) << validate(b).message();
}

}  // namespace
}  // namespace sieve::test
