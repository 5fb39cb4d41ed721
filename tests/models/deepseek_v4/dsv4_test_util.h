// Shared helpers of the DeepSeek-V4 model tests: the fixture (tests/data/deepseek_v4), in-memory
// checkpoints built from it, and a small teacher-forcing runner over the Engine that records every
// layer output and every CSA selection (so tests can choose block sizes and schedules that
// `sieve check` does not expose).
#pragma once

#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <set>
#include <span>
#include <string>
#include <vector>

#include "backends/backend.h"
#include "io/checkpoint.h"
#include "io/config.h"
#include "io/safetensors.h"
#include "models/deepseek_v4/model.h"
#include "runtime/engine.h"

namespace sieve::dsv4_test {

inline std::filesystem::path fixture_dir() { return std::filesystem::path(SIEVE_TEST_DATA_DIR) / "deepseek_v4"; }

struct Fixture {
    ModelConfig config;
    std::unique_ptr<Checkpoint> checkpoint;
    std::unique_ptr<SafetensorsFile> golden;
    int64_t n_requests = 0;
    const DeepseekV4Config& v4() const { return *config.deepseek_v4(); }
};

inline Fixture load_fixture() {
    Fixture f;
    auto config = load_model_config(fixture_dir() / "ckpt");
    EXPECT_TRUE(config.has_value()) << config.status().to_string();
    f.config = std::move(config).value();
    auto ckpt = Checkpoint::open(fixture_dir() / "ckpt");
    EXPECT_TRUE(ckpt.has_value()) << ckpt.status().to_string();
    f.checkpoint = std::move(ckpt).value();
    auto golden = SafetensorsFile::open(fixture_dir() / "golden.safetensors");
    EXPECT_TRUE(golden.has_value()) << golden.status().to_string();
    f.golden = std::move(golden).value();
    f.n_requests = std::stoll(f.golden->metadata().at("requests"));
    return f;
}

inline Tensor golden_tensor(const Fixture& f, const std::string& name, DType t) {
    auto v = f.golden->tensor(name);
    EXPECT_TRUE(v.has_value()) << v.status().to_string();
    auto out = read_tensor(*v, t);
    EXPECT_TRUE(out.has_value()) << out.status().to_string();
    return std::move(out).value();
}

// The tensors of a checkpoint, copied out (name → dtype, shape, bytes), to build variants in memory.
struct TensorBytes {
    DType dtype = DType::f32;
    Shape shape;
    std::vector<uint8_t> bytes;
};
using TensorMap = std::map<std::string, TensorBytes>;

inline TensorMap checkpoint_tensors(const Checkpoint& c) {
    TensorMap m;
    for (std::string_view name : c.tensor_names()) {
        auto v = c.tensor(name);
        TensorBytes t;
        t.dtype = *v->dtype;
        t.shape.assign(v->shape.begin(), v->shape.end());
        t.bytes.assign(v->bytes.begin(), v->bytes.end());
        m.emplace(std::string(name), std::move(t));
    }
    return m;
}

inline std::unique_ptr<Checkpoint> memory_checkpoint(const TensorMap& tensors) {
    std::vector<SafetensorsWriteEntry> entries;
    for (const auto& [name, t] : tensors) entries.push_back({name, t.dtype, t.shape, t.bytes});
    auto bytes = serialize_safetensors(entries);
    EXPECT_TRUE(bytes.has_value()) << bytes.status().to_string();
    auto file = SafetensorsFile::from_bytes(std::move(bytes).value(), "memory.safetensors");
    EXPECT_TRUE(file.has_value()) << file.status().to_string();
    std::vector<std::unique_ptr<SafetensorsFile>> files;
    files.push_back(std::move(file).value());
    auto ckpt = Checkpoint::from_files("memory", std::move(files));
    EXPECT_TRUE(ckpt.has_value()) << ckpt.status().to_string();
    return std::move(ckpt).value();
}

// What a run produced: outputs[request][layer_pos] = [T · hidden], selections[(request, layer)][position].
struct RunResult {
    std::map<int64_t, std::vector<std::vector<float>>> outputs;
    std::map<std::pair<int64_t, int64_t>, std::map<int64_t, std::set<int32_t>>> selections;
    std::map<std::pair<int64_t, int64_t>, std::map<int64_t, std::vector<float>>> scores;  // empty: unscored
    Status status;
};

struct RunOptions {
    EngineOptions engine;
    std::vector<int64_t> prompt_tokens;  // per request; empty: whole requests are prompts
    std::vector<int64_t> requests;       // fixture request ids to run; empty: all
    int64_t truncate = 0;                // run only the first `truncate` tokens of each request (0: all)
    // Attend with the reference's selection (the fixture's .topk) instead of the layer's own, for every
    // token: separates the numerics of a profile from its selection changes. The recorded selections
    // stay the layer's own.
    bool reference_selection = false;
    // Called after recording (and any reference substitution) with the selection the layer will use.
    std::function<void(int64_t layer, RequestId request, int64_t position, std::span<int32_t> selected)> modify;
    // false: no observer at all (nothing is recorded), so the indexer takes its fused path
    // (ops/indexer_scores.h "Fused selection") instead of writing score rows for the observer.
    bool observe = true;
};

// Runs the fixture's requests through the Engine, teacher-forced with the golden inputs.
RunResult run_fixture(const Fixture& f, AttentionModel& model, const RunOptions& options);

// ‖Δ‖₂ / ‖ref‖₂ of one request's layer output over its first n_tokens tokens.
double relative_error(const std::vector<float>& got, const Tensor& want, int64_t n_values);

}  // namespace sieve::dsv4_test
