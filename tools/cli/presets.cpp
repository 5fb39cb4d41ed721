#include "presets.h"

#include <fmt/format.h>

#include <cmath>
#include <nlohmann/json.hpp>
#include <set>

#include "sieve/core/dtype.h"
#include "core/thread_pool.h"
#include "sieve/io/safetensors.h"
#include "sieve/models/attention_layout.h"

namespace sieve::cli {

namespace {

// Released configs (specs/deepseek_v4.md §1.1, dsa_mla.md §1.1–1.2, qsa.md §2.1).
constexpr const char* kDeepseekV4Flash = R"({
  "model_type": "deepseek_v4", "hidden_size": 4096, "num_hidden_layers": 43, "num_attention_heads": 64,
  "num_key_value_heads": 1, "head_dim": 512, "qk_rope_head_dim": 64, "q_lora_rank": 1024, "o_lora_rank": 1024,
  "o_groups": 8, "sliding_window": 128, "index_n_heads": 64, "index_head_dim": 128, "index_topk": 512,
  "rope_theta": 10000, "compress_rope_theta": 160000,
  "rope_scaling": {"type": "yarn", "factor": 16, "original_max_position_embeddings": 65536, "beta_fast": 32, "beta_slow": 1},
  "rms_norm_eps": 1e-06, "max_position_embeddings": 1048576, "num_nextn_predict_layers": 1,
  "compress_ratios": [0, 0, 4, 128, 4, 128, 4, 128, 4, 128, 4, 128, 4, 128, 4, 128, 4, 128, 4, 128, 4, 128,
                      4, 128, 4, 128, 4, 128, 4, 128, 4, 128, 4, 128, 4, 128, 4, 128, 4, 128, 4, 128, 4, 0]
})";

constexpr const char* kDeepseekV4Pro = R"({
  "model_type": "deepseek_v4", "hidden_size": 7168, "num_hidden_layers": 61, "num_attention_heads": 128,
  "num_key_value_heads": 1, "head_dim": 512, "qk_rope_head_dim": 64, "q_lora_rank": 1536, "o_lora_rank": 1024,
  "o_groups": 16, "sliding_window": 128, "index_n_heads": 64, "index_head_dim": 128, "index_topk": 1024,
  "rope_theta": 10000, "compress_rope_theta": 160000,
  "rope_scaling": {"type": "yarn", "factor": 16, "original_max_position_embeddings": 65536, "beta_fast": 32, "beta_slow": 1},
  "rms_norm_eps": 1e-06, "max_position_embeddings": 1048576, "num_nextn_predict_layers": 1,
  "compress_ratios": [128, 128, 4, 128, 4, 128, 4, 128, 4, 128, 4, 128, 4, 128, 4, 128, 4, 128, 4, 128, 4,
                      128, 4, 128, 4, 128, 4, 128, 4, 128, 4, 128, 4, 128, 4, 128, 4, 128, 4, 128, 4, 128, 4,
                      128, 4, 128, 4, 128, 4, 128, 4, 128, 4, 128, 4, 128, 4, 128, 4, 128, 4, 0]
})";

constexpr const char* kDeepseekV32 = R"({
  "model_type": "deepseek_v32", "hidden_size": 7168, "num_hidden_layers": 61, "num_attention_heads": 128,
  "num_key_value_heads": 128, "q_lora_rank": 1536, "kv_lora_rank": 512, "qk_nope_head_dim": 128,
  "qk_rope_head_dim": 64, "v_head_dim": 128, "index_n_heads": 64, "index_head_dim": 128, "index_topk": 2048,
  "rope_theta": 10000,
  "rope_scaling": {"type": "yarn", "factor": 40, "original_max_position_embeddings": 4096, "beta_fast": 32,
                   "beta_slow": 1, "mscale": 1.0, "mscale_all_dim": 1.0},
  "rms_norm_eps": 1e-06, "max_position_embeddings": 163840, "num_nextn_predict_layers": 1
})";

constexpr const char* kHy4 = R"({
  "model_type": "hy_v4", "hidden_size": 6144, "num_hidden_layers": 78, "num_attention_heads": 64,
  "q_lora_rank": 2048, "kv_lora_rank": 512, "qk_nope_head_dim": 192, "qk_rope_head_dim": 64, "v_head_dim": 256,
  "index_n_heads": 32, "index_head_dim": 128, "index_topk": 2048, "gated_mla": true, "gating_type": "elementwise",
  "learnable_sink": true,
  "indexer_types": ["full", "full", "shared", "shared", "shared", "full", "shared", "shared", "shared", "full",
    "shared", "shared", "shared", "full", "shared", "shared", "shared", "full", "shared", "shared", "shared",
    "full", "shared", "shared", "shared", "full", "shared", "shared", "shared", "full", "shared", "shared",
    "shared", "full", "shared", "shared", "shared", "full", "shared", "shared", "shared", "full", "shared",
    "shared", "shared", "full", "shared", "shared", "shared", "full", "shared", "shared", "shared", "full",
    "shared", "shared", "shared", "full", "shared", "shared", "shared", "full", "shared", "shared", "shared",
    "full", "shared", "shared", "shared", "full", "shared", "shared", "shared", "full", "shared", "shared",
    "shared", "full"],
  "rope_parameters": {"rope_type": "default", "rope_theta": 10000000.0},
  "rms_norm_eps": 1e-05, "max_position_embeddings": 262144, "num_nextn_predict_layers": 1
})";

