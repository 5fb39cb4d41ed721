// LayerStepper: the caller steps the layers one at a time (an inference engine running its own
// network around sieve's attention). Every fixture's requests stepped through it give, bit for bit,
// the outputs the Engine gives for the same steps; stepped all together (their chunks and decodes in
// shared steps), the outputs the reference captured; and a misuse is an error naming it.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "model_test_util.h"
#include "models/deepseek_v4/model.h"
#include "sieve/models/model_factory.h"
#include "sieve/runtime/layer_stepper.h"

namespace sieve {
namespace {

using model_test::Golden;

struct Loaded {
    Golden golden;
    std::unique_ptr<Backend> backend;
    std::unique_ptr<AttentionModel> model;
};

Loaded load(const std::string& fixture) {
    Loaded l;
    l.golden = model_test::load_golden(fixture);
    l.backend = model_test::test_backend("cpu");
    ModelOptions options;
    options.backend = l.backend.get();
    auto model = load_attention_model(l.golden.config, *l.golden.checkpoint, options);
    EXPECT_TRUE(model.has_value()) << model.status().to_string();
    if (model.has_value()) l.model = std::move(model).value();
    return l;
}

// An engine's own cache memory and blocks, as vLLM keeps them: per group and layer one host allocation
// whose block stride leaves a gap after each block (the engine's other pages), and a block list per
// request that grows as the request does, taking the blocks in a scrambled order (k·37 mod 64, never
// reused here), so that no table equals the one sieve's own allocator would build.
struct EngineCaches {
    static constexpr int32_t kBlocks = 64;
    std::vector<std::vector<uint8_t>> memory;
    std::map<std::pair<std::string, RequestId>, std::vector<int32_t>> blocks;
    std::map<std::string, int32_t> next_block;

