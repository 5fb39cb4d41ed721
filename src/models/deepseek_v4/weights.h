// Loading one DeepSeek-V4 attention layer's weights (deepseek_v4.md §6, "Decisions for sieve"):
// canonical names `layers.N.attn.*` (io/weights.h resolves the transformers spellings `model.` and
// `attn.norm` for the KV norm), FP8 e4m3 weights with their 128×128 `.scale` blocks kept packed for
// the backend's linear, everything else widened to fp32 (exact) or rounded to bf16 (deployed, where
// the bf16 linear math rounds W anyway: ops/linear.h).
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "sieve/core/status.h"
#include "sieve/core/tensor.h"
#include "sieve/io/config_deepseek_v4.h"
#include "io/weights.h"
#include "sieve/kv/cache_spec.h"
#include "models/planned_linear.h"
#include "models/device_tensor.h"

namespace sieve::dsv4 {

// A compressor (§3.4): wkv and wgate fused into one linear [2·coff·c, D] whose output row is
// [a_s | b_s] (vLLM `fused_wkv_wgate`, §6), ape [m, coff·c], norm [c] (fp32).
struct CompressorWeights {
    PlannedLinear wkv_gate;
    DeviceTensor ape;   // [ratio, coff·head_dim] f32
    DeviceTensor norm;  // [head_dim] f32
    int64_t ratio = 0, head_dim = 0;
    bool overlap = false;
    int64_t coff() const { return overlap ? 2 : 1; }
    int64_t width() const { return coff() * head_dim; }
};

struct LayerWeights {
    PlannedLinear wq_a;             // [q_lora_rank, D]
    PlannedLinear wq_b;             // [H·d, q_lora_rank]
    PlannedLinear wkv;              // [d, D]
    PlannedLinear wo_a;  // [G·o_lora_rank, (H/G)·d] in G groups: row block g reads heads g·H/G … (§3.9)
    PlannedLinear wo_b;             // [D, G·o_lora_rank]
    DeviceTensor q_norm;           // [q_lora_rank] f32
    DeviceTensor kv_norm;          // [d] f32
    DeviceTensor sink;             // [H] f32
    std::optional<CompressorWeights> compressor;          // CSA, HCA
    std::optional<CompressorWeights> indexer_compressor;  // CSA
    PlannedLinear indexer_wq_b;          // [H_I·c_I, q_lora_rank] (CSA)
    PlannedLinear indexer_weights_proj;  // [H_I, D] (CSA)
};

// Every tensor of layer `layer` (config.layers[layer]); a missing tensor, a wrong shape or dtype is an
// error naming the tensor and the layer.
Expected<LayerWeights> load_layer_weights(WeightStore& store, const DeepseekV4Config& config, int64_t layer,
                                          NumericsProfile profile, Backend& backend);

}  // namespace sieve::dsv4
