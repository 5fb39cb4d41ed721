// The DSA-on-MLA layout (models/attention_layout.h) of a config and its cache entry layouts, from the
// config alone (specs/dsa_mla.md); layout.cpp defines them.
#pragma once

#include <cstdint>
#include <string>

#include "sieve/io/config.h"
#include "sieve/models/attention_layout.h"
#include "sieve/ops/cache_record.h"

namespace sieve {

AttentionLayout dsa_mla_attention_layout(const DsaMlaConfig& config, NumericsProfile profile);

// The canonical name prefix of a layer's attention tensors in the HF layout (io/weights.h):
// "model.layers.N.self_attn", and for Hy4's MTP layer J (id num_hidden_layers + J)
// "model.mtp_layers.J.self_attn" (§1.2, §6).
std::string dsa_mla_attention_prefix(const DsaMlaConfig& config, int64_t layer);

// The entry layouts (ops/cache_record.h) of the family's caches in a profile: what its layers write and
// what the CacheSpecs of the layout count.
struct DsaMlaCacheLayouts {
    CacheRecordLayout latent;  // [c | RoPE(kr)]: f32 or fp8_v32 (dsa_mla.md §3.4)
    CacheRecordLayout keys;    // indexer keys: f32 or fp8_row_scale (§3.3)
};
DsaMlaCacheLayouts dsa_mla_cache_layouts(const DsaMlaConfig& config, NumericsProfile profile);

}  // namespace sieve
