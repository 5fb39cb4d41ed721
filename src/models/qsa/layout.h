// The QSA layout (models/attention_layout.h) of a config and its cache entry layouts, from the
// config alone (specs/qsa.md); layout.cpp defines them.
#pragma once

#include <cstdint>
#include <string>

#include "sieve/io/config.h"
#include "sieve/models/attention_layout.h"
#include "sieve/ops/cache_record.h"

namespace sieve {

AttentionLayout qsa_attention_layout(const QsaConfig& config, NumericsProfile profile);

// The canonical name prefix of a layer's attention tensors (io/weights.h): "model.layers.L.self_attn", and
// for MTP layer J (id num_hidden_layers + J) "mtp.layers.J.self_attn" (§3).
std::string qsa_attention_prefix(const QsaConfig& config, int64_t layer);

// The entry layouts (ops/cache_record.h) of the family's caches in a profile: what its layers write and
// what the CacheSpecs of the layout count.
struct QsaCacheLayouts {
    CacheRecordLayout kv;    // [Hkv, 2, D]: K of kv head g at 2g·D, V at (2g + 1)·D (qsa.md §5.1)
    CacheRecordLayout keys;  // raw-key ring and compressed keys, [Di] each (§5.2, §5.3)
};
QsaCacheLayouts qsa_cache_layouts(const QsaConfig& config, NumericsProfile profile);

}  // namespace sieve