constexpr const char* kQwenFlashNext = R"({
  "model_type": "qwen4_exp_text", "hidden_size": 2560, "num_hidden_layers": 48, "num_attention_heads": 24,
  "num_key_value_heads": 2, "head_dim": 256, "rms_norm_eps": 1e-06, "max_position_embeddings": 262144,
  "rope_parameters": {"rope_type": "default", "rope_theta": 10000000, "partial_rotary_factor": 0.25},
  "indexer_n_heads": 4, "indexer_kv_heads": 1, "indexer_head_dim": 128, "indexer_budget": 2048,
  "indexer_compress_ratio": 4, "mtp_num_hidden_layers": 1,
  "layer_types": ["linear_attention", "linear_attention", "linear_attention", "full_attention",
    "linear_attention", "linear_attention", "linear_attention", "full_attention", "linear_attention",
    "linear_attention", "linear_attention", "full_attention", "linear_attention", "linear_attention",
    "linear_attention", "full_attention", "linear_attention", "linear_attention", "linear_attention",
    "full_attention", "linear_attention", "linear_attention", "linear_attention", "full_attention",
    "linear_attention", "linear_attention", "linear_attention", "full_attention", "linear_attention",
    "linear_attention", "linear_attention", "full_attention", "linear_attention", "linear_attention",
    "linear_attention", "full_attention", "linear_attention", "linear_attention", "linear_attention",
    "full_attention", "linear_attention", "linear_attention", "linear_attention", "full_attention",
    "linear_attention", "linear_attention", "linear_attention", "full_attention"]
})";

struct PresetSource {
    Preset preset;
    const char* config_json;
    bool fp8_weights;  // the release stores its attention linears as FP8 blocks
};

const std::vector<PresetSource>& sources() {
    static const std::vector<PresetSource> list = {
        {{"deepseek-v4-flash", "DeepSeek-V4-Flash (deepseek_v4): layers 0-1 SWA, 2 CSA, 3 HCA by default",
          {0, 1, 2, 3}}, kDeepseekV4Flash, true},
        {{"deepseek-v4-pro", "DeepSeek-V4-Pro (deepseek_v4): layers 0-1 HCA, 2 CSA by default", {0, 1, 2}},
         kDeepseekV4Pro, true},
        {{"deepseek-v3.2", "DeepSeek-V3.2 (deepseek_v32): DSA full layers 0-1 by default", {0, 1}}, kDeepseekV32, true},
        {{"hy4", "Tencent Hy4-preview (hy_v4): layers 0-1 full, 2-3 shared by default", {0, 1, 2, 3}}, kHy4, false},
        {{"qwen3.8-flash-next", "Qwen3.8-Flash-Next (qwen4_exp): QSA layers 3 and 7 by default", {3, 7}},
         kQwenFlashNext, false},
    };
    return list;
}

const PresetSource* find_source(const std::string& name) {
    for (const PresetSource& s : sources())
        if (s.preset.name == name) return &s;
    return nullptr;
}

std::string preset_names() {
    std::string names;
    for (const PresetSource& s : sources()) names += (names.empty() ? "" : ", ") + s.preset.name;
    return names;
}

// A counter-based generator: value i of a tensor does not depend on thread scheduling.
float uniform_pm1(uint64_t seed, uint64_t i) {
    uint64_t z = seed + i * 0x9e3779b97f4a7c15ull;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    z ^= z >> 31;
    return static_cast<float>(static_cast<double>(z >> 11) * 0x1p-53 * 2.0 - 1.0);
}

struct OwnedTensor {
    std::string name;
    DType dtype;
    Shape shape;
    std::vector<uint8_t> bytes;
};

// Values of one tensor: norm weights near 1, sinks and position biases small, linears uniform with
// variance 1/fan_in (so that x·Wᵀ keeps activations of order one).
float value_scale(const std::string& name, const Shape& shape) {
    if (name.find("norm") != std::string::npos) return 0.1f;
    if (name.find("sink") != std::string::npos || name.find("ape") != std::string::npos) return 0.5f;
    const double fan_in = shape.size() == 2 ? static_cast<double>(shape[1]) : 1.0;
    return static_cast<float>(std::sqrt(3.0 / fan_in));
}

bool is_norm_weight(const std::string& name) {
    return name.find("norm.weight") != std::string::npos || name.find("layernorm.weight") != std::string::npos;
}

