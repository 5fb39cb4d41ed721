// What a model's attention layers consist of, derived from its config alone: per layer, the kind
// of attention, the checkpoint tensors it needs (canonical names, see io/weights.h, and shapes) and
// the caches it keeps. `sieve inspect` checks a checkpoint against it; the loaders of the family
// folders read the same tensors.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "sieve/core/status.h"
#include "sieve/core/tensor.h"
#include "sieve/io/config.h"
#include "sieve/kv/cache_spec.h"
#include "sieve/ops/cache_record.h"

namespace sieve {

struct AttentionTensor {
    std::string name;       // canonical name (io/weights.h), e.g. "layers.2.attn.wq_a.weight"
    Shape shape;            // expected shape
    bool fp8_block = false;  // may be stored as FP8 e4m3 with a 128×128 block-scale sibling
};

struct AttentionLayerLayout {
    int64_t layer = 0;       // the model's own layer index
    std::string kind;        // "swa", "csa", "hca", "dsa_full", "dsa_shared", "qsa", "linear_attention"
    std::string detail;      // e.g. "compress ratio 4, indexer top-512" or "top-k from layer 1"
    bool sieve_runs = true;  // false for layers sieve does not implement (linear attention)
    // A multi-token-prediction draft layer (id ≥ num_hidden_layers): its attention is that of an ordinary
    // layer of `kind`, under the checkpoint's MTP prefix. Models run it only when asked for by id.
    bool mtp = false;
    std::vector<AttentionTensor> tensors;
    std::vector<CacheSpec> caches;
};

struct AttentionLayout {
    std::vector<AttentionLayerLayout> layers;
    // Bytes per token of a plain dense-attention KV cache for the same main layers (MTP layers left out, as
    // in every other total), for comparison (full K and V of every head that attention reads, in the
    // profile's cache dtype).
    double dense_cache_bytes_per_token = 0.0;
};

Expected<AttentionLayout> attention_layout(const ModelConfig& config, NumericsProfile profile);

// The ids of the layers sieve runs, MTP layers included, in order: what a model loaded with all of them runs,
// and what a golden fixture of the config captures (golden_format.md).
std::vector<int64_t> layers_sieve_runs(const AttentionLayout& layout);

// Each family declares its own layout and cache entry layouts in models/<family>/layout.h.

// CacheSpec::format of an entry layout: its format name and values, e.g. "f32 [512]", "fp8_row_scale [128]",
// "fp8_model1 [448 + 64 rope]".
std::string cache_format_text(const CacheRecordLayout& l);

}  // namespace sieve
