// Pieces of the DeepSeek-V4 layer: the slot lists of a step (window, compressor emissions, request
// entries) against CacheGroup::slot on hand-made batches with released blocks; the step's plan (its device
// lists, the block tables the selected_slots op reads, errors for entries not resident, forwards of a step
// it did not plan); the short-context fallback selecting the same sets as scoring; selections outside the
// causal range meaning "none"; the observer seeing every token; a device backend giving the same results.
#include <fmt/format.h>

#include "sieve/backends/backend.h"
#include "model_test_util.h"
#include "models/deepseek_v4/model.h"
#include "models/deepseek_v4/step_plan.h"
#include "models/deepseek_v4/step_slots.h"
#include "sieve/ops/block_tables.h"
#include "sieve/ops/selected_slots.h"

namespace sieve::model_test {
namespace {

// The caches of the slot-list tests live in host memory, and so do the plans (their lists are read back
// directly).
Backend& host() {
    static const std::unique_ptr<Backend> backend = std::move(make_backend("ref")).value();
    return *backend;
}

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

TEST(DeepseekV4StepSlots, WindowAndTokenSlots) {
    Groups g = make_groups();
    const StepBatch b = make_batch(g);
    ASSERT_EQ(b.n_tokens(), 10);
    std::vector<int32_t> own(10), window(30);
    ASSERT_TRUE(token_slots(b, *g.swa, own.data()).is_ok());
    ASSERT_TRUE(dsv4::window_slots(b, *g.swa, 3, window.data()).is_ok());
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
    const Status s = dsv4::window_slots(b, *g.swa, 4, w4.data());
    EXPECT_EQ(s.code(), StatusCode::internal);
    EXPECT_NE(s.message().find("cache swa_kv: entry 2 of request 7 is not resident"), std::string::npos) << s.message();
    EXPECT_FALSE(dsv4::bind_cache(b, CacheBinding{"nope", 0}).has_value());
    EXPECT_FALSE(dsv4::bind_cache(b, CacheBinding{"swa_kv", 1}).has_value());
}

TEST(DeepseekV4StepSlots, CompressorEmissions) {
    Groups g = make_groups();
    const StepBatch b = make_batch(g);
    // (p + 1) % 4 == 0: request 7 position 7 (entry 1), request 9 position 3 (entry 0).
    ASSERT_EQ(dsv4::count_emissions(b, 4), 2);
    std::vector<int32_t> gather(16), entry_slots(2);
    std::vector<int64_t> entry_pos(2);
    ASSERT_TRUE(
        dsv4::emission_slots(b, *g.state, *g.comp, 4, true, gather.data(), entry_slots.data(), entry_pos.data()).is_ok());
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

TEST(DeepseekV4StepSlots, RequestEntries) {
    Groups g = make_groups();
    const StepBatch b = make_batch(g);
    ASSERT_EQ(b.max_visible_entries(4), 2);  // position 10 sees entries 0, 1
    ASSERT_EQ(dsv4::max_request_entries(b, 4), 2);
    EXPECT_TRUE(dsv4::check_visible_entries(b, *g.comp, 4).is_ok());
}

// Visible entries over several blocks, and a released block in the range.
TEST(DeepseekV4StepSlots, VisibleEntriesSpanBlocksAndNameAReleasedOne) {
    auto comp = std::move(CacheGroup::create(host(), "comp", CacheSpec{"comp", "f32 [4]", 16, 1, 0}, 2, 12, 1)).value();
    ASSERT_TRUE(comp->reserve(3, 2).is_ok());  // another request's blocks first: request 7's are not 0, 1, 2
    ASSERT_TRUE(comp->reserve(7, 5).is_ok());
    StepCaches caches;
    caches.groups = {comp.get()};
    const StepBatch b = make_step_batch({StepRequest{7, 4, 1, false}}, caches);  // position 4: entries 0..4
    EXPECT_TRUE(dsv4::check_visible_entries(b, *comp, 1).is_ok());
    comp->release_before(7, 2);  // entries 0, 1 (block 0) are gone
    const Status v = dsv4::check_visible_entries(b, *comp, 1);
    EXPECT_EQ(v.code(), StatusCode::internal);
    EXPECT_NE(v.message().find("cache comp: entry 0 of request 7 is not resident"), std::string::npos) << v.message();
}

// What the layers of make_groups() read: a window of 3, a compressor of ratio 4 into "comp", whose entries
// attention reads and an indexer scores (top-1, so the step is scored).
dsv4::StepPlanNeeds make_needs(int64_t window) {
    dsv4::StepPlanNeeds n;
    n.window = "swa_kv";
    n.sliding_window = window;
    n.add(dsv4::StepPlanNeeds::Compressor{"state", "comp", 4, true});
    n.add(dsv4::StepPlanNeeds::Compressor{"state", "comp", 4, true});  // a second layer of the same groups
    n.add(dsv4::StepPlanNeeds::Compressed{"comp", 4});
    n.add(dsv4::StepPlanNeeds::Indexer{"comp", 4, 1});
    return n;
}

// The plan's device lists are the host lists of the step (one per group, however many layers read it), and
// its block tables give the selected_slots op the same slots as CacheGroup::slot.
TEST(DeepseekV4StepPlan, ListsAndTablesOfTheStep) {
    Groups g = make_groups();
    const StepBatch b = make_batch(g);
    const dsv4::StepPlanNeeds needs = make_needs(3);
    ASSERT_EQ(needs.compressors.size(), 1u);
    dsv4::StepPlan plan;
    ASSERT_TRUE(plan.build(host(), b, needs).is_ok());
    EXPECT_TRUE(plan.planned(b));
    const int64_t N = b.n_tokens();
    ASSERT_EQ(plan.n_tokens(), N);
    EXPECT_EQ(std::vector<int64_t>(plan.positions(), plan.positions() + N), b.positions);

    std::vector<int32_t> own(10), window(30);
    ASSERT_TRUE(token_slots(b, *g.swa, own.data()).is_ok());
    ASSERT_TRUE(dsv4::window_slots(b, *g.swa, 3, window.data()).is_ok());
    ASSERT_EQ(plan.window().width, 3);
    EXPECT_EQ(std::vector<int32_t>(plan.window().token_slots, plan.window().token_slots + N), own);
    EXPECT_EQ(std::vector<int32_t>(plan.window().slots, plan.window().slots + 3 * N), window);

    auto c = plan.compressor("state");
    ASSERT_TRUE(c.has_value()) << c.status().to_string();
    ASSERT_EQ((*c)->n_emit, 2);
    EXPECT_EQ((*c)->entry_slots[0], g.comp->slot(7, 1));
    EXPECT_EQ((*c)->entry_positions[1], 0);
    for (int64_t j = 0; j < 8; ++j) EXPECT_EQ((*c)->gather[j], g.state->slot(7, j));
    EXPECT_FALSE(plan.compressor("comp").has_value());

    auto ix = plan.indexer("comp");
    ASSERT_TRUE(ix.has_value()) << ix.status().to_string();
    EXPECT_TRUE((*ix)->scored);  // request 7 holds 2 entries > top-1
    EXPECT_EQ((*ix)->width, 1);
    ASSERT_EQ((*ix)->max_keys, 2);
    for (int64_t t = 0; t < N; ++t) EXPECT_EQ((*ix)->n_keys[t], (b.positions[static_cast<size_t>(t)] + 1) / 4);
    EXPECT_EQ((*ix)->n_slots, g.comp->n_slots());
    const BlockTables& kt = (*ix)->tables;  // the indexer_scores op reads key j of token t's request here
    for (int64_t t = 0; t < N; ++t)
        for (int64_t j = 0; j < (*ix)->n_keys[t]; ++j) {
            const int64_t row = kt.token_request[t];
            const RequestId id = b.requests[static_cast<size_t>(row)].id;
            EXPECT_EQ(paged_slot(kt.block_table + row * kt.block_table_stride, j, g.comp->block_size()), g.comp->slot(id, j))
                << "token " << t << " key " << j;
        }

    // Every visible entry, and a selection with entries outside the causal range, through the op.
    auto comp = plan.compressed("comp");
    ASSERT_TRUE(comp.has_value()) << comp.status().to_string();
    ASSERT_EQ((*comp)->visible, 2);
    std::vector<int32_t> slots(static_cast<size_t>(2 * N), -7);
    SelectedSlotsParams p;
    p.positions = plan.positions();
    p.tables = (*comp)->tables;
    p.slots = slots.data();
    p.n_tokens = N;
    p.width = 2;
    p.ratio = 4;
    p.block_size = (*comp)->block_size;
    p.n_slots = (*comp)->n_slots;
    p.selected_row_stride = p.slots_row_stride = 2;
    ASSERT_TRUE(host().selected_slots(p).is_ok());
    for (int64_t t = 0; t < N; ++t) {
        const int64_t n = (b.positions[static_cast<size_t>(t)] + 1) / 4;  // causal: k < ⌊(p + 1)/4⌋
        for (int64_t j = 0; j < 2; ++j)
            EXPECT_EQ(slots[static_cast<size_t>(t * 2 + j)], j < n ? g.comp->slot(b.request_of_token(t), j) : -1);
    }
    std::vector<int32_t> sel(static_cast<size_t>(2 * N), -1);
    sel[0] = 1;  // token 0 (position 5) sees entry 0 only: entry 1 is in the future
    sel[1] = 0;
    sel[2 * 5 + 0] = 1;  // token 5 (position 10) sees entries 0, 1
    p.selected = sel.data();
    ASSERT_TRUE(host().selected_slots(p).is_ok());
    EXPECT_EQ(slots[0], -1);
    EXPECT_EQ(slots[1], g.comp->slot(7, 0));
    EXPECT_EQ(slots[10], g.comp->slot(7, 1));

    // Another step is not this plan's.
    StepCaches caches;
    caches.groups = {g.swa.get(), g.comp.get(), g.state.get()};
    EXPECT_FALSE(plan.planned(make_step_batch({StepRequest{7, 5, 5, false}, StepRequest{9, 0, 4, false}}, caches)));
    EXPECT_FALSE(plan.planned(make_step_batch({StepRequest{9, 0, 4, false}, StepRequest{7, 5, 6, false}}, caches)));
}

// An entry the plan needs that is not resident is an internal error of plan time naming the cache, the
// request and the entry; so is a compressed entry a token may select. A failed plan plans nothing.
TEST(DeepseekV4StepPlan, EntriesNotResidentAreNamed) {
    Groups g = make_groups();
    const StepBatch b = make_batch(g);
    dsv4::StepPlan plan;
    ASSERT_TRUE(plan.build(host(), b, make_needs(3)).is_ok());
    Status s = plan.build(host(), b, make_needs(4));
    EXPECT_EQ(s.code(), StatusCode::internal);
    EXPECT_NE(s.message().find("cache swa_kv: entry 2 of request 7 is not resident"), std::string::npos) << s.message();
    EXPECT_FALSE(plan.planned(b));
    g.comp->free_request(9);
    s = plan.build(host(), b, make_needs(3));
    EXPECT_EQ(s.code(), StatusCode::internal);
    EXPECT_NE(s.message().find("cache comp: entry 0 of request 9 is not resident"), std::string::npos) << s.message();
}

std::unique_ptr<AttentionModel> exact_model(const Golden& g, Backend& backend) {
    DeepseekV4Options o;
    o.backend = &backend;
    o.layers = {1};
    auto m = load_deepseek_v4_model(*g.config.deepseek_v4(), *g.checkpoint, o);
    EXPECT_TRUE(m.has_value()) << m.status().to_string();
    return std::move(m).value();
}

// The fixture's request `request` alone, through `model`'s layers.
std::vector<GoldenRunRequest> one_request(const Golden& g, const AttentionModel& model, size_t request) {
    auto all = golden_fixture_requests(g.fixture, model.layers());
    EXPECT_TRUE(all.has_value()) << all.status().to_string();
    if (!all) return {};
    return {(*all)[request]};
}

// A run observed any selection at all.
bool selected_any(const GoldenRun& run) {
    for (const GoldenRequestRun& r : run.requests)
        for (const auto& layer : r.selections)
            if (!layer.empty()) return true;
    return false;
}

// §3.6: when no request of the step has more than index_topk entries the indexer takes every causal entry
// unscored; that must be the set scoring would select. Request 1 (37 tokens) truncated to 35 tokens
// (⌊35/4⌋ = 8 = index_topk: fallback) against all 37 (⌊37/4⌋ = 9: scored).
TEST(DeepseekV4Indexer, ShortContextFallbackSelectsTheScoredSets) {
    const Golden g = load_golden("deepseek_v4");
    auto backend = std::move(make_backend("cpu")).value();
    auto model = exact_model(g, *backend);
    const std::vector<GoldenRunRequest> full = one_request(g, *model, 1);
    ASSERT_EQ(full.size(), 1u);
    std::vector<GoldenRunRequest> shortened = full;
    shortened[0].n_tokens = 35;
    const GoldenSchedule together;
    const auto a = run_golden_requests(*model, shortened, together), b = run_golden_requests(*model, full, together);
    ASSERT_TRUE(a.has_value()) << a.status().to_string();
    ASSERT_TRUE(b.has_value()) << b.status().to_string();
    const auto& sa = a->requests[0].selections[0];  // the model runs layer 1 only
    const auto& sb = b->requests[0].selections[0];
    ASSERT_EQ(sa.size(), 35u);  // the observer saw every token
    ASSERT_EQ(sb.size(), 37u);
    for (int64_t p = 0; p < 35; ++p) {
        EXPECT_TRUE(sa.at(p).scores.empty()) << "fallback rows come without scores";
        EXPECT_EQ(static_cast<int64_t>(sb.at(p).scores.size()), (p + 1) / 4) << "one score per candidate";
        EXPECT_EQ(sa.at(p).set(), sb.at(p).set()) << p;
        EXPECT_EQ(static_cast<int64_t>(sa.at(p).set().size()), (p + 1) / 4) << p;  // every causal entry
    }
    // Rows 35, 36 have 9 candidates and select 8.
    EXPECT_EQ(sb.at(35).set().size(), 8u);
    EXPECT_EQ(sb.at(36).set().size(), 8u);
    // The outputs of the shared positions agree (the fallback changes nothing but the path).
    const std::vector<float>&oa = a->requests[0].outputs[0], &ob = b->requests[0].outputs[0];
    for (size_t i = 0; i < oa.size(); ++i) ASSERT_NEAR(oa[i], ob[i], 1e-5);
}

// An observer may replace a selection (sieve check does for ties); entries outside the causal range are
// "none" (golden_format.md), so they must act exactly like −1 — and replacing must have an effect.
TEST(DeepseekV4Indexer, ObserverReplacementsAndOutOfRangeEntries) {
    const Golden g = load_golden("deepseek_v4");
    auto backend = std::move(make_backend("cpu")).value();
    auto model = exact_model(g, *backend);
    const std::vector<GoldenRunRequest> request = one_request(g, *model, 2);
    GoldenRunOptions none, future;
    none.rewrite = [](int64_t, int64_t, int64_t, std::span<int32_t> sel, std::span<const float>, int64_t) {
        for (int32_t& s : sel) s = -1;
    };
    future.rewrite = [](int64_t, int64_t, int64_t p, std::span<int32_t> sel, std::span<const float>, int64_t) {
        for (size_t j = 0; j < sel.size(); ++j) sel[j] = static_cast<int32_t>((p + 1) / 4 + static_cast<int64_t>(j));
    };
    const GoldenSchedule together;
    const auto a = run_golden_requests(*model, request, together), b = run_golden_requests(*model, request, together, none),
               c = run_golden_requests(*model, request, together, future);
    ASSERT_TRUE(a.has_value() && b.has_value() && c.has_value());
    const std::vector<float>&oa = a->requests[0].outputs[0], &ob = b->requests[0].outputs[0],
                           &oc = c->requests[0].outputs[0];
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
    const Golden g = load_golden("deepseek_v4");
    for (const char* spec : {"ref", "cpu", "cpu:avx2", "cpu:scalar"}) {
        auto backend = make_backend(spec);
        if (!backend.has_value()) continue;  // an ISA this machine lacks
        for (NumericsProfile profile : {NumericsProfile::exact, NumericsProfile::deployed}) {
            SCOPED_TRACE(std::string(spec) + " " + std::string(numerics_profile_name(profile)));
            DeepseekV4Options o;
            o.backend = backend->get();
            o.profile = profile;
            auto model = load_deepseek_v4_model(*g.config.deepseek_v4(), *g.checkpoint, o);
            ASSERT_TRUE(model.has_value()) << model.status().to_string();
            GoldenSchedule steps_of_7;
            steps_of_7.engine.scheduler.max_tokens_per_step = 7;
            GoldenRunOptions fused;
            fused.observe = false;
            const auto a = run_fixture(**model, g, steps_of_7), b = run_fixture(**model, g, steps_of_7, fused);
            ASSERT_TRUE(a.has_value()) << a.status().to_string();
            ASSERT_TRUE(b.has_value()) << b.status().to_string();
            ASSERT_TRUE(selected_any(*a));  // the CSA layer ran its indexer
            for (size_t request = 0; request < a->requests.size(); ++request)
                for (size_t l = 0; l < a->layers.size(); ++l)
                    EXPECT_EQ(a->requests[request].outputs[l], b->requests[request].outputs[l])
                        << "request " << request << " layer position " << l;
        }
    }
}

// One plan per step (DESIGN.md): a forward of a batch plan_step did not plan is an internal error, never a
// forward over another step's lists.
TEST(DeepseekV4Model, ForwardNeedsThePlanOfItsStep) {
    const Golden g = load_golden("deepseek_v4");
    auto backend = std::move(make_backend("cpu")).value();
    auto model = exact_model(g, *backend);
    std::vector<std::unique_ptr<CacheGroup>> groups;
    StepCaches caches;
    for (const CacheGroupDesc& d : model->cache_groups()) {
        groups.push_back(std::move(CacheGroup::create(*backend, d.name, d.spec, d.block_size, 8, d.n_layers())).value());
        ASSERT_TRUE(groups.back()->reserve(7, groups.back()->entries_for_tokens(5)).is_ok());
        caches.groups.push_back(groups.back().get());
    }
    const StepBatch batch = make_step_batch({{7, 0, 5, false}}, caches);
    const int64_t D = model->hidden_size();
    auto in = std::move(backend->buffer_alloc(static_cast<size_t>(5 * D) * 4, BufferUsage::workspace, "in")).value();
    auto out = std::move(backend->buffer_alloc(static_cast<size_t>(5 * D) * 4, BufferUsage::workspace, "out")).value();
    Status s = model->forward(0, batch, in->as<float>(), out->as<float>(), nullptr);
    EXPECT_EQ(s.code(), StatusCode::internal);
    EXPECT_NE(s.message().find("did not plan"), std::string::npos) << s.to_string();
    ASSERT_TRUE(model->plan_step(batch).is_ok());
    EXPECT_TRUE(model->forward(0, batch, in->as<float>(), out->as<float>(), nullptr).is_ok());
    EXPECT_GT(model->workspace_bytes(), 0);
    const StepBatch next = make_step_batch({{7, 0, 4, false}}, caches);  // another step, not planned
    EXPECT_EQ(model->forward(0, next, in->as<float>(), out->as<float>(), nullptr).code(), StatusCode::internal);
}

// On a device whose memory the host cannot touch (backends/host_copy), the model runs every schedule with
// the results of the backend the device runs its ops on, bit for bit: observed (score rows, top-k, the rows
// downloaded and uploaded back) and fused, scored steps and short-context ones, both profiles.
TEST(DeepseekV4Model, HostCopyDeviceMatchesItsInnerBackend) {
    const Golden g = load_golden("deepseek_v4");
    auto host = std::move(make_backend("cpu")).value();
    auto device = std::move(make_backend("host-copy:cpu")).value();
    for (NumericsProfile profile : {NumericsProfile::exact, NumericsProfile::deployed}) {
        for (bool observe : {true, false}) {
            SCOPED_TRACE(fmt::format("{} {}", numerics_profile_name(profile), observe ? "observed" : "fused"));
            DeepseekV4Options o;
            o.profile = profile;
            o.backend = host.get();
            auto on_host = load_deepseek_v4_model(*g.config.deepseek_v4(), *g.checkpoint, o);
            o.backend = device.get();
            auto on_device = load_deepseek_v4_model(*g.config.deepseek_v4(), *g.checkpoint, o);
            ASSERT_TRUE(on_host.has_value()) << on_host.status().to_string();
            ASSERT_TRUE(on_device.has_value()) << on_device.status().to_string();
            GoldenSchedule steps_of_7;
            steps_of_7.engine.scheduler.max_tokens_per_step = 7;
            GoldenRunOptions run;
            run.observe = observe;
            const auto a = run_fixture(**on_host, g, steps_of_7, run), b = run_fixture(**on_device, g, steps_of_7, run);
            ASSERT_TRUE(a.has_value()) << a.status().to_string();
            ASSERT_TRUE(b.has_value()) << b.status().to_string();
            for (size_t r = 0; r < a->requests.size(); ++r) {
                EXPECT_EQ(a->requests[r].outputs, b->requests[r].outputs) << "request " << r;
                EXPECT_EQ(a->requests[r].selections, b->requests[r].selections) << "request " << r;  // rows and scores
            }
            EXPECT_EQ(observe, selected_any(*b));
        }
    }
}

}  // namespace
}  // namespace sieve::model_test
