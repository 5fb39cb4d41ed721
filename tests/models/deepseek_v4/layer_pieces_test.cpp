// Pieces of the DeepSeek-V4 layer: the slot lists of a step (window, compressor emissions, visible and
// selected entries, indexer key lists) against CacheGroup::slot on hand-made batches with released
// blocks; the short-context fallback selecting the same sets as scoring; selections outside the causal
// range meaning "none"; the observer seeing every token.
#include <fmt/format.h>

#include "dsv4_test_util.h"
#include "models/deepseek_v4/step_slots.h"

namespace sieve::dsv4_test {
namespace {

// The caches of the slot-list tests live in host memory.
Backend& host() {
    static const std::unique_ptr<Backend> backend = std::move(make_backend("ref")).value();
    return *backend;
}

using dsv4::BoundCache;
using dsv4::CacheBinding;

struct Groups {
    std::unique_ptr<CacheGroup> swa, comp, state;
};

// Request 7 runs positions 5..10 (a chunk after 5 tokens), request 9 positions 0..3; block sizes 3, 2, 3.
Groups make_groups() {
    Groups g;
    g.swa = std::move(CacheGroup::create(host(), "swa_kv", CacheSpec{"swa_kv", "f32 [4]", 16, 1, 3}, 3, 12, 1)).value();
    g.comp = std::move(CacheGroup::create(host(), "comp", CacheSpec{"comp", "f32 [4]", 16, 4, 0}, 2, 12, 1)).value();
    g.state = std::move(CacheGroup::create(host(), "state", CacheSpec{"state", "f32 [8]", 32, 1, 8}, 3, 12, 1)).value();
    for (auto [id, end] : {std::pair<RequestId, int64_t>{9, 4}, {7, 11}}) {
        EXPECT_TRUE(g.swa->reserve(id, end).is_ok());
        EXPECT_TRUE(g.comp->reserve(id, end / 4).is_ok());
        EXPECT_TRUE(g.state->reserve(id, end).is_ok());
    }
    g.swa->release_before(7, 3);  // request 7's window rows 0..2 (block 0) are gone
    return g;
}

StepBatch make_batch(Groups& g) {
    StepCaches caches;
    caches.groups = {g.swa.get(), g.comp.get(), g.state.get()};
    return make_step_batch({StepRequest{7, 5, 6, false}, StepRequest{9, 0, 4, false}}, caches);
}

BoundCache bound(const StepBatch& b, const std::string& name) {
    auto c = dsv4::bind_cache(b, CacheBinding{name, 0});
    EXPECT_TRUE(c.has_value()) << c.status().to_string();
    return *c;
}

TEST(DeepseekV4StepSlots, WindowAndTokenSlots) {
    Groups g = make_groups();
    const StepBatch b = make_batch(g);
    ASSERT_EQ(b.n_tokens(), 10);
    const BoundCache swa = bound(b, "swa_kv");
    std::vector<int32_t> own(10), window(30);
    ASSERT_TRUE(dsv4::token_slots(b, swa, own.data()).is_ok());
    ASSERT_TRUE(dsv4::window_slots(b, swa, 3, window.data()).is_ok());
    for (int64_t t = 0; t < b.n_tokens(); ++t) {
        const int64_t p = b.positions[static_cast<size_t>(t)];
        const RequestId r = b.request_of_token(t);
        EXPECT_EQ(own[static_cast<size_t>(t)], g.swa->slot(r, p));
        for (int64_t j = 0; j < 3; ++j) {  // oldest first, the token itself last (§3.2)
            const int64_t pos = p - 2 + j;
            EXPECT_EQ(window[static_cast<size_t>(t * 3 + j)], pos < 0 ? -1 : g.swa->slot(r, pos)) << t << "," << j;
        }
    }
    EXPECT_EQ(window[static_cast<size_t>(6 * 3 + 0)], -1);  // request 9, position 0: two empty slots
    // A window of 4 needs request 7's row 2, released: an internal error naming the cache, entry, request.
    std::vector<int32_t> w4(40);
    const Status s = dsv4::window_slots(b, swa, 4, w4.data());
    EXPECT_EQ(s.code(), StatusCode::internal);
    EXPECT_NE(s.message().find("cache swa_kv: entry 2 of request 7 is not resident"), std::string::npos) << s.message();
    EXPECT_FALSE(dsv4::bind_cache(b, CacheBinding{"nope", 0}).has_value());
    EXPECT_FALSE(dsv4::bind_cache(b, CacheBinding{"swa_kv", 1}).has_value());
}

TEST(DeepseekV4StepSlots, CompressorEmissions) {
    Groups g = make_groups();
    const StepBatch b = make_batch(g);
    const BoundCache state = bound(b, "state"), comp = bound(b, "comp");
    // (p + 1) % 4 == 0: request 7 position 7 (entry 1), request 9 position 3 (entry 0).
    ASSERT_EQ(dsv4::count_emissions(b, 4), 2);
    std::vector<int32_t> gather(16), entry_slots(2);
    std::vector<int64_t> entry_pos(2);
    ASSERT_TRUE(dsv4::emission_slots(b, state, comp, 4, true, gather.data(), entry_slots.data(), entry_pos.data()).is_ok());
    // Entry 1 of request 7: rows of positions 0..7 (Ca of block 0, Cb of block 1), rotated at 4.
    for (int64_t j = 0; j < 8; ++j) EXPECT_EQ(gather[static_cast<size_t>(j)], g.state->slot(7, j));
    EXPECT_EQ(entry_slots[0], g.comp->slot(7, 1));
    EXPECT_EQ(entry_pos[0], 4);
    // Entry 0 of request 9: no previous block (−1 × 4), then positions 0..3, rotated at 0.
    for (int64_t j = 0; j < 4; ++j) EXPECT_EQ(gather[static_cast<size_t>(8 + j)], -1);
    for (int64_t j = 0; j < 4; ++j) EXPECT_EQ(gather[static_cast<size_t>(12 + j)], g.state->slot(9, j));
    EXPECT_EQ(entry_slots[1], g.comp->slot(9, 0));
    EXPECT_EQ(entry_pos[1], 0);
    // Ratio 2: positions 5, 7, 9 of request 7 and 1, 3 of request 9 complete an entry.
    ASSERT_EQ(dsv4::count_emissions(b, 2), 5);
}

TEST(DeepseekV4StepSlots, VisibleSelectedAndRequestEntries) {
    Groups g = make_groups();
    const StepBatch b = make_batch(g);
    const BoundCache comp = bound(b, "comp");
    ASSERT_EQ(b.max_visible_entries(4), 2);  // position 10 sees entries 0, 1
    std::vector<int32_t> vis(20);
    ASSERT_TRUE(dsv4::visible_entry_slots(b, comp, 4, 2, vis.data()).is_ok());
    for (int64_t t = 0; t < b.n_tokens(); ++t) {
        const int64_t n = (b.positions[static_cast<size_t>(t)] + 1) / 4;  // causal: k < ⌊(p + 1)/4⌋
        for (int64_t j = 0; j < 2; ++j)
            EXPECT_EQ(vis[static_cast<size_t>(t * 2 + j)], j < n ? g.comp->slot(b.request_of_token(t), j) : -1);
    }
    ASSERT_EQ(dsv4::max_request_entries(b, 4), 2);
    std::vector<int32_t> keys(4);
    ASSERT_TRUE(dsv4::request_entry_slots(b, comp, 4, 2, keys.data()).is_ok());
    EXPECT_EQ(keys, (std::vector<int32_t>{static_cast<int32_t>(g.comp->slot(7, 0)), static_cast<int32_t>(g.comp->slot(7, 1)),
                                          static_cast<int32_t>(g.comp->slot(9, 0)), -1}));
    // Selections: entries past the causal range (or −1) mean none.
    std::vector<int32_t> sel(20, -1), out(20);
    sel[0] = 1;  // token 0 (position 5): n_c = 1, entry 1 is in the future
    sel[1] = 0;
    sel[2 * 5 + 0] = 1;  // token 5 (position 10): n_c = 2
    ASSERT_TRUE(dsv4::selected_entry_slots(b, comp, 4, sel.data(), 2, out.data()).is_ok());
    EXPECT_EQ(out[0], -1);
    EXPECT_EQ(out[1], g.comp->slot(7, 0));
    EXPECT_EQ(out[10], g.comp->slot(7, 1));
}

// Entry lists over several blocks (they are written block by block), and a released block in the range.
TEST(DeepseekV4StepSlots, EntryListsSpanBlocksAndNameAReleasedOne) {
    auto comp = std::move(CacheGroup::create(host(), "comp", CacheSpec{"comp", "f32 [4]", 16, 1, 0}, 2, 12, 1)).value();
    ASSERT_TRUE(comp->reserve(3, 2).is_ok());  // another request's blocks first: request 7's are not 0, 1, 2
    ASSERT_TRUE(comp->reserve(7, 5).is_ok());
    StepCaches caches;
    caches.groups = {comp.get()};
    const StepBatch b = make_step_batch({StepRequest{7, 4, 1, false}}, caches);  // position 4: entries 0..4
    const BoundCache c = bound(b, "comp");
    std::vector<int32_t> keys(7), vis(7);
    ASSERT_TRUE(dsv4::request_entry_slots(b, c, 1, 7, keys.data()).is_ok());
    ASSERT_TRUE(dsv4::visible_entry_slots(b, c, 1, 7, vis.data()).is_ok());
    for (int64_t j = 0; j < 7; ++j) {
        const int32_t want = j < 5 ? static_cast<int32_t>(comp->slot(7, j)) : -1;
        EXPECT_EQ(keys[static_cast<size_t>(j)], want) << j;
        EXPECT_EQ(vis[static_cast<size_t>(j)], want) << j;
    }
    comp->release_before(7, 2);  // entries 0, 1 (block 0) are gone
    const Status s = dsv4::request_entry_slots(b, c, 1, 7, keys.data());
    EXPECT_EQ(s.code(), StatusCode::internal);
    EXPECT_NE(s.message().find("cache comp: entry 0 of request 7 is not resident"), std::string::npos) << s.message();
    EXPECT_EQ(dsv4::visible_entry_slots(b, c, 1, 7, vis.data()).code(), StatusCode::internal);
}

std::unique_ptr<AttentionModel> exact_model(const Fixture& f, Backend& backend) {
    DeepseekV4Options o;
    o.backend = &backend;
    o.layers = {1};
    auto m = load_deepseek_v4_model(f.v4(), *f.checkpoint, o);
    EXPECT_TRUE(m.has_value()) << m.status().to_string();
    return std::move(m).value();
}

// §3.6: when no request of the step has more than index_topk entries the indexer takes every causal entry
// unscored; that must be the set scoring would select. Request 1 (37 tokens) truncated to 35 tokens
// (⌊35/4⌋ = 8 = index_topk: fallback) against all 37 (⌊37/4⌋ = 9: scored).
TEST(DeepseekV4Indexer, ShortContextFallbackSelectsTheScoredSets) {
    Fixture f = load_fixture();
    auto backend = std::move(make_backend("cpu")).value();
    auto model = exact_model(f, *backend);
    RunOptions short_run;
    short_run.requests = {1};
    short_run.truncate = 35;
    RunOptions full_run;
    full_run.requests = {1};
    const RunResult a = run_fixture(f, *model, short_run), b = run_fixture(f, *model, full_run);
    ASSERT_TRUE(a.status.is_ok()) << a.status.to_string();
    ASSERT_TRUE(b.status.is_ok()) << b.status.to_string();
    const auto& sa = a.selections.at({1, 1});
    const auto& sb = b.selections.at({1, 1});
    ASSERT_EQ(sa.size(), 35u);  // the observer saw every token
    ASSERT_EQ(sb.size(), 37u);
    for (int64_t p = 0; p < 35; ++p) {
        EXPECT_TRUE(a.scores.at({1, 1}).at(p).empty()) << "fallback rows come without scores";
        EXPECT_EQ(static_cast<int64_t>(b.scores.at({1, 1}).at(p).size()), (p + 1) / 4) << "one score per candidate";
        EXPECT_EQ(sa.at(p), sb.at(p)) << p;
        EXPECT_EQ(static_cast<int64_t>(sa.at(p).size()), (p + 1) / 4) << p;  // every causal entry
    }
    // Rows 35, 36 have 9 candidates and select 8.
    EXPECT_EQ(sb.at(35).size(), 8u);
    EXPECT_EQ(sb.at(36).size(), 8u);
    // The outputs of the shared positions agree (the fallback changes nothing but the path).
    for (size_t i = 0; i < a.outputs.at(1)[0].size(); ++i) ASSERT_NEAR(a.outputs.at(1)[0][i], b.outputs.at(1)[0][i], 1e-5);
}

// An observer may replace a selection (sieve check does for ties); entries outside the causal range are
// "none" (golden_format.md), so they must act exactly like −1 — and replacing must have an effect.
TEST(DeepseekV4Indexer, ObserverReplacementsAndOutOfRangeEntries) {
    Fixture f = load_fixture();
    auto backend = std::move(make_backend("cpu")).value();
    auto model = exact_model(f, *backend);
    RunOptions plain, none, future;
    plain.requests = none.requests = future.requests = {2};
    none.modify = [](int64_t, RequestId, int64_t, std::span<int32_t> sel) {
        for (int32_t& s : sel) s = -1;
    };
    future.modify = [](int64_t, RequestId, int64_t p, std::span<int32_t> sel) {
        for (size_t j = 0; j < sel.size(); ++j) sel[j] = static_cast<int32_t>((p + 1) / 4 + static_cast<int64_t>(j));
    };
    const RunResult a = run_fixture(f, *model, plain), b = run_fixture(f, *model, none), c = run_fixture(f, *model, future);
    ASSERT_TRUE(a.status.is_ok() && b.status.is_ok() && c.status.is_ok());
    const std::vector<float>&oa = a.outputs.at(2)[0], &ob = b.outputs.at(2)[0], &oc = c.outputs.at(2)[0];
    EXPECT_EQ(ob, oc);
    double diff = 0;
    for (size_t i = 0; i < oa.size(); ++i) diff = std::max(diff, std::fabs(static_cast<double>(oa[i]) - ob[i]));
    EXPECT_GT(diff, 1e-3);
    // Tokens before the first entry (p < 3) have nothing to select: identical in all three runs.
    for (size_t i = 0; i < 3 * 64; ++i) EXPECT_EQ(oa[i], ob[i]);
}

// Without an observer the CSA layer selects inside the indexer op (ops/indexer_scores.h "Fused
// selection", no score rows); with one it writes the rows and runs the top-k op. Both must give the same
// outputs bit for bit, in both profiles, on ref and on every cpu ISA, under a chunked schedule with
// several requests per step.
TEST(DeepseekV4Indexer, FusedSelectionMatchesScoresThenTopk) {
    Fixture f = load_fixture();
    for (const char* spec : {"ref", "cpu", "cpu:avx2", "cpu:scalar"}) {
        auto backend = make_backend(spec);
        if (!backend.has_value()) continue;  // an ISA this machine lacks
        for (NumericsProfile profile : {NumericsProfile::exact, NumericsProfile::deployed}) {
            SCOPED_TRACE(std::string(spec) + " " + std::string(numerics_profile_name(profile)));
            DeepseekV4Options o;
            o.backend = backend->get();
            o.profile = profile;
            auto model = load_deepseek_v4_model(f.v4(), *f.checkpoint, o);
            ASSERT_TRUE(model.has_value()) << model.status().to_string();
            RunOptions observed, fused;
            observed.engine.scheduler.max_tokens_per_step = fused.engine.scheduler.max_tokens_per_step = 7;
            fused.observe = false;
            const RunResult a = run_fixture(f, **model, observed), b = run_fixture(f, **model, fused);
            ASSERT_TRUE(a.status.is_ok()) << a.status.to_string();
            ASSERT_TRUE(b.status.is_ok()) << b.status.to_string();
            ASSERT_FALSE(a.selections.empty());  // the CSA layer ran its indexer
            for (const auto& [request, layers] : a.outputs)
                for (size_t l = 0; l < layers.size(); ++l)
                    EXPECT_EQ(layers[l], b.outputs.at(request)[l]) << "request " << request << " layer position " << l;
        }
    }
}

}  // namespace
}  // namespace sieve::dsv4_test
