// Allocator, paged cache groups, scheduler, batch builder and engine, with a toy model whose
// output depends on the cached history: a windowed causal mean and a full-history mean over
// compressed (pooled) entries. Its outputs must not depend on how requests are scheduled.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <functional>
#include <map>
#include <numeric>
#include <random>

#include "sieve/backends/backend.h"
#include "sieve/kv/block_allocator.h"
#include "sieve/kv/paged_cache.h"
#include "sieve/runtime/engine.h"
#include "sieve/runtime/prefix_cache.h"
#include "sieve/runtime/scheduler.h"
#include "sieve/runtime/step_runner.h"

namespace sieve {
namespace {

// The caches of these tests live in host memory that the tests read back directly.
Backend& host_backend() {
    static const std::unique_ptr<Backend> backend = std::move(make_backend("ref")).value();
    return *backend;
}

TEST(BlockAllocator, AllocatesFreesAndReportsExhaustion) {
    BlockAllocator a(3);
    std::vector<int32_t> got;
    for (int i = 0; i < 3; ++i) got.push_back(*a.allocate("pool"));
    EXPECT_EQ(a.free_blocks(), 0);
    auto none = a.allocate("swa_kv");
    ASSERT_FALSE(none.has_value());
    EXPECT_EQ(none.status().code(), StatusCode::out_of_memory);
    EXPECT_NE(none.status().message().find("swa_kv"), std::string::npos);
    a.free(got[1]);
    EXPECT_EQ(*a.allocate("pool"), got[1]);
    EXPECT_DEATH(a.free(7), "out of range");
}

TEST(BlockAllocator, ABlockIsFreeOnlyWhenItsLastHolderLetsItGo) {
    BlockAllocator a(2);
    const int32_t b = *a.allocate("pool");
    a.retain(b);
    EXPECT_EQ(a.references(b), 2);
    a.free(b);
    EXPECT_EQ(a.free_blocks(), 1) << "one holder is left";
    EXPECT_EQ(a.references(b), 1);
    a.free(b);
    EXPECT_EQ(a.free_blocks(), 2);
    EXPECT_EQ(a.references(b), 0);
    EXPECT_DEATH(a.retain(b), "retain of a free block");
    EXPECT_DEATH(a.free(b), "freed twice");
}

// A prefix cache over one group of 2-entry blocks (chunks of 2 tokens): chains of chunks hold their blocks
// after their requests end, a hit shares a chain's run, and eviction takes the least recently used chunk
// that no cached chunk extends, so that a chain is evicted from its end.
TEST(PrefixCache, SharesCachedRunsAndEvictsLeastRecentlyUsedLeaves) {
    auto made = CacheGroup::create(host_backend(), "kv", CacheSpec{"kv", "f32 [4]", 16, 1, 0}, 2, 16, 1);
    ASSERT_TRUE(made.has_value());
    CacheGroup& g = **made;
    PrefixCache cache({&g});
    ASSERT_EQ(cache.chunk_tokens(), 2);
    ASSERT_TRUE(g.reserve(1, 6).is_ok());
    cache.publish(1, {10, 11, 12}, 6);  // three chunks
    const std::vector<int32_t> a = g.block_table(1);
    g.free_request(1);
    ASSERT_TRUE(g.reserve(2, 5).is_ok());
    cache.publish(2, {20, 21}, 5);  // two chunks (the fifth token's block is not a whole chunk)
    const std::vector<int32_t> b = g.block_table(2);
    g.free_request(2);
    EXPECT_EQ(g.allocator().used_blocks(), 5) << "the cached chunks keep their blocks";
    EXPECT_EQ(cache.stats().cached_chunks, 5);

    auto hit = cache.attach(3, {10, 11, 99}, 100);  // chunk 99 was never cached: a run of two
    ASSERT_TRUE(hit.has_value());
    EXPECT_EQ(*hit, 4);
    EXPECT_EQ(g.allocator().references(g.block_table(3)[0]), 2) << "the request and the cache hold it";
    g.free_request(3);
    EXPECT_EQ(*cache.attach(4, {11}, 100), 0) << "chunk 11 continues chunk 10, not a prompt's start";
    EXPECT_EQ(*cache.attach(5, {10, 11}, 3), 2) << "max_tokens 3 allows one chunk";
    g.free_request(5);

    // Leaves by last use: 12 (published third), 21 (fifth); 10 and 11 were used since. Each eviction frees
    // its chunk's block, and its parent becomes a leaf: 12, 21, 20, 11, 10.
    const std::vector<int32_t> order = {a[2], b[1], b[0], a[1], a[0]};
    for (size_t k = 0; k < order.size(); ++k) {
        ASSERT_TRUE(cache.evict_one());
        EXPECT_EQ(g.allocator().references(order[k]), 0) << "eviction " << k;
        EXPECT_EQ(g.allocator().used_blocks(), static_cast<int64_t>(order.size() - 1 - k));
    }
    EXPECT_FALSE(cache.evict_one());
    EXPECT_EQ(cache.stats().evicted_chunks, 5);
    EXPECT_EQ(cache.stats().hits, 2);
}

// A request publishing as it runs passes back how many leading chunks are cached, so that each call looks
// at its new chunks only; when the last of them was evicted meanwhile, the next call starts over and caches
// it again (the request still holds its block).
TEST(PrefixCache, PublishingAsARequestRunsResumesWhereItStopped) {
    auto made = CacheGroup::create(host_backend(), "kv", CacheSpec{"kv", "f32 [4]", 16, 1, 0}, 2, 16, 1);
    ASSERT_TRUE(made.has_value());
    CacheGroup& g = **made;
    PrefixCache cache({&g});
    const std::vector<uint64_t> keys = {30, 31, 32};
    ASSERT_TRUE(g.reserve(7, 3).is_ok());
    size_t cached = cache.publish(7, keys, 3);
    EXPECT_EQ(cached, 1u) << "one whole chunk of 2 tokens";
    ASSERT_TRUE(g.reserve(7, 4).is_ok());
    cached = cache.publish(7, keys, 4, cached);
    EXPECT_EQ(cached, 2u);
    EXPECT_EQ(cache.stats().cached_chunks, 2);
    ASSERT_TRUE(cache.evict_one());  // chunk 31, the only leaf
    ASSERT_TRUE(g.reserve(7, 6).is_ok());
    cached = cache.publish(7, keys, 6, cached);
    EXPECT_EQ(cached, 3u);
    EXPECT_EQ(cache.stats().cached_chunks, 3) << "chunk 31 cached again, then 32";
    g.free_request(7);
    EXPECT_EQ(g.allocator().used_blocks(), 3);
}

TEST(CacheGroup, SlotsWindowsAndAllOrNothingReserve) {
    auto g = CacheGroup::create(host_backend(), "kv", CacheSpec{"kv", "f32 [4]", 16, 1, 6}, 4, 5, 2);
    ASSERT_TRUE(g.has_value());
    CacheGroup& c = **g;
    EXPECT_EQ(c.block_bytes(), 64);
    ASSERT_TRUE(c.reserve(1, 10).is_ok());  // 3 blocks
    EXPECT_EQ(c.block_table(1).size(), 3u);
    const int64_t s9 = c.slot(1, 9);
    EXPECT_EQ(s9, c.block_table(1)[2] * 4 + 1);
    EXPECT_EQ(c.slot(1, 12), -1);  // beyond what was reserved
    // Request 2 needs 3 blocks, only 2 are free: nothing stays allocated.
    Status s = c.reserve(2, 12);
    EXPECT_EQ(s.code(), StatusCode::out_of_memory);
    EXPECT_EQ(c.allocator().free_blocks(), 2);
    // Window: entries before 8 are no longer needed, blocks 0 and 1 go back.
    c.release_before(1, 8);
    EXPECT_EQ(c.slot(1, 3), -1);
    EXPECT_EQ(c.slot(1, 9), s9);
    EXPECT_EQ(c.allocator().free_blocks(), 4);
    ASSERT_TRUE(c.reserve(2, 12).is_ok());
    // Two layers have separate storage with the same geometry.
    EXPECT_NE(c.view(0).base, c.view(1).base);
    EXPECT_EQ(c.view(0).row(s9), c.view(0).base + (s9 / 4) * 64 + (s9 % 4) * 16);
    c.free_request(1);
    c.free_request(2);
    EXPECT_EQ(c.allocator().free_blocks(), 5);
}

// Storage comes from the backend zeroed, and copy_block moves one whole block of one layer on the
// device, leaving the other layers and blocks alone; blocks outside the pool are refused.
TEST(CacheGroup, StorageStartsZeroedAndCopiesWholeBlocks) {
    auto g = CacheGroup::create(host_backend(), "kv", CacheSpec{"kv", "f32 [4]", 16, 1, 0}, 4, 3, 2);
    ASSERT_TRUE(g.has_value());
    CacheGroup& c = **g;
    const CacheView v0 = c.view(0), v1 = c.view(1);
    for (int64_t i = 0; i < 3 * c.block_bytes(); ++i) ASSERT_EQ(v0.base[i] | v1.base[i], 0) << "byte " << i;
    for (int64_t i = 0; i < c.block_bytes(); ++i) v0.base[2 * c.block_bytes() + i] = static_cast<uint8_t>(i + 1);
    ASSERT_TRUE(c.copy_block(0, 1, 2).is_ok());
    for (int64_t i = 0; i < c.block_bytes(); ++i) {
        ASSERT_EQ(v0.base[c.block_bytes() + i], static_cast<uint8_t>(i + 1)) << "byte " << i;
        ASSERT_EQ(v0.base[i], 0) << "block 0 byte " << i;
        ASSERT_EQ(v1.base[c.block_bytes() + i], 0) << "layer 1 byte " << i;
    }
    const Status s = c.copy_block(0, 3, 0);
    EXPECT_EQ(s.code(), StatusCode::invalid_argument);
    EXPECT_NE(s.message().find("expected blocks in [0, 3)"), std::string::npos) << s.message();
}

// A window that slides one entry at a time (a long decode): every block wholly behind it goes back
// exactly once, however the calls fall, and the blocks in the window stay.
TEST(CacheGroup, SlidingWindowReleasesEachBlockOnce) {
    auto g = CacheGroup::create(host_backend(), "swa", CacheSpec{"swa", "f32 [4]", 16, 1, 6}, 4, 8, 1);
    ASSERT_TRUE(g.has_value());
    CacheGroup& c = **g;
    constexpr int64_t kWindow = 6;
    for (int64_t end = 1; end <= 60; ++end) {
        ASSERT_TRUE(c.reserve(3, end).is_ok()) << end;
        c.release_before(3, std::max<int64_t>(0, end - kWindow));
        c.release_before(3, std::max<int64_t>(0, end - kWindow - 5));  // an earlier point again: a no-op
        const int64_t first = std::max<int64_t>(0, end - kWindow);
        for (int64_t e = 0; e < end; ++e)
            EXPECT_EQ(c.slot(3, e) >= 0, e >= first / 4 * 4) << "end " << end << " entry " << e;
        const int64_t held = (end + 3) / 4 - first / 4;
        EXPECT_EQ(c.allocator().free_blocks(), 8 - held) << end;
    }
    c.free_request(3);
    EXPECT_EQ(c.allocator().free_blocks(), 8);
}

TEST(Scheduler, DecodesFirstThenPrefillChunksUnderBudget) {
    SchedulerOptions o;
    o.max_tokens_per_step = 10;
    Scheduler s(o);
    s.add(1, 20, 20);  // long prompt
    s.add(2, 5, 2);    // short prompt, then 3 decodes
    auto step = s.next_step();
    ASSERT_EQ(step.size(), 1u);  // request 1 takes the whole budget
    EXPECT_EQ(step[0].n_tokens, 10);
    s.complete(step);
    step = s.next_step();
    ASSERT_EQ(step.size(), 1u);
    EXPECT_EQ(step[0].start, 10);
    s.complete(step);
    step = s.next_step();  // request 1 done with its prompt and all its tokens: gone
    ASSERT_EQ(step.size(), 1u);
    EXPECT_EQ(step[0].id, 2);
    EXPECT_EQ(step[0].n_tokens, 2);
    s.complete(step);
    step = s.next_step();
    ASSERT_EQ(step.size(), 1u);
    EXPECT_TRUE(step[0].is_decode);
    EXPECT_EQ(step[0].n_tokens, 1);
}

TEST(StepBatch, PositionsAndQueryStartLoc) {
    StepBatch b = make_step_batch({{7, 3, 1, true}, {9, 0, 4, false}}, {});
    EXPECT_EQ(b.positions, (std::vector<int64_t>{3, 0, 1, 2, 3}));
    EXPECT_EQ(b.token_request, (std::vector<int32_t>{0, 1, 1, 1, 1}));
    EXPECT_EQ(b.query_start_loc, (std::vector<int64_t>{0, 1, 5}));
    EXPECT_EQ(b.request_of_token(2), 9);
}

// out[t] = mean of inputs of positions (p − W, p] (window cache) + mean of pooled groups of G
// tokens completed so far (compressed cache: entry k = mean of tokens kG … kG+G−1, written when the
// group's last token runs, read through a per-token state cache of G rows).
class ToyModel final : public AttentionModel {
public:
    static constexpr int64_t kHidden = 3, kWindow = 5, kGroup = 4;
    std::string model_type() const override { return "toy"; }
    Backend& backend() const override { return host_backend(); }
    int64_t hidden_size() const override { return kHidden; }
    int64_t max_position_embeddings() const override { return 1000; }
    std::vector<int64_t> layers() const override { return {0, 1}; }
    std::vector<CacheGroupDesc> cache_groups() const override {
        const int64_t row = kHidden * 4;
        return {{"window", {"window", "f32", row, 1, kWindow}, 2, {0, 1}},
                {"state", {"state", "f32", row, 1, kGroup}, 2, {0, 1}},
                {"pooled", {"pooled", "f32", row, kGroup, 0}, 3, {0, 1}}};
    }
    Status forward(int64_t layer, const StepBatch& b, const float* in, float* out, StageTimes*) override {
        CacheGroup* window = b.caches.find("window");
        CacheGroup* state = b.caches.find("state");
        CacheGroup* pooled = b.caches.find("pooled");
        const CacheView wv = window->view(layer), sv = state->view(layer), pv = pooled->view(layer);
        for (int64_t t = 0; t < b.n_tokens(); ++t) {  // write all rows first, as a layer does
            const RequestId r = b.request_of_token(t);
            const int64_t p = b.positions[t];
            std::memcpy(wv.row(window->slot(r, p)), in + t * kHidden, kHidden * 4);
            std::memcpy(sv.row(state->slot(r, p)), in + t * kHidden, kHidden * 4);
            if ((p + 1) % kGroup == 0) {
                float* dst = reinterpret_cast<float*>(pv.row(pooled->slot(r, p / kGroup)));
                for (int64_t i = 0; i < kHidden; ++i) dst[i] = 0;
                for (int64_t q = p + 1 - kGroup; q <= p; ++q) {
                    const int64_t slot = state->slot(r, q);
                    if (slot < 0) return internal_error("state row of position {} was released", q);
                    for (int64_t i = 0; i < kHidden; ++i)
                        dst[i] += reinterpret_cast<const float*>(sv.row(slot))[i] / kGroup;
                }
            }
        }
        for (int64_t t = 0; t < b.n_tokens(); ++t) {
            const RequestId r = b.request_of_token(t);
            const int64_t p = b.positions[t];
            float acc[kHidden] = {};
            int64_t n = 0;
            for (int64_t q = std::max<int64_t>(0, p - kWindow + 1); q <= p; ++q, ++n) {
                const int64_t slot = window->slot(r, q);
                if (slot < 0) return internal_error("window row of position {} was released", q);
                for (int64_t i = 0; i < kHidden; ++i) acc[i] += reinterpret_cast<const float*>(wv.row(slot))[i];
            }
            for (int64_t k = 0; k < (p + 1) / kGroup; ++k)
                for (int64_t i = 0; i < kHidden; ++i)
                    acc[i] += reinterpret_cast<const float*>(pv.row(pooled->slot(r, k)))[i];
            for (int64_t i = 0; i < kHidden; ++i) out[t * kHidden + i] = acc[i] / static_cast<float>(n) + in[t * kHidden + i];
        }
        return Status::ok();
    }
};

class RecordingIo final : public RequestIo {
public:
    RecordingIo(int64_t n_tokens, uint64_t seed) : in_(n_tokens * ToyModel::kHidden), out_(2, std::vector<float>(in_.size())) {
        std::mt19937 rng(static_cast<uint32_t>(seed));
        std::normal_distribution<float> d;
        for (float& x : in_) x = d(rng);
    }
    void input(int64_t layer, int64_t p, float* row) override {
        for (int64_t i = 0; i < ToyModel::kHidden; ++i) row[i] = in_[p * ToyModel::kHidden + i] + static_cast<float>(layer);
    }
    void output(int64_t layer, int64_t p, const float* row) override {
        std::copy(row, row + ToyModel::kHidden, out_[layer].begin() + p * ToyModel::kHidden);
    }
    // A wrong draft: the token's row shifted by reject_shift_.
    void rejected_draft_input(int64_t layer, int64_t p, std::span<float> row) override {
        input(layer, p, row.data());
        for (float& x : row) x += reject_shift_;
    }
    std::vector<float> in_;
    std::vector<std::vector<float>> out_;
    float reject_shift_ = 1.0f;
};

std::map<RequestId, std::vector<std::vector<float>>> run_toy(const std::vector<int64_t>& lengths, EngineOptions o,
                                                            std::vector<int64_t> prompts = {},
                                                            std::vector<uint64_t> seeds = {}, float reject_shift = 1.0f,
                                                            EngineStats* stats = nullptr) {
    ToyModel model;
    auto engine = Engine::create(model, o);
    EXPECT_TRUE(engine.has_value());
    std::vector<std::unique_ptr<RecordingIo>> ios;
    for (size_t r = 0; r < lengths.size(); ++r) {
        ios.push_back(std::make_unique<RecordingIo>(lengths[r], seeds.empty() ? 100 + r : seeds[r]));
        ios.back()->reject_shift_ = reject_shift;
        EXPECT_TRUE((*engine)->add_request(static_cast<RequestId>(r), lengths[r], prompts.empty() ? lengths[r] : prompts[r],
                                           ios.back().get()).is_ok());
    }
    EXPECT_TRUE((*engine)->run().is_ok());
    std::map<RequestId, std::vector<std::vector<float>>> out;
    for (size_t r = 0; r < lengths.size(); ++r) {
        EXPECT_EQ((*engine)->status(static_cast<RequestId>(r)), RequestStatus::finished);
        out[static_cast<RequestId>(r)] = ios[r]->out_;
    }
    for (const auto& g : (*engine)->cache_groups()) EXPECT_EQ(g->allocator().used_blocks(), 0) << g->name();
    if (stats) *stats = (*engine)->stats();
    return out;
}

// The bench runs the model through StepRunner directly; the Engine runs it through the same runner, so a
// one-step request gives the same outputs either way, layer by layer, and the runner's hook sees every
// layer once, in order.
TEST(StepRunner, GivesTheEnginesOutputsAndHooksEveryLayer) {
    constexpr int64_t n = 9;
    EngineOptions o;
    o.scheduler.max_tokens_per_step = 64;
    const auto want = run_toy({n}, o, {}, {77});

    ToyModel model;
    std::vector<std::unique_ptr<CacheGroup>> groups;
    StepCaches caches;
    for (const CacheGroupDesc& d : model.cache_groups()) {
        groups.push_back(std::move(CacheGroup::create(host_backend(), d.name, d.spec, d.block_size, 8, d.n_layers())).value());
        ASSERT_TRUE(groups.back()->reserve(0, groups.back()->entries_for_tokens(n)).is_ok());
        caches.groups.push_back(groups.back().get());
    }
    const StepBatch batch = make_step_batch({{0, 0, n, false}}, caches);
    RecordingIo rows_of(n, 77);
    struct Io final : StepIo {
        RecordingIo& r;
        explicit Io(RecordingIo& x) : r(x) {}
        void input(int64_t layer, std::span<float> rows) override {
            for (int64_t p = 0; p < n; ++p) r.input(layer, p, rows.data() + p * ToyModel::kHidden);
        }
        void output(int64_t layer, std::span<const float> rows) override {
            for (int64_t p = 0; p < n; ++p) r.output(layer, p, rows.data() + p * ToyModel::kHidden);
        }
    } io(rows_of);
    struct Hook final : LayerHook {
        std::vector<std::string> seen;
        void before_layer(int64_t l) override { seen.push_back(fmt::format("before {}", l)); }
        void after_layer(int64_t l) override { seen.push_back(fmt::format("after {}", l)); }
    } hook;
    StepRunner runner(model);
    ASSERT_TRUE(runner.run(batch, io, /*chain=*/false, nullptr, &hook).is_ok());
    EXPECT_EQ(rows_of.out_, want.at(0));
    EXPECT_EQ(hook.seen, (std::vector<std::string>{"before 0", "after 0", "before 1", "after 1"}));
    EXPECT_GE(runner.activation_bytes(), 2 * n * ToyModel::kHidden * 4);
}

TEST(Engine, OutputsDoNotDependOnTheSchedule) {
    const std::vector<int64_t> lengths = {1, 7, 23, 40};
    EngineOptions one_shot;
    one_shot.scheduler.max_tokens_per_step = 64;
    one_shot.scheduler.max_requests_per_step = 1;
    const auto want = run_toy(lengths, one_shot);
    std::mt19937_64 rng(5);
    for (int trial = 0; trial < 20; ++trial) {
        EngineOptions o;
        o.scheduler.max_tokens_per_step = std::uniform_int_distribution<int64_t>(1, 17)(rng);
        o.scheduler.chunk_policy = [&rng](RequestId, int64_t limit) {
            return std::uniform_int_distribution<int64_t>(1, limit)(rng);
        };
        std::vector<int64_t> prompts;
        for (int64_t n : lengths) prompts.push_back(std::uniform_int_distribution<int64_t>(1, n)(rng));
        const auto got = run_toy(lengths, o, prompts);
        for (const auto& [id, layers] : want)
            for (size_t l = 0; l < layers.size(); ++l)
                for (size_t i = 0; i < layers[l].size(); ++i)
                    ASSERT_NEAR(got.at(id)[l][i], layers[l][i], 1e-5) << "trial " << trial << " request " << id;
    }
}

// Speculative decoding: every decode step verifies up to three draft tokens, of which the target accepts a
// random prefix; the rejected ones bring wrong rows and leave no trace. The outputs are those of plain
// decoding, two runs whose rejected rows differ give the same bits, and the stats count what was saved.
TEST(Engine, RejectedDraftTokensLeaveNoTrace) {
    const std::vector<int64_t> lengths = {1, 7, 23, 40}, prompts = {1, 3, 5, 9};
    EngineOptions plain;
    plain.scheduler.max_tokens_per_step = 64;
    const auto want = run_toy(lengths, plain, prompts);
    auto speculate = [&](float reject_shift, EngineStats* stats) {
        EngineOptions o = plain;
        o.scheduler.draft_tokens = 3;
        std::mt19937_64 rng(11);
        o.accepted_drafts = [rng](RequestId, int64_t, int64_t drafts) mutable {
            return std::uniform_int_distribution<int64_t>(0, drafts)(rng);
        };
        return run_toy(lengths, o, prompts, {}, reject_shift, stats);
    };
    EngineStats a_stats, b_stats;
    const auto a = speculate(1.0f, &a_stats), b = speculate(-5.0f, &b_stats);
    EXPECT_EQ(a, b);
    for (const auto& [id, layers] : want)
        for (size_t l = 0; l < layers.size(); ++l)
            for (size_t i = 0; i < layers[l].size(); ++i)
                ASSERT_NEAR(a.at(id)[l][i], layers[l][i], 1e-5) << "request " << id << " layer " << l;
    // Every decoded token is counted once; some drafts were accepted, some rejected.
    int64_t decoded = 0;
    for (size_t r = 0; r < lengths.size(); ++r) decoded += lengths[r] - prompts[r];
    EXPECT_EQ(a_stats.decode_tokens, decoded);
    EXPECT_GT(a_stats.accepted_draft_tokens, 0);
    EXPECT_LT(a_stats.accepted_draft_tokens, a_stats.drafted_tokens);
    EXPECT_EQ(a_stats.steps, b_stats.steps);

    EngineOptions no_acceptance = plain;
    no_acceptance.scheduler.draft_tokens = 2;
    ToyModel model;
    EXPECT_NE(Engine::create(model, no_acceptance).status().message().find("need an acceptance"), std::string::npos);
}

// Prefix caching: six requests of two prompts (their rows equal over the prompt's first 29 tokens) run
// with their prompts' chunk keys and without. Every request computes its last prompt token and its decodes
// either way, with the same bits; the later requests of each prompt start after its cached chunks.
TEST(Engine, CachedPrefixesGiveTheBitsOfComputingThem) {
    constexpr int64_t kShared = 29;
    const std::vector<int64_t> lengths = {40, 37, 45, 50, 38, 44}, prompts = {33, 30, 34, 36, 31, 35};
    auto run = [&](bool keyed, EngineStats* stats) {
        ToyModel model;
        EngineOptions o;
        o.scheduler.max_tokens_per_step = 16;
        auto engine = Engine::create(model, o);
        EXPECT_TRUE(engine.has_value());
        const int64_t chunk = (*engine)->prefix_chunk_tokens();
        std::vector<std::unique_ptr<RecordingIo>> ios;
        for (size_t r = 0; r < lengths.size(); ++r) {
            ios.push_back(std::make_unique<RecordingIo>(lengths[r], 200 + r));
            const RecordingIo family(lengths[r], 1 + r % 2);
            std::copy(family.in_.begin(), family.in_.begin() + kShared * ToyModel::kHidden, ios.back()->in_.begin());
            std::vector<uint64_t> keys;
            for (int64_t i = 0; keyed && (i + 1) * chunk <= prompts[r]; ++i)
                keys.push_back((i + 1) * chunk <= kShared ? 1000 * (1 + r % 2) + i : 100000 * (r + 1) + i);
            EXPECT_TRUE((*engine)->add_request(static_cast<RequestId>(r), lengths[r], prompts[r], ios.back().get(), keys).is_ok());
        }
        EXPECT_TRUE((*engine)->run().is_ok());
        *stats = (*engine)->stats();
        std::vector<std::vector<std::vector<float>>> out;  // [request][layer] rows from the last prompt token on
        for (size_t r = 0; r < lengths.size(); ++r) {
            EXPECT_EQ((*engine)->status(static_cast<RequestId>(r)), RequestStatus::finished);
            out.emplace_back();
            for (const auto& layer : ios[r]->out_)
                out.back().emplace_back(layer.begin() + (prompts[r] - 1) * ToyModel::kHidden, layer.end());
        }
        return out;
    };
    EngineStats plain, cached;
    const auto want = run(false, &plain), got = run(true, &cached);
    EXPECT_EQ(got, want);
    EXPECT_EQ(plain.prefix_hit_tokens, 0);
    EXPECT_GT(cached.prefix_hit_requests, 0);
    EXPECT_EQ(cached.prefix_hit_tokens % 12, 0) << "whole chunks of 12 tokens (lcm of the toy's block spans)";
    EXPECT_EQ(cached.keyed_prompt_tokens, std::accumulate(prompts.begin(), prompts.end(), int64_t{0}));
    EXPECT_EQ(cached.prefill_tokens + cached.prefix_hit_tokens, plain.prefill_tokens);
}

TEST(Engine, PoolExhaustionRejectsOnlyTheRequestThatNeedsMore) {
    EngineOptions small;
    small.scheduler.max_tokens_per_step = 8;
    small.blocks_per_group = 12;  // pooled group: 3 entries per block → 36 entries = 144 tokens in all
    ToyModel model;
    auto engine = Engine::create(model, small);
    ASSERT_TRUE(engine.has_value());
    RecordingIo short_io(30, 1), long_io(500, 2), other_io(20, 3);
    ASSERT_TRUE((*engine)->add_request(1, 30, 30, &short_io).is_ok());
    ASSERT_TRUE((*engine)->add_request(2, 500, 500, &long_io).is_ok());
    ASSERT_TRUE((*engine)->add_request(3, 20, 20, &other_io).is_ok());
    ASSERT_TRUE((*engine)->run().is_ok());
    EXPECT_EQ((*engine)->status(1), RequestStatus::finished);
    EXPECT_EQ((*engine)->status(3), RequestStatus::finished);
    EXPECT_EQ((*engine)->status(2), RequestStatus::failed);
    EXPECT_EQ((*engine)->error(2).code(), StatusCode::out_of_memory);
    EXPECT_NE((*engine)->error(2).message().find("request 2"), std::string::npos);
    // The survivors match a run without the long request.
    EngineOptions roomy;
    const auto want = run_toy({30, 20}, roomy, {}, {1, 3});
    for (size_t i = 0; i < short_io.out_[1].size(); ++i) ASSERT_NEAR(short_io.out_[1][i], want.at(0)[1][i], 1e-6);
    for (size_t i = 0; i < other_io.out_[1].size(); ++i) ASSERT_NEAR(other_io.out_[1][i], want.at(1)[1][i], 1e-6);
}

TEST(Engine, RejectsRequestsLongerThanTheModelAllows) {
    ToyModel model;
    auto engine = Engine::create(model, {});
    ASSERT_TRUE(engine.has_value());
    RecordingIo io(4, 1);
    Status s = (*engine)->add_request(1, 1001, 1001, &io);
    EXPECT_EQ(s.code(), StatusCode::invalid_argument);
    EXPECT_NE(s.message().find("max_position_embeddings = 1000"), std::string::npos) << s.message();
    EXPECT_EQ((*engine)->status(1), RequestStatus::failed);
    // The message names the prompt and the decode that make the request too long.
    s = (*engine)->add_request(3, 1200, 900, &io);
    EXPECT_NE(s.message().find("1200 tokens (900 prompt + 300 decode), more than max_position_embeddings = 1000"),
              std::string::npos)
        << s.message();
    EXPECT_TRUE((*engine)->add_request(2, 4, 4, &io).is_ok());
    EXPECT_TRUE((*engine)->run().is_ok());
    EXPECT_EQ((*engine)->status(2), RequestStatus::finished);
}

// A prompt outside [0, n_tokens] is the caller's error, not an assertion of the scheduler.
TEST(Engine, RejectsPromptsOutsideTheRequest) {
    ToyModel model;
    auto engine = Engine::create(model, {});
    ASSERT_TRUE(engine.has_value());
    RecordingIo io(5, 1);
    RequestId id = 10;
    for (int64_t prompt : {int64_t{-1}, int64_t{6}, INT64_MIN}) {
        ++id;
        Status s = (*engine)->add_request(id, 5, prompt, &io);
        EXPECT_EQ(s.code(), StatusCode::invalid_argument) << prompt;
        EXPECT_NE(s.message().find(fmt::format("a prompt of {} tokens, expected 0 to its 5 tokens", prompt)),
                  std::string::npos)
            << s.message();
        EXPECT_EQ((*engine)->status(id), RequestStatus::failed);
    }
    EXPECT_TRUE((*engine)->add_request(1, 5, 0, &io).is_ok());  // 0: the scheduler prefills one token
    EXPECT_TRUE((*engine)->run().is_ok());
    EXPECT_EQ((*engine)->status(1), RequestStatus::finished);
}

// Pools are sized, and checked, before any is allocated: options past what a pool can number, past
// int64 or past max_cache_bytes are errors naming the numbers (they overflowed or asserted before).
TEST(Engine, CreateChecksThePoolsBeforeAllocatingThem) {
    ToyModel model;
    auto create = [&](auto change) {
        EngineOptions o;
        change(o);
        auto engine = Engine::create(model, o);
        return engine.has_value() ? Status::ok() : engine.status();
    };
    Status s = create([](EngineOptions& o) { o.cache_budget_tokens = INT64_MAX; });
    EXPECT_EQ(s.code(), StatusCode::out_of_memory);
    EXPECT_NE(s.message().find("more than the 2147483647 a pool can number"), std::string::npos) << s.message();
    s = create([](EngineOptions& o) { o.blocks_per_group = int64_t{1} << 31; });
    EXPECT_EQ(s.code(), StatusCode::out_of_memory) << s.to_string();
    s = create([](EngineOptions& o) { o.scheduler.max_requests_per_step = INT64_MAX; });
    EXPECT_EQ(s.code(), StatusCode::out_of_memory) << s.to_string();
    s = create([](EngineOptions& o) { o.max_cache_bytes = 1000; });
    EXPECT_EQ(s.code(), StatusCode::out_of_memory);
    EXPECT_NE(s.message().find("more than max_cache_bytes"), std::string::npos) << s.message();
    for (auto bad : std::vector<std::function<void(EngineOptions&)>>{
             [](EngineOptions& o) { o.cache_budget_tokens = -1; },
             [](EngineOptions& o) { o.blocks_per_group = -1; },
             [](EngineOptions& o) { o.max_cache_bytes = -1; },
             [](EngineOptions& o) { o.scheduler.max_requests_per_step = 0; },
             [](EngineOptions& o) { o.scheduler.max_prefill_chunk = -1; },
             [](EngineOptions& o) { o.scheduler.max_tokens_per_step = 0; }})
        EXPECT_EQ(create(bad).code(), StatusCode::invalid_argument);
    // The default options, and a limit the pools fit in, still work.
    EXPECT_TRUE(create([](EngineOptions&) {}).is_ok());
    EXPECT_TRUE(create([](EngineOptions& o) { o.max_cache_bytes = int64_t{1} << 30; }).is_ok());
}

}  // namespace
}  // namespace sieve
