// What the model tests of every family share: the golden fixtures of tests/data, read and validated
// by the check's own reader (tools/check/golden_fixture.h) and run through the check's own runner
// (tools/check/golden_run.h), and checkpoints held in memory (every tensor of a checkpoint copied
// out, changed, and turned back into a checkpoint or a checkpoint directory).
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <filesystem>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "sieve/backends/backend.h"
#include "sieve/core/status.h"
#include "sieve/core/tensor.h"
#include "golden_check.h"
#include "sieve/io/checkpoint.h"
#include "sieve/io/config.h"

namespace sieve::model_test {

std::filesystem::path data_dir();  // tests/data

// make_backend(spec); a test failure and nullptr when this machine has no such backend.
std::unique_ptr<Backend> test_backend(const std::string& spec = "cpu");

// ---- golden fixtures -------------------------------------------------------------------------------

// A fixture of tests/data: its checkpoint, its config (parsed, and as text to derive variants from)
// and its golden tensors, read for every layer sieve runs of the model.
struct Golden {
    std::string config_json;
    ModelConfig config;
    std::unique_ptr<Checkpoint> checkpoint;
    GoldenFixture fixture;
    int64_t n_requests() const { return static_cast<int64_t>(fixture.requests.size()); }
    std::vector<int64_t> n_tokens() const;  // per request
    // [T · hidden] the captured input and output of request `request` at the fixture's layer_pos.
    std::span<const float> input(int64_t request, int64_t layer_pos) const;
    std::span<const float> output(int64_t request, int64_t layer_pos) const;
};
// tests/data/<name>; a test failure (and an empty fixture) when it does not read.
Golden load_golden(const std::string& name);

// golden_schedule (one-shot, chunk:N, decode, mixed) of the fixture's requests; a test failure for
// a name it does not know.
GoldenSchedule schedule(const std::string& name, const Golden& golden, uint64_t seed = 1);

// The fixture's requests through `model`, teacher-forced with the captured inputs of its layers.
Expected<GoldenRun> run_fixture(AttentionModel& model, const Golden& golden, const GoldenSchedule& schedule,
                                const GoldenRunOptions& options = {});

// The selected rows of a request's run ([layer_pos] position → row), without their scores: for runs
// whose scores may differ in the last bits while the selections must not.
std::vector<std::map<int64_t, std::vector<int32_t>>> selected_rows(const GoldenRequestRun& run);

// Every layer of the run reported the selection of every token of every request, once (the
// SelectionObserver contract, for models whose every layer selects).
void expect_every_selection_once(const GoldenRun& run);

// The values of an f32 tensor.
std::span<const float> f32_values(const Tensor& t);

// ---- checkpoints in memory -------------------------------------------------------------------------

struct HostTensor {
    std::string name;
    DType dtype = DType::f32;
    Shape shape;
    std::vector<uint8_t> bytes;
    std::vector<float> f32() const;  // f32 tensors only
    static HostTensor from_f32(std::string name, Shape shape, std::span<const float> values);
};

// Every tensor of `checkpoint`, in its order of names.
std::vector<HostTensor> checkpoint_tensors(const Checkpoint& checkpoint);
// The tensor named `name` (a test failure and nullptr when there is none).
HostTensor* find_tensor(std::vector<HostTensor>& tensors, const std::string& name);
// `tensors` without the one named `name`.
std::vector<HostTensor> without_tensor(const std::vector<HostTensor>& tensors, const std::string& name);
Expected<std::unique_ptr<Checkpoint>> memory_checkpoint(const std::vector<HostTensor>& tensors, const std::string& label);
// A checkpoint directory as `sieve run` reads one: dir/config.json (config_json) and dir/model.safetensors.
Status write_checkpoint_dir(const std::vector<HostTensor>& tensors, const std::string& config_json,
                            const std::filesystem::path& dir);

// A weight [rows, cols] as FP8 e4m3 with one scale per 128×128 block (W ≈ e4m3 · scale), the way
// checkpoints store their FP8 linears.
enum class Fp8Scale {
    ue8m0,          // a power of two (ue8m0_scale_for_amax), stored as UE8M0 or as f32
    amax_over_448,  // the block's amax / 448 (1 for an all-zero block), stored as f32
};
struct Fp8Blocks {
    std::vector<uint8_t> values;     // [rows · cols] e4m3
    Shape scale_shape;               // [⌈rows/128⌉, ⌈cols/128⌉]
    std::vector<float> scales;       // [scale_shape] row-major
    std::vector<float> dequantized;  // [rows · cols] e4m3 · scale: the weight a loader makes of it
};
Fp8Blocks fp8_blocks(std::span<const float> w, int64_t rows, int64_t cols, Fp8Scale scale);

}  // namespace sieve::model_test
