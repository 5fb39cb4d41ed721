// The one runner of a step's layers: the Engine (sieve run, sieve check) and the layer benchmark
// (sieve bench) both run the model through it. It keeps the step's activations [n_tokens, hidden] f32
// in the model's backend memory, uploads each layer's input rows from a StepIo and downloads its
// output rows to it (the only activation traffic between host and device), and runs the layers in
// order, chained or each on its own inputs.
#pragma once

#include <cstdint>
#include <memory>
#include <span>

#include "sieve/backends/backend.h"
#include "sieve/core/stage_timer.h"
#include "sieve/core/status.h"
#include "sieve/kv/step_batch.h"
#include "sieve/models/attention_model.h"

namespace sieve {

// The host side of a step's rows: [n_tokens, hidden] f32, tokens in the batch's order.
class StepIo {
public:
    virtual ~StepIo() = default;
    // The input rows of the layer at `layer_pos` (of the model's layers()); with chained layers only
    // layer 0 is asked.
    virtual void input(int64_t layer_pos, std::span<float> rows) = 0;
    virtual void output(int64_t layer_pos, std::span<const float> rows) = 0;
};

// Sees each layer's forward alone (after its input is on the device, before its output comes back),
// e.g. to time it; after_layer runs once the backend has finished the layer's ops.
class LayerHook {
public:
    virtual ~LayerHook() = default;
    virtual void before_layer(int64_t layer_pos) = 0;
    virtual void after_layer(int64_t layer_pos) = 0;
};

class StepRunner {
public:
    explicit StepRunner(AttentionModel& model) : model_(model) {}

    // Every layer of the model over `batch`. chain: layer l's input is layer l−1's output (a stack);
    // otherwise each layer's input comes from io (teacher forcing, as golden fixtures capture them).
    // An error names the layer; the caches may then hold a partial step.
    Status run(const StepBatch& batch, StepIo& io, bool chain, StageTimes* times, LayerHook* hook = nullptr);

    // Bytes of the activation buffers (grown to the largest step so far).
    int64_t activation_bytes() const;

private:
    AttentionModel& model_;
    std::unique_ptr<DeviceBuffer> activations_[2];  // a layer's input and output rows, swapped when chaining
    std::vector<float> host_rows_;
};

}  // namespace sieve
