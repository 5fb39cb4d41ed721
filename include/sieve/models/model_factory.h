// Loading a model's attention stack: config + checkpoint (or a preset's in-memory checkpoint) →
// an AttentionModel the runtime can run.
#pragma once

#include <memory>
#include <string>

#include "sieve/core/status.h"
#include "sieve/io/checkpoint.h"
#include "sieve/io/config.h"
#include "sieve/kv/cache_spec.h"
#include "sieve/models/attention_model.h"

namespace sieve {

class Backend;

struct ModelOptions {
    NumericsProfile profile = NumericsProfile::exact;
    Backend* backend = nullptr;  // required: every op runs through it (backends/backend.h)
    // Model layer indices to load and run (empty: every layer sieve runs for the model).
    std::vector<int64_t> layers;
};

// Loads through the family registered for config.model_type (models/registry.h).
Expected<std::unique_ptr<AttentionModel>> load_attention_model(const ModelConfig& config, const Checkpoint& checkpoint,
                                                               const ModelOptions& options);

}  // namespace sieve
