// Helpers of the DSA-on-MLA model tests: the golden fixtures' tensors, checkpoints rewritten in memory
// (renamed, FP8-quantized, a tensor dropped or reshaped), and a small engine runner that feeds captured
// inputs, collects every layer's outputs and records (or overrides) the selections.
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "backends/backend.h"
#include "io/checkpoint.h"
#include "io/config.h"
#include "models/attention_model.h"
#include "runtime/engine.h"

namespace sieve::dsa_test {

inline const std::filesystem::path kDataDir = SIEVE_TEST_DATA_DIR;

// One tensor of a checkpoint held in memory.
struct HostTensor {
    std::string name;
    DType dtype = DType::f32;
    Shape shape;
    std::vector<uint8_t> bytes;
    std::vector<float> f32() const;  // f32 tensors only
    static HostTensor from_f32(std::string name, Shape shape, const std::vector<float>& v);
};

std::vector<HostTensor> read_all(const Checkpoint& ckpt);
Expected<std::unique_ptr<Checkpoint>> make_checkpoint(const std::vector<HostTensor>& tensors, const std::string& label);
// A checkpoint directory as `sieve run` reads one: dir/config.json (config_json) and dir/model.safetensors.
Status write_checkpoint_dir(const std::vector<HostTensor>& tensors, const std::string& config_json,
                            const std::filesystem::path& dir);

struct Fixture {
    std::string model_type;
    std::string config_json;  // ckpt/config.json as text
    ModelConfig config;
    std::unique_ptr<Checkpoint> checkpoint;
    int64_t n_requests = 0;
    // golden: [request][layer] (model layer index as key)
    std::vector<int64_t> request_tokens;
    std::vector<std::map<int64_t, std::vector<float>>> inputs, outputs;
    std::vector<std::map<int64_t, std::vector<int32_t>>> topk;  // [T, K_r] per request/layer (may be absent)
    std::vector<int64_t> topk_width;                            // K_r per request
};
Fixture load_fixture(const std::string& name);  // asserts on failure (tests only)

// What a run produced: outputs[request][layer_pos] = [T, hidden]; selections[(request, layer)][position].
struct RunResult {
    std::vector<std::vector<std::vector<float>>> outputs;
    std::map<std::pair<int64_t, int64_t>, std::map<int64_t, std::vector<int32_t>>> selections;
    std::map<std::pair<int64_t, int64_t>, std::map<int64_t, std::vector<float>>> scores;
};

struct RunOptions {
    std::string schedule = "one-shot";  // one-shot | chunk:N | decode
    // inputs[request][layer] = [T, hidden]; default: the fixture's captured inputs.
    const std::vector<std::map<int64_t, std::vector<float>>>* inputs = nullptr;
    std::vector<int64_t> requests;  // which requests (default all)
    // Called on every selection before attention uses it; may rewrite `selected`.
    std::function<void(int64_t layer, int64_t request, int64_t position, std::span<int32_t> selected)> override_selection;
    // false: no observer at all (nothing is recorded), so full layers take the fused indexer selection
    // (ops/indexer_scores.h) instead of writing score rows for the observer.
    bool observe = true;
};

Expected<RunResult> run_model(AttentionModel& model, const Fixture& f, const RunOptions& options);

// ‖a − b‖₂ / ‖b‖₂ and max |a − b|.
struct Diff {
    double rel = 0, max_abs = 0;
};
Diff diff(const std::vector<float>& a, const std::vector<float>& b);

}  // namespace sieve::dsa_test
