// The DeepSeek-V4 layout (models/attention_layout.h) of a config and its cache entry layouts, from the
// config alone (specs/deepseek_v4.md); layout.cpp defines them.
#pragma once

#include <cstdint>
#include <string>

#include "sieve/io/config.h"
#include "sieve/models/attention_layout.h"
#include "sieve/ops/cache_record.h"

namespace sieve {

AttentionLayout deepseek_v4_attention_layout(const DeepseekV4Config& config, NumericsProfile profile);

// The canonical name prefix of a layer's attention tensors (io/weights.h): "layers.N.attn" for a main
// layer, "mtp.J.attn" for MTP layer J (id num_hidden_layers + J, §6).
std::string deepseek_v4_attention_prefix(const DeepseekV4Config& config, int64_t layer);

// The entry layouts (ops/cache_record.h) of the family's caches in a profile: what its layers write and
// what the CacheSpecs of the layout count.
struct DeepseekV4CacheLayouts {
    CacheRecordLayout kv;    // window and compressed K = V rows: f32 (§3.10) or fp8_model1 (§4.1)
    CacheRecordLayout keys;  // indexer keys: f32 or fp8_row_scale (§4.3)
};
DeepseekV4CacheLayouts deepseek_v4_cache_layouts(const DeepseekV4Config& config, NumericsProfile profile);

}  // namespace sieve