void generate(const AttentionTensor& t, bool fp8, uint64_t seed, std::vector<OwnedTensor>& out) {
    const int64_t n = shape_numel(t.shape).value_or(0);
    const float scale = value_scale(t.name, t.shape);
    const bool norm = is_norm_weight(t.name);
    // Gemma-style norms store w near 0 (applied as 1 + w); the others store w near 1. A small
    // offset around 1 is fine for both: the layer stays well conditioned.
    auto value = [&](int64_t i) { return (norm ? 1.0f : 0.0f) + scale * uniform_pm1(seed, static_cast<uint64_t>(i)); };
    if (fp8 && t.fp8_block && t.shape.size() == 2) {
        const int64_t rows = t.shape[0], cols = t.shape[1];
        const int64_t br = (rows + 127) / 128, bc = (cols + 127) / 128;
        OwnedTensor w{t.name, DType::f8_e4m3, t.shape, std::vector<uint8_t>(static_cast<size_t>(n))};
        OwnedTensor s{t.name.substr(0, t.name.size() - 6) + "scale", DType::f8_e8m0, {br, bc},
                      std::vector<uint8_t>(static_cast<size_t>(br * bc))};
        // One scale per 128×128 block: the amax of uniform values is `scale` up to rounding.
        const float block_scale = ue8m0_scale_for_amax(scale);
        for (int64_t b = 0; b < br * bc; ++b) s.bytes[static_cast<size_t>(b)] = ue8m0_from_pow2(block_scale);
        ThreadPool::global().parallel_for(rows, [&](int64_t r0, int64_t r1) {
            for (int64_t r = r0; r < r1; ++r)
                for (int64_t c = 0; c < cols; ++c)
                    w.bytes[static_cast<size_t>(r * cols + c)] = f32_to_fp8_e4m3(value(r * cols + c) / block_scale);
        }, 64);
        out.push_back(std::move(w));
        out.push_back(std::move(s));
        return;
    }
    const bool f32 = t.name.find("sink") != std::string::npos || t.name.find("ape") != std::string::npos;
    OwnedTensor w{t.name, f32 ? DType::f32 : DType::bf16, t.shape,
                  std::vector<uint8_t>(static_cast<size_t>(n) * (f32 ? 4 : 2))};
    ThreadPool::global().parallel_for(n, [&](int64_t i0, int64_t i1) {
        for (int64_t i = i0; i < i1; ++i) {
            if (f32) {
                const float v = value(i);
                std::memcpy(w.bytes.data() + i * 4, &v, 4);
            } else {
                const uint16_t v = f32_to_bf16(value(i));
                std::memcpy(w.bytes.data() + i * 2, &v, 2);
            }
        }
    }, 1 << 16);
    out.push_back(std::move(w));
}

}  // namespace

const std::vector<Preset>& presets() {
    static const std::vector<Preset> list = [] {
        std::vector<Preset> p;
        for (const PresetSource& s : sources()) p.push_back(s.preset);
        return p;
    }();
    return list;
}

Expected<ModelConfig> preset_config(const std::string& name) {
    const PresetSource* s = find_source(name);
    if (!s) return invalid_argument_error("unknown preset {} (known: {})", name, preset_names());
    return parse_model_config(s->config_json, "preset " + name);
}

Expected<ModelConfig> preset_config(const std::string& name, const nlohmann::json& overrides) {
    const PresetSource* s = find_source(name);
    if (!s) return invalid_argument_error("unknown preset {} (known: {})", name, preset_names());
    nlohmann::json j = nlohmann::json::parse(s->config_json);
    j.merge_patch(overrides);
    return parse_model_config(j.dump(), "preset " + name + " (modified)");
}

Expected<std::unique_ptr<Checkpoint>> preset_checkpoint(const std::string& name, const ModelConfig& config,
                                                        const std::vector<int64_t>& layers, uint64_t seed) {
    const PresetSource* s = find_source(name);
    if (!s) return invalid_argument_error("unknown preset {} (known: {})", name, preset_names());
    SIEVE_ASSIGN_OR_RETURN(AttentionLayout layout, attention_layout(config, NumericsProfile::deployed));
    const std::set<int64_t> wanted(layers.begin(), layers.end());
    std::vector<OwnedTensor> tensors;
    uint64_t tensor_seed = seed;
    for (const AttentionLayerLayout& l : layout.layers) {
        if (!wanted.count(l.layer)) continue;
        for (const AttentionTensor& t : l.tensors) generate(t, s->fp8_weights, ++tensor_seed * 0x100000001b3ull, tensors);
    }
    std::vector<SafetensorsWriteEntry> entries;
    for (const OwnedTensor& t : tensors) entries.push_back({t.name, t.dtype, t.shape, t.bytes});
    SIEVE_ASSIGN_OR_RETURN(std::vector<uint8_t> bytes, serialize_safetensors(entries));
    tensors.clear();
    SIEVE_ASSIGN_OR_RETURN(auto file, SafetensorsFile::from_bytes(std::move(bytes), "preset " + name));
    std::vector<std::unique_ptr<SafetensorsFile>> files;
    files.push_back(std::move(file));
    return Checkpoint::from_files("preset " + name, std::move(files));
}

}  // namespace sieve::cli
