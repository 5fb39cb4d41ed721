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
    // DeepSeek-V4's compressor-state cache blocks: 0 holds a whole window (coff·m rows) per block;
    // kFitStateBlocks as many rows as fit in the largest block of the model's other cache groups, for an
    // engine that gives every group one page size (vLLM) and would otherwise pad every page to a window of
    // fp32 state rows (512 KiB at m = 128, d = 512); > 0 that many rows. Other families take only 0.
    int64_t state_block_size = 0;
    // DSA on MLA's latent and indexer-key cache blocks, in entries (one per token): 0 is 64, FlashMLA's page
    // (dsa_mla.md §4.1); an engine that schedules its own block size passes it (vLLM 0.32 on a CPU without
    // AMX forces 16 for MLA models, platforms/cpu.py). Other families take only 0.
    int64_t cache_block_size = 0;
};
inline constexpr int64_t kFitStateBlocks = -1;

// Loads through the family registered for config.model_type (models/registry.h).
Expected<std::unique_ptr<AttentionModel>> load_attention_model(const ModelConfig& config, const Checkpoint& checkpoint,
                                                               const ModelOptions& options);

}  // namespace sieve
