// DeepSeek-V4's attention stack as an AttentionModel (models/attention_model.h): the layers of
// the config (SWA-only, CSA, HCA; deepseek_v4.md §3), their weights (§6) and their paged caches
// (§4, as models/deepseek_v4/layout.cpp describes them for `sieve inspect`).
//
// Cache groups: layers with the same CacheSpec share a group (and its block tables); each layer has its
// own storage in it. Groups, by spec name and compress ratio m:
//   swa_kv                          every layer; one row per token, the last sliding_window tokens
//   compressed_kv.m{m}              CSA / HCA; one row per m tokens, the whole history
//   compressor_state.m{m}           CSA / HCA; fp32 [a | b + ape] rows of the last coff·m tokens
//   indexer_keys.m{m}               CSA; one key per m tokens, the whole history
//   indexer_compressor_state.m{m}   CSA; the indexer compressor's state rows
// Block sizes follow vLLM (§4.2): 64 window rows per block, compressed and indexer blocks of 256
// tokens (256/m entries); state blocks of coff·m rows. Tests may shrink them (DeepseekV4Options).
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "sieve/core/status.h"
#include "sieve/io/checkpoint.h"
#include "sieve/io/config_deepseek_v4.h"
#include "sieve/kv/cache_spec.h"
#include "sieve/models/attention_model.h"
#include "sieve/models/model_factory.h"

namespace sieve {

class Backend;

struct DeepseekV4Options {
    NumericsProfile profile = NumericsProfile::exact;
    Backend* backend = nullptr;      // required
    std::vector<int64_t> layers;     // model layer indices to load and run, ascending; empty: all
    int64_t swa_block_size = 64;     // window rows per block (vLLM DeepseekV4SWACache.block_size, §4.2)
    int64_t block_tokens = 256;      // tokens covered by a compressed / indexer-key block (vLLM kernel block, §4.2)
    int64_t state_block_size = 0;    // compressor state rows per block; 0: coff·m; kFitStateBlocks: as many as
                                     // fit in the largest other group's block (model_factory.h), at most coff·m
};

Expected<std::unique_ptr<AttentionModel>> load_deepseek_v4_model(const DeepseekV4Config& config,
                                                                 const Checkpoint& checkpoint,
                                                                 const DeepseekV4Options& options);

}  // namespace sieve