    std::unique_ptr<CachePools> adopt(AttentionModel& model, int64_t num_blocks) {
        std::vector<AdoptedCacheGroup> groups;
        for (const CacheGroupDesc& d : model.cache_groups()) {
            AdoptedCacheGroup g;
            g.name = d.name;
            g.num_blocks = num_blocks;
            g.block_bytes = (d.block_size * d.spec.entry_bytes + 63) / 64 * 64 + 128;
            for (int64_t l = 0; l < d.n_layers(); ++l) {
                auto& m = memory.emplace_back(static_cast<size_t>(g.block_bytes * num_blocks + 64));
                auto* base = reinterpret_cast<uint8_t*>((reinterpret_cast<uintptr_t>(m.data()) + 63) / 64 * 64);
                auto buffer = model.backend().buffer_wrap(base, static_cast<size_t>(g.block_bytes * num_blocks),
                                                          BufferUsage::cache, d.name);
                EXPECT_TRUE(buffer.has_value()) << buffer.status().to_string();
                g.layers.push_back(std::move(buffer).value());
            }
            groups.push_back(std::move(g));
        }
        auto pools = CachePools::adopt(model, std::move(groups));
        EXPECT_TRUE(pools.has_value()) << pools.status().to_string();
        return std::move(pools).value();
    }
    // Every gap between two blocks still zero (sieve wrote only inside the engine's blocks, at its block
    // stride), and something written inside them.
    void expect_only_blocks_written(AttentionModel& model) const {
        size_t m = 0, written = 0;
        for (const CacheGroupDesc& d : model.cache_groups()) {
            const int64_t used = (d.block_size * d.spec.entry_bytes + 63) / 64 * 64, stride = used + 128;
            for (int64_t l = 0; l < d.n_layers(); ++l, ++m) {
                const uint8_t* base = reinterpret_cast<const uint8_t*>(
                    (reinterpret_cast<uintptr_t>(memory[m].data()) + 63) / 64 * 64);
                for (int64_t b = 0; b < kBlocks; ++b) {
                    for (int64_t i = used; i < stride; ++i) ASSERT_EQ(base[b * stride + i], 0) << d.name << " block " << b;
                    for (int64_t i = 0; i < used; ++i) written += base[b * stride + i] != 0;
                }
            }
        }
        EXPECT_GT(written, 0u);
    }
    // The request's table in every group for a step that ends at `end` tokens.
    void set_tables(LayerStepper& stepper, const StepRequest& r) {
        for (const auto& group : stepper.caches().groups()) {
            const int64_t entries = group->entries_for_tokens(r.end());
            auto& list = blocks[{group->name(), r.id}];
            while (static_cast<int64_t>(list.size()) * group->block_size() < entries)
                list.push_back(next_block[group->name()]++ * 37 % kBlocks);
            EXPECT_TRUE(stepper.set_block_table(group->name(), r.id, list).is_ok());
        }
    }
};

// Steps the requests: each step takes up to `chunk` tokens of every request that has tokens left
// (all requests together when `together`, else one request after the other), teacher-forced with the
// fixture's captured inputs; over sieve's own pools, or over `engine`'s memory and blocks when given.
// Returns [request][layer_pos] the outputs, [n_tokens · hidden].
std::vector<std::vector<std::vector<float>>> step_fixture(AttentionModel& model, const Golden& g, int64_t chunk,
                                                          bool together, EngineCaches* engine = nullptr) {
    std::unique_ptr<LayerStepper> owned;
    if (engine) {
        owned = LayerStepper::create(model, engine->adopt(model, EngineCaches::kBlocks));
    } else {
        auto made = LayerStepper::create(model, CachePoolOptions{});
        EXPECT_TRUE(made.has_value()) << made.status().to_string();
        owned = std::move(made).value();
    }
    LayerStepper* stepper = owned.get();
    const int64_t hidden = model.hidden_size();
    const size_t n_layers = model.layers().size();
    const std::vector<int64_t> n_tokens = g.n_tokens();
    std::vector<std::vector<std::vector<float>>> out(n_tokens.size());
    for (size_t r = 0; r < n_tokens.size(); ++r)
        out[r].assign(n_layers, std::vector<float>(static_cast<size_t>(n_tokens[r] * hidden), NAN));
    std::vector<int64_t> done(n_tokens.size(), 0);
    for (;;) {
        std::vector<StepRequest> step;
        for (size_t r = 0; r < n_tokens.size(); ++r) {
            if (done[r] == n_tokens[r] || (!together && !step.empty())) continue;
            step.push_back({static_cast<RequestId>(r + 1), done[r], std::min(chunk, n_tokens[r] - done[r]), false});
        }
        if (step.empty()) break;
        if (engine)
            for (const StepRequest& q : step) engine->set_tables(*stepper, q);
        // The step's rows are its requests' tokens, in the order of `step`.
        EXPECT_TRUE(stepper->begin_step(step).is_ok());
        const StepBatch& batch = stepper->batch();
        std::vector<float> in(static_cast<size_t>(batch.n_tokens() * hidden)), o(in.size());
        for (size_t l = 0; l < n_layers; ++l) {
            for (int64_t t = 0; t < batch.n_tokens(); ++t) {
                const size_t r = static_cast<size_t>(batch.request_of_token(t) - 1);
                const int64_t p = batch.positions[static_cast<size_t>(t)];
                const auto row = g.input(static_cast<int64_t>(r), static_cast<int64_t>(l)).subspan(p * hidden, hidden);
                std::copy(row.begin(), row.end(), in.begin() + t * hidden);
            }
            const Status s = stepper->forward(static_cast<int64_t>(l), in.data(), o.data());
            EXPECT_TRUE(s.is_ok()) << s.to_string();
            for (int64_t t = 0; t < batch.n_tokens(); ++t) {
                const size_t r = static_cast<size_t>(batch.request_of_token(t) - 1);
                const int64_t p = batch.positions[static_cast<size_t>(t)];
                std::copy(o.begin() + t * hidden, o.begin() + (t + 1) * hidden, out[r][l].begin() + p * hidden);
            }
        }
        for (const StepRequest& q : step) done[static_cast<size_t>(q.id - 1)] += q.n_tokens;
        EXPECT_TRUE(stepper->end_step().is_ok());
    }
    for (size_t r = 0; r < n_tokens.size(); ++r) stepper->free_request(static_cast<RequestId>(r + 1));
    for (const auto& group : stepper->caches().groups()) EXPECT_EQ(group->allocator().used_blocks(), 0) << group->name();
    return out;
}

// A layer's outputs against the reference's: relative L2 error at most golden_format.md's exact bound.
template <class Expected>
void expect_matches_reference(const std::vector<float>& got, const Expected& expected) {
    ASSERT_EQ(got.size(), expected.size());
    double diff = 0, norm = 0;
    for (size_t i = 0; i < expected.size(); ++i) {
        diff += (got[i] - expected[i]) * double(got[i] - expected[i]);
        norm += double(expected[i]) * expected[i];
    }
    ASSERT_GT(norm, 0.0);
    EXPECT_LE(std::sqrt(diff / norm), 1e-4);
}

class LayerStepperFixture : public ::testing::TestWithParam<std::string> {};

TEST_P(LayerStepperFixture, SameStepsAsTheEngineGiveTheSameBits) {
    Loaded l = load(GetParam());
    ASSERT_TRUE(l.model);
    auto engine_run = model_test::run_fixture(*l.model, l.golden, model_test::schedule("chunk:5", l.golden));
    ASSERT_TRUE(engine_run.has_value()) << engine_run.status().to_string();
    const auto stepped = step_fixture(*l.model, l.golden, 5, /*together=*/false);
    for (size_t r = 0; r < stepped.size(); ++r)
        for (size_t layer = 0; layer < stepped[r].size(); ++layer)
            EXPECT_EQ(stepped[r][layer], engine_run->requests[r].outputs[layer]) << "request " << r << " layer " << layer;
}

TEST_P(LayerStepperFixture, AnEnginesCacheMemoryAndBlocksGiveTheSameBits) {
    Loaded l = load(GetParam());
    ASSERT_TRUE(l.model);
    EngineCaches engine;
    const auto adopted = step_fixture(*l.model, l.golden, 3, /*together=*/true, &engine);
    engine.expect_only_blocks_written(*l.model);
    const auto owned = step_fixture(*l.model, l.golden, 3, /*together=*/true);
    EXPECT_EQ(adopted, owned);
}

TEST_P(LayerStepperFixture, SharedStepsMatchTheReference) {
    Loaded l = load(GetParam());
    ASSERT_TRUE(l.model);
    const auto stepped = step_fixture(*l.model, l.golden, 3, /*together=*/true);
    for (size_t r = 0; r < stepped.size(); ++r)
        for (size_t layer = 0; layer < stepped[r].size(); ++layer) {
            SCOPED_TRACE(fmt::format("request {} layer {}", r, layer));
            expect_matches_reference(stepped[r][layer], l.golden.output(static_cast<int64_t>(r), static_cast<int64_t>(layer)));
        }
}

// Speculative decoding over sieve's own pools: the fixture's longest request takes a prefill chunk, then steps
// that verify its next token and up to three draft tokens (never past its last position), of which a
// random number are accepted (the fixture's own next inputs) and the rest rejected (random rows seeded by
// `rejected_seed`); rollback keeps the accepted ones. Returns the kept outputs [layer][n_tokens · hidden],
// the bytes of every cache entry the request holds at its end (exact profile: plain rows), and how many
// draft tokens were rejected.
struct Speculated {
    std::vector<std::vector<float>> out;
    std::vector<uint8_t> cache;
    int64_t rejected = 0;
};
int64_t longest_request(const Golden& g) {
    const std::vector<int64_t> n = g.n_tokens();
    return std::max_element(n.begin(), n.end()) - n.begin();
}
Speculated speculate(AttentionModel& model, const Golden& g, uint64_t rejected_seed) {
    auto made = LayerStepper::create(model, CachePoolOptions{});
    EXPECT_TRUE(made.has_value()) << made.status().to_string();
    LayerStepper& stepper = **made;
    const int64_t req = longest_request(g), hidden = model.hidden_size(), n = g.n_tokens()[static_cast<size_t>(req)];
    const size_t n_layers = model.layers().size();
    Speculated sp;
    sp.out.assign(n_layers, std::vector<float>(static_cast<size_t>(n * hidden), NAN));
    std::mt19937_64 pattern(7), rejected(rejected_seed);
    std::normal_distribution<float> normal(0.0f, 1.0f);
    const int64_t prefill = std::min<int64_t>(4, n);
    for (int64_t done = 0; done < n;) {
        int64_t drafts = 0, accepted = 0;
        if (done > 0) {
            drafts = std::uniform_int_distribution<int64_t>(0, std::min<int64_t>(3, n - 1 - done))(pattern);
            accepted = std::uniform_int_distribution<int64_t>(0, drafts)(pattern);
        }
        const int64_t count = done == 0 ? prefill : 1 + drafts, kept = done == 0 ? prefill : 1 + accepted;
        const Status began = stepper.begin_step({{1, done, count, false}});
        if (!began.is_ok()) {
            ADD_FAILURE() << "position " << done << ": " << began.to_string();
            break;
        }
        std::vector<float> in(static_cast<size_t>(count * hidden)), o(in.size());
        for (size_t l = 0; l < n_layers; ++l) {
            const auto inputs = g.input(req, static_cast<int64_t>(l));
            for (int64_t i = 0; i < count; ++i)
                for (int64_t k = 0; k < hidden; ++k)
                    in[static_cast<size_t>(i * hidden + k)] =
                        i < kept ? inputs[static_cast<size_t>((done + i) * hidden + k)] : normal(rejected);
            const Status s = stepper.forward(static_cast<int64_t>(l), in.data(), o.data());
            EXPECT_TRUE(s.is_ok()) << s.to_string();
            std::copy(o.begin(), o.begin() + kept * hidden, sp.out[l].begin() + done * hidden);
        }
        EXPECT_TRUE(stepper.end_step().is_ok());
        if (kept < count) {
            const Status s = stepper.rollback(1, done + kept);
            EXPECT_TRUE(s.is_ok()) << s.to_string();
        }
        sp.rejected += count - kept;
        done += kept;
    }
    for (const auto& group : stepper.caches().groups())
        for (int64_t layer = 0; layer < group->n_layers(); ++layer) {
            const CacheView view = group->view(layer);
            for (int64_t e = 0; e < group->entries_for_tokens(n); ++e) {
                const int64_t slot = group->slot(1, e);
                if (slot < 0) continue;  // released: no later token sees it
                const uint8_t* row = view.row(slot);
                sp.cache.insert(sp.cache.end(), row, row + view.entry_bytes);
            }
        }
    stepper.free_request(1);
    return sp;
}

// Rejected draft tokens leave no trace: two runs of the same steps and acceptances whose rejected rows
// differ give the same bits in every kept output and every cache entry the request holds, and the kept
// outputs match the reference. DeepSeek-V4's window and compressor-state blocks hold one row each here, so
// that a row released too early (by the rejected tokens' end) would be missing from the next step.
TEST_P(LayerStepperFixture, RejectedDraftTokensLeaveNoTrace) {
    Loaded l = load(GetParam());
    ASSERT_TRUE(l.model);
    if (GetParam() == "deepseek_v4") {
        DeepseekV4Options o;
        o.backend = l.backend.get();
        o.swa_block_size = 1;
        o.state_block_size = 1;
        auto model = load_deepseek_v4_model(*l.golden.config.deepseek_v4(), *l.golden.checkpoint, o);
        ASSERT_TRUE(model.has_value()) << model.status().to_string();
        l.model = std::move(model).value();
    }
    const Speculated a = speculate(*l.model, l.golden, 1), b = speculate(*l.model, l.golden, 2);
    EXPECT_GT(a.rejected, 0) << "the pattern rejects some drafts";
    EXPECT_FALSE(a.cache.empty());
    EXPECT_EQ(a.cache, b.cache);
    for (size_t layer = 0; layer < a.out.size(); ++layer) {
        EXPECT_EQ(a.out[layer], b.out[layer]) << "layer " << layer;
        SCOPED_TRACE(fmt::format("layer {}", layer));
        expect_matches_reference(a.out[layer], l.golden.output(longest_request(l.golden), static_cast<int64_t>(layer)));
    }
}

INSTANTIATE_TEST_SUITE_P(Fixtures, LayerStepperFixture,
                         ::testing::Values("deepseek_v4", "deepseek_v32", "hy_v4", "qwen4_exp"));

TEST(LayerStepper, MisuseIsAnErrorNamingIt) {
    Loaded l = load("deepseek_v4");
    ASSERT_TRUE(l.model);
    auto stepper = LayerStepper::create(*l.model, CachePoolOptions{});
    ASSERT_TRUE(stepper.has_value());
    LayerStepper& s = **stepper;
    std::vector<float> rows(static_cast<size_t>(4 * l.model->hidden_size()));
    EXPECT_NE(s.forward(0, rows.data(), rows.data()).message().find("no step is open"), std::string::npos);
    EXPECT_NE(s.begin_step({{1, 3, 2, false}}).message().find("starts at position 3, but it has run 0"), std::string::npos);
    EXPECT_NE(s.begin_step({{1, 0, 2, false}, {1, 0, 2, false}}).message().find("appears twice"), std::string::npos);
    ASSERT_TRUE(s.begin_step({{1, 0, 4, false}}).is_ok());
    EXPECT_NE(s.begin_step({{2, 0, 1, false}}).message().find("still open"), std::string::npos);
    EXPECT_NE(s.forward(1, rows.data(), rows.data()).message().find("layer position 1, expected 0"), std::string::npos);
    EXPECT_FALSE(s.in_step());  // a failed forward closes the step
    ASSERT_TRUE(s.begin_step({{1, 0, 4, false}}).is_ok());
    for (int64_t layer = 0; layer < static_cast<int64_t>(l.model->layers().size()); ++layer)
        ASSERT_TRUE(s.forward(layer, rows.data(), rows.data()).is_ok());
    ASSERT_TRUE(s.end_step().is_ok());
    EXPECT_EQ(s.tokens_done(1), 4);
    const int64_t too_far = l.model->max_position_embeddings();
    EXPECT_NE(s.begin_step({{1, 4, too_far, false}}).message().find("more than max_position_embeddings"),
              std::string::npos);
    // Rollback: within the last step, between steps, of a request that ran one, over sieve's own pools.
    EXPECT_NE(s.rollback(2, 0).message().find("request 2 has run no step"), std::string::npos);
    EXPECT_NE(s.rollback(1, 5).message().find("can keep 0 … 4 of its tokens"), std::string::npos);
    ASSERT_TRUE(s.begin_step({{1, 4, 3, false}}).is_ok());
    EXPECT_NE(s.rollback(1, 5).message().find("a step is open"), std::string::npos);
    for (int64_t layer = 0; layer < static_cast<int64_t>(l.model->layers().size()); ++layer)
        ASSERT_TRUE(s.forward(layer, rows.data(), rows.data()).is_ok());
    ASSERT_TRUE(s.end_step().is_ok());
    EXPECT_NE(s.rollback(1, 3).message().find("can keep 4 … 7 of its tokens (its last step started at 4), not 3"),
              std::string::npos);
    ASSERT_TRUE(s.rollback(1, 5).is_ok());
    EXPECT_EQ(s.tokens_done(1), 5);
    EXPECT_NE(s.begin_step({{1, 7, 1, false}}).message().find("starts at position 7, but it has run 5"), std::string::npos);
    EXPECT_TRUE(s.begin_step({{1, 5, 1, false}}).is_ok());
    EngineCaches engine;
    auto adopted = LayerStepper::create(*l.model, engine.adopt(*l.model, EngineCaches::kBlocks));
    EXPECT_NE(adopted->rollback(1, 0).message().find("over adopted pools"), std::string::npos);
}

}  // namespace
}  // namespace sieve
