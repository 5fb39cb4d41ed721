// LayerStepper: the caller steps the layers one at a time (an inference engine running its own
// network around sieve's attention). Every fixture's requests stepped through it give, bit for bit,
// the outputs the Engine gives for the same steps; stepped all together (their chunks and decodes in
// shared steps), the outputs the reference captured; and a misuse is an error naming it.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "model_test_util.h"
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
            const auto expected = l.golden.output(static_cast<int64_t>(r), static_cast<int64_t>(layer));
            double diff = 0, norm = 0;
            for (size_t i = 0; i < expected.size(); ++i) {
                diff += (stepped[r][layer][i] - expected[i]) * double(stepped[r][layer][i] - expected[i]);
                norm += double(expected[i]) * expected[i];
            }
            ASSERT_GT(norm, 0.0);
            EXPECT_LE(std::sqrt(diff / norm), 1e-4) << "request " << r << " layer " << layer;  // golden_format.md exact
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
}

}  // namespace
}  // namespace sieve
