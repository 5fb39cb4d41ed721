// Prefix caching through the LayerStepper, for every family and both profiles: a request that starts after a cached prefix
// gives, bit for bit, the outputs and cache bytes it gives when it computes the prefix itself, also when
// requests of several prompts arrive in random orders into pools small enough to evict cached chunks.
// The inputs are random rows (the fixtures' prompts are shorter than a chunk); requests of one prompt
// family share their rows over the family's prompt, as a shared prompt gives every layer the same inputs.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <map>
#include <numeric>
#include <random>
#include <string>
#include <tuple>
#include <vector>

#include "model_test_util.h"
#include "models/deepseek_v4/model.h"
#include "sieve/models/model_factory.h"
#include "sieve/runtime/layer_stepper.h"

namespace sieve {
namespace {

struct Loaded {
    model_test::Golden golden;
    std::unique_ptr<Backend> backend;
    std::unique_ptr<AttentionModel> model;
};

// The fixture's model with small cache blocks, so that a chunk (runtime/prefix_cache.h) spans a few
// tokens: DeepSeek-V4 windows of 4 rows a block, compressed blocks of 16 tokens, one state row a block;
// DSA blocks of 8 tokens; QSA keeps its own (64 tokens).
Loaded load(const std::string& fixture, NumericsProfile profile = NumericsProfile::exact) {
    Loaded l;
    l.golden = model_test::load_golden(fixture);
    l.backend = model_test::test_backend("cpu");
    Expected<std::unique_ptr<AttentionModel>> model = unsupported_error("no model");
    if (fixture == "deepseek_v4") {
        DeepseekV4Options o;
        o.profile = profile;
        o.backend = l.backend.get();
        o.swa_block_size = 4;
        o.block_tokens = 16;
        o.state_block_size = 1;
        model = load_deepseek_v4_model(*l.golden.config.deepseek_v4(), *l.golden.checkpoint, o);
    } else {
        ModelOptions o;
        o.profile = profile;
        o.backend = l.backend.get();
        if (fixture != "qwen4_exp") o.cache_block_size = 8;
        model = load_attention_model(l.golden.config, *l.golden.checkpoint, o);
    }
    EXPECT_TRUE(model.has_value()) << model.status().to_string();
    if (model.has_value()) l.model = std::move(model).value();
    return l;
}

// A request: `n` tokens of which the last three are decode steps; its first `shared` tokens are its
// prompt family's.
struct Request {
    RequestId id = 0;
    int64_t family = 0, shared = 0, n = 0;
};

uint64_t mix(uint64_t x) {  // splitmix64's finalizer
    x += 0x9e3779b97f4a7c15ull;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
    return x ^ (x >> 31);
}

// The row of `r` at layer `layer`, position `pos`: its family's over the shared prompt, its own after.
std::vector<float> input_row(const Request& r, int64_t layer, int64_t pos, int64_t hidden) {
    const uint64_t owner = pos < r.shared ? 1000 + static_cast<uint64_t>(r.family) : static_cast<uint64_t>(r.id);
    std::mt19937_64 rng(mix(mix(owner) ^ mix(static_cast<uint64_t>(layer) << 32 | static_cast<uint64_t>(pos))));
    std::normal_distribution<float> normal(0.0f, 1.0f);
    std::vector<float> row(static_cast<size_t>(hidden));
    for (float& v : row) v = normal(rng);
    return row;
}

// The chained keys of the request's chunks: chunk i names its family's prompt while it lies inside it.
std::vector<uint64_t> chunk_keys(const Request& r, int64_t chunk) {
    std::vector<uint64_t> keys;
    uint64_t key = 0;
    for (int64_t i = 0; (i + 1) * chunk <= r.n - 3; ++i) {
        const bool shared = (i + 1) * chunk <= r.shared;
        key = mix(key ^ mix(shared ? 1000 + static_cast<uint64_t>(r.family) : static_cast<uint64_t>(r.id)) ^ static_cast<uint64_t>(i));
        keys.push_back(key);
    }
    return keys;
}

struct RequestRun {
    int64_t start = 0;                    // the tokens the prefix cache gave
    std::vector<std::vector<float>> out;  // [layer] the outputs of positions [start, n)
    std::vector<uint8_t> cache;           // every resident whole block of every group at the request's end
};

// Runs `r` to its end: attached to the prefix cache (`cached`) or not, its prompt in steps that end at
// multiples of the chunk, then three decode steps; frees it.
RequestRun run_request(LayerStepper& stepper, const Request& r, bool cached) {
    AttentionModel& model = stepper.model();
    const int64_t hidden = model.hidden_size(), chunk = stepper.caches().prefix_cache()->chunk_tokens();
    const size_t n_layers = model.layers().size();
    RequestRun run;
    if (cached) {
        auto start = stepper.attach_prefix(r.id, chunk_keys(r, chunk), r.n - 3);
        EXPECT_TRUE(start.has_value()) << start.status().to_string();
        run.start = start.has_value() ? *start : 0;
    }
    run.out.assign(n_layers, {});
    for (int64_t pos = run.start; pos < r.n;) {
        const int64_t count = pos >= r.n - 3 ? 1 : std::min(chunk - pos % chunk, r.n - 3 - pos);
        const Status began = stepper.begin_step({{r.id, pos, count, false}});
        if (!began.is_ok()) {
            ADD_FAILURE() << "request " << r.id << " at " << pos << ": " << began.to_string();
            return run;
        }
        std::vector<float> in(static_cast<size_t>(count * hidden)), o(in.size());
        for (size_t l = 0; l < n_layers; ++l) {
            for (int64_t t = 0; t < count; ++t) {
                const std::vector<float> row = input_row(r, static_cast<int64_t>(l), pos + t, hidden);
                std::copy(row.begin(), row.end(), in.begin() + t * hidden);
            }
            const Status s = stepper.forward(static_cast<int64_t>(l), in.data(), o.data());
            EXPECT_TRUE(s.is_ok()) << s.to_string();
            run.out[l].insert(run.out[l].end(), o.begin(), o.end());
        }
        EXPECT_TRUE(stepper.end_step().is_ok());
        pos += count;
    }
    // Whole blocks: a format may lay a block out by field rather than by entry (DSA's deployed indexer keys:
    // the block's FP8 values, then its scales), so the block, not the entry, is the unit written. A block
    // past the request's last entry is only partly its own, and a released one no token reads.
    for (const auto& group : stepper.caches().groups())
        for (int64_t layer = 0; layer < group->n_layers(); ++layer) {
            const CacheView view = group->view(layer);
            const int64_t B = group->block_size();
            for (int64_t b = 0; (b + 1) * B <= group->entries_for_tokens(r.n); ++b) {
                const int64_t slot = group->slot(r.id, b * B);
                if (slot < 0) continue;
                const uint8_t* block = view.row(slot);
                run.cache.insert(run.cache.end(), block, block + B * view.entry_bytes);
            }
        }
    stepper.free_request(r.id);
    return run;
}

// The run's outputs from position `from` on ([layer] rows of positions [from, n)).
std::vector<std::vector<float>> outputs_from(const RequestRun& run, int64_t from, int64_t hidden) {
    std::vector<std::vector<float>> out;
    for (const auto& layer : run.out)
        out.emplace_back(layer.begin() + (from - run.start) * hidden, layer.end());
    return out;
}

std::unique_ptr<LayerStepper> make_stepper(AttentionModel& model, int64_t blocks_per_group = 0) {
    CachePoolOptions options;
    options.blocks_per_group = blocks_per_group;
    auto made = LayerStepper::create(model, options);
    EXPECT_TRUE(made.has_value()) << made.status().to_string();
    return made.has_value() ? std::move(made).value() : nullptr;
}

class PrefixCacheFixture : public ::testing::TestWithParam<std::tuple<std::string, NumericsProfile>> {
protected:
    Loaded load_param() { return load(std::get<0>(GetParam()), std::get<1>(GetParam())); }
};

// Request 2 shares the first two and a half chunks of request 1's prompt: it starts after two chunks,
// and what it computes from there (outputs and every cache byte it holds) is what it computes alone.
TEST_P(PrefixCacheFixture, AHitGivesTheBitsOfComputingThePrefix) {
    Loaded l = load_param();
    ASSERT_TRUE(l.model);
    auto stepper = make_stepper(*l.model);
    ASSERT_TRUE(stepper);
    const int64_t chunk = stepper->caches().prefix_cache()->chunk_tokens(), hidden = l.model->hidden_size();
    const int64_t shared = 2 * chunk + chunk / 2;
    const Request first{1, 0, shared, shared + 5}, second{2, 0, shared, shared + 7};
    const RequestRun alone = run_request(*make_stepper(*l.model), second, /*cached=*/false);
    run_request(*stepper, first, /*cached=*/true);
    const RequestRun hit = run_request(*stepper, second, /*cached=*/true);
    EXPECT_EQ(hit.start, 2 * chunk);
    EXPECT_EQ(stepper->caches().prefix_cache()->stats().hit_tokens, 2 * chunk);
    EXPECT_EQ(hit.out, outputs_from(alone, hit.start, hidden));
    EXPECT_FALSE(hit.cache.empty());
    EXPECT_EQ(hit.cache, alone.cache);
}

// Eight requests of three prompt families arrive in a random order into pools that hold the longest
// request and half again, so that cached chunks are evicted to make room; every request's outputs equal
// those of running it alone, some requests hit and some chunks are evicted.
TEST_P(PrefixCacheFixture, RandomArrivalsAndEvictionsKeepTheBits) {
    Loaded l = load_param();
    ASSERT_TRUE(l.model);
    auto probe = make_stepper(*l.model);
    ASSERT_TRUE(probe);
    const int64_t chunk = probe->caches().prefix_cache()->chunk_tokens(), hidden = l.model->hidden_size();
    std::mt19937_64 rng(11);
    std::vector<Request> requests;
    for (int64_t i = 0; i < 8; ++i) {
        const int64_t family = i % 3, shared = (1 + family) * chunk + chunk / 2;
        requests.push_back({i + 1, family, shared, shared + 4 + static_cast<int64_t>(rng() % 6)});
    }
    std::shuffle(requests.begin(), requests.end(), rng);
    int64_t blocks = 0;
    for (const auto& group : probe->caches().groups()) {
        const int64_t longest = 4 * chunk + 10;
        blocks = std::max(blocks, (group->entries_for_tokens(longest) + group->block_size() - 1) / group->block_size());
    }
    auto stepper = make_stepper(*l.model, blocks + blocks / 2);
    ASSERT_TRUE(stepper);
    int64_t hits = 0;
    for (const Request& r : requests) {
        SCOPED_TRACE(fmt::format("request {} (family {}, {} tokens)", r.id, r.family, r.n));
        const RequestRun got = run_request(*stepper, r, /*cached=*/true);
        hits += got.start > 0;
        const RequestRun alone = run_request(*make_stepper(*l.model), r, /*cached=*/false);
        EXPECT_EQ(got.out, outputs_from(alone, got.start, hidden));
        EXPECT_EQ(got.cache, alone.cache);
    }
    const PrefixCache::Stats& stats = stepper->caches().prefix_cache()->stats();
    EXPECT_GT(hits, 0);
    EXPECT_EQ(stats.hits, hits);
    EXPECT_GT(stats.evicted_chunks, 0) << "the pools are small enough to evict";
    for (const auto& group : stepper->caches().groups())
        EXPECT_EQ(group->allocator().used_blocks() > 0, stats.cached_chunks > 0) << "only cached chunks hold blocks";
}

INSTANTIATE_TEST_SUITE_P(Fixtures, PrefixCacheFixture,
                         ::testing::Combine(::testing::Values("deepseek_v4", "deepseek_v32", "hy_v4", "qwen4_exp"),
                                            ::testing::Values(NumericsProfile::exact, NumericsProfile::deployed)),
                         [](const auto& info) {
                             return std::get<0>(info.param) + "_" +
                                    std::string(numerics_profile_name(std::get<1>(info.param)));
                         });

TEST(PrefixCache, MisuseIsAnErrorNamingIt) {
    Loaded l = load("deepseek_v32");
    ASSERT_TRUE(l.model);
    auto stepper = make_stepper(*l.model);
    ASSERT_TRUE(stepper);
    std::vector<float> rows(static_cast<size_t>(2 * l.model->hidden_size()));
    ASSERT_TRUE(stepper->begin_step({{1, 0, 2, false}}).is_ok());
    EXPECT_NE(stepper->attach_prefix(2, {1, 2}, 100).status().message().find("a step is open"), std::string::npos);
    for (int64_t layer = 0; layer < static_cast<int64_t>(l.model->layers().size()); ++layer)
        ASSERT_TRUE(stepper->forward(layer, rows.data(), rows.data()).is_ok());
    ASSERT_TRUE(stepper->end_step().is_ok());
    EXPECT_NE(stepper->attach_prefix(1, {1, 2}, 100).status().message().find("request 1 has already started"),
              std::string::npos);
    auto miss = stepper->attach_prefix(2, {1, 2}, 100);
    ASSERT_TRUE(miss.has_value());
    EXPECT_EQ(*miss, 0);
    EXPECT_NE(stepper->attach_prefix(2, {1, 2}, 100).status().message().find("request 2 has already started"),
              std::string::npos);
}

}  // namespace
}  // namespace sieve
