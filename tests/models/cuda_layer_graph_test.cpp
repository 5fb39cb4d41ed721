// A whole layer step on the cuda backend only enqueues (DESIGN.md: a step is planned once), so an engine can
// record it into one CUDA graph and replay it. Every fixture's requests, stepped together in chunks of 3
// tokens and then one token at a time, with every step's layers enqueued by LayerStepper::forward_on_backend
// and recorded by Backend::capture, give bit for bit the outputs of the same steps enqueued directly; a
// second replay of a step's graph gives them again (a step may be replayed, as a retried step is rerun).
//
// Without a GPU (or in a build without CUDA) there is nothing to test: the binary says so and exits with
// kNoGpuExit, which ctest reports as skipped (SKIP_RETURN_CODE), never as passed.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "model_test_util.h"
#include "sieve/models/model_factory.h"
#include "sieve/runtime/layer_stepper.h"

namespace sieve {
namespace {

constexpr int kNoGpuExit = 77;

std::string first_cuda_variant() {
    for (const BackendKind& kind : backend_kinds())
        if (kind.name == "cuda" && !kind.variants().empty()) return kind.variants().front();
    return {};
}

// [request][layer_pos] the outputs of every token, [n_tokens · hidden].
using Outputs = std::vector<std::vector<std::vector<float>>>;

// Steps every request of the fixture together, `chunk` tokens at a time, teacher-forced with the captured
// inputs. Each step's inputs of every layer are uploaded before its layers are enqueued; with `graph` the
// layers are recorded into one graph, replayed twice (the outputs poisoned in between) and both replays'
// outputs compared.
Outputs step_on_backend(AttentionModel& model, const model_test::Golden& g, int64_t chunk, bool graph) {
    Backend& backend = model.backend();
    auto made = LayerStepper::create(model, CachePoolOptions{});
    EXPECT_TRUE(made.has_value()) << made.status().to_string();
    if (!made.has_value()) return {};
    LayerStepper& stepper = **made;
    const int64_t hidden = model.hidden_size();
    const size_t n_layers = model.layers().size();
    const std::vector<int64_t> n_tokens = g.n_tokens();
    Outputs out(n_tokens.size());
    for (size_t r = 0; r < n_tokens.size(); ++r)
        out[r].assign(n_layers, std::vector<float>(static_cast<size_t>(n_tokens[r] * hidden), NAN));
    std::vector<int64_t> done(n_tokens.size(), 0);
    for (int64_t step_index = 0;; ++step_index) {
        std::vector<StepRequest> step;
        for (size_t r = 0; r < n_tokens.size(); ++r)
            if (done[r] < n_tokens[r])
                step.push_back({static_cast<RequestId>(r + 1), done[r],
                                done[r] == 0 ? std::min(chunk, n_tokens[r]) : 1, false});
        if (step.empty()) break;
        const Status begun = stepper.begin_step(step);
        EXPECT_TRUE(begun.is_ok()) << begun.to_string();
        if (!begun.is_ok()) return {};
        const StepBatch& batch = stepper.batch();
        const int64_t T = batch.n_tokens();
        const size_t rows = static_cast<size_t>(T * hidden), bytes = rows * sizeof(float);
        std::vector<float> in(rows * n_layers), o(rows * n_layers);
        for (size_t l = 0; l < n_layers; ++l)
            for (int64_t t = 0; t < T; ++t) {
                const size_t r = static_cast<size_t>(batch.request_of_token(t) - 1);
                const int64_t p = batch.positions[static_cast<size_t>(t)];
                const auto row = g.input(static_cast<int64_t>(r), static_cast<int64_t>(l)).subspan(p * hidden, hidden);
                std::copy(row.begin(), row.end(), in.begin() + static_cast<std::ptrdiff_t>(l * rows + t * hidden));
            }
        auto din = backend.buffer_alloc(bytes * n_layers, BufferUsage::workspace, "the step's inputs");
        auto dout = backend.buffer_alloc(bytes * n_layers, BufferUsage::workspace, "the step's outputs");
        EXPECT_TRUE(din.has_value() && dout.has_value());
        if (!din.has_value() || !dout.has_value()) return {};
        EXPECT_TRUE(backend.buffer_upload(**din, 0, in.data(), bytes * n_layers).is_ok());
        auto enqueue = [&]() -> Status {
            for (size_t l = 0; l < n_layers; ++l)
                SIEVE_RETURN_IF_ERROR(stepper.forward_on_backend(static_cast<int64_t>(l), (*din)->as<float>() + l * rows,
                                                                 (*dout)->as<float>() + l * rows));
            return Status::ok();
        };
        if (graph) {
            auto recorded = backend.capture(enqueue);
            EXPECT_TRUE(recorded.has_value()) << "step " << step_index << ": " << recorded.status().to_string();
            if (!recorded.has_value()) return {};
            std::vector<float> first(o.size());
            for (int replay = 0; replay < 2; ++replay) {
                EXPECT_TRUE(backend.buffer_fill(**dout, 0, 0xff, bytes * n_layers).is_ok());  // NaN rows
                EXPECT_TRUE((*recorded)->replay().is_ok());
                EXPECT_TRUE(backend.buffer_download(**dout, 0, o.data(), bytes * n_layers).is_ok());
                if (replay == 0) first = o;
            }
            EXPECT_EQ(std::memcmp(first.data(), o.data(), bytes * n_layers), 0)
                << "step " << step_index << ": the second replay gave other bits";
        } else {
            const Status s = enqueue();
            EXPECT_TRUE(s.is_ok()) << s.to_string();
            EXPECT_TRUE(backend.buffer_download(**dout, 0, o.data(), bytes * n_layers).is_ok());
        }
        for (size_t l = 0; l < n_layers; ++l)
            for (int64_t t = 0; t < T; ++t) {
                const size_t r = static_cast<size_t>(batch.request_of_token(t) - 1);
                const int64_t p = batch.positions[static_cast<size_t>(t)];
                std::copy(o.begin() + static_cast<std::ptrdiff_t>(l * rows + t * hidden),
                          o.begin() + static_cast<std::ptrdiff_t>(l * rows + (t + 1) * hidden),
                          out[r][l].begin() + p * hidden);
            }
        for (const StepRequest& q : step) done[static_cast<size_t>(q.id - 1)] += q.n_tokens;
        EXPECT_TRUE(stepper.end_step().is_ok());
    }
    for (size_t r = 0; r < n_tokens.size(); ++r) stepper.free_request(static_cast<RequestId>(r + 1));
    return out;
}

struct Case {
    std::string fixture;
    NumericsProfile profile;
};

class CudaLayerGraph : public ::testing::TestWithParam<Case> {};

TEST_P(CudaLayerGraph, ReplayedStepsGiveTheDirectStepsBits) {
    const Case c = GetParam();
    model_test::Golden golden = model_test::load_golden(c.fixture);
    auto backend = model_test::test_backend(first_cuda_variant());
    ASSERT_NE(backend, nullptr);
    ModelOptions options;
    options.backend = backend.get();
    options.profile = c.profile;
    auto model = load_attention_model(golden.config, *golden.checkpoint, options);
    ASSERT_TRUE(model.has_value()) << model.status().to_string();
    // The direct run first: it grows the model's workspaces to every step's size, as an engine's warm-up
    // step does before it captures (a capture cannot allocate).
    const Outputs direct = step_on_backend(**model, golden, 3, /*graph=*/false);
    ASSERT_FALSE(direct.empty());
    const Outputs replayed = step_on_backend(**model, golden, 3, /*graph=*/true);
    ASSERT_EQ(replayed.size(), direct.size());
    for (size_t r = 0; r < direct.size(); ++r)
        for (size_t l = 0; l < direct[r].size(); ++l) {
            ASSERT_EQ(direct[r][l].size(), replayed[r][l].size());
            EXPECT_EQ(std::memcmp(direct[r][l].data(), replayed[r][l].data(), direct[r][l].size() * sizeof(float)), 0)
                << "request " << r << " layer " << l;
            EXPECT_TRUE(std::all_of(direct[r][l].begin(), direct[r][l].end(), [](float v) { return std::isfinite(v); }))
                << "request " << r << " layer " << l << ": not every output was written";
        }
}

std::string case_name(const ::testing::TestParamInfo<Case>& info) {
    return info.param.fixture + (info.param.profile == NumericsProfile::exact ? "_exact" : "_deployed");
}

INSTANTIATE_TEST_SUITE_P(Fixtures, CudaLayerGraph,
                         ::testing::Values(Case{"deepseek_v4", NumericsProfile::exact},
                                           Case{"deepseek_v4", NumericsProfile::deployed},
                                           Case{"deepseek_v32", NumericsProfile::exact},
                                           Case{"deepseek_v32", NumericsProfile::deployed},
                                           Case{"hy_v4", NumericsProfile::exact},
                                           Case{"hy_v4", NumericsProfile::deployed},
                                           Case{"qwen4_exp", NumericsProfile::exact},
                                           Case{"qwen4_exp", NumericsProfile::deployed}),
                         case_name);

}  // namespace
}  // namespace sieve

int main(int argc, char** argv) {
    if (sieve::first_cuda_variant().empty()) {
        std::fprintf(stderr, "test_cuda_layer_graph: no CUDA GPU here (or this build has no CUDA backend): the "
                             "cuda suite did not run\n");
        return sieve::kNoGpuExit;
    }
    testing::InitGoogleTest(&argc, argv);
    return RUN_ALL_TESTS();
}
