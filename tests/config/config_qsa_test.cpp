// QSA: Qwen3.8-Flash-Next in its multimodal wrapper and as a text-only config, the hybrid layer
// schedule, RoPE and every validation rule of specs/qsa.md §2.2.
#include <cmath>

#include "config_test_util.h"

namespace sieve {
namespace {

using config_test::expect_error;
using config_test::parse_ok;
using config_test::patched;

// Qwen3.8-Flash-Next (qsa.md §2.1): the multimodal wrapper, text part under text_config; the
// released checkpoint names its QSA layers full_attention.
constexpr const char* kFlashNext = R"({
  "architectures": ["Qwen4ExpForConditionalGeneration"],
  "model_type": "qwen4_exp",
  "image_token_id": 248056,
  "video_token_id": 248057,
  "vision_config": {"model_type": "qwen4_exp_vision", "depth": 27, "hidden_size": 1152, "num_heads": 16,
                    "out_hidden_size": 2560},
  "text_config": {
    "model_type": "qwen4_exp_text",
    "hidden_size": 2560,
    "num_hidden_layers": 48,
    "num_attention_heads": 24,
    "num_key_value_heads": 2,
    "head_dim": 256,
    "rms_norm_eps": 1e-06,
    "max_position_embeddings": 262144,
    "attention_bias": false,
    "rope_parameters": {"rope_type": "default", "rope_theta": 10000000, "partial_rotary_factor": 0.25,
                        "mrope_interleaved": true, "mrope_section": [11, 11, 10]},
    "indexer_n_heads": 4,
    "indexer_kv_heads": 1,
    "indexer_head_dim": 128,
    "indexer_budget": 2048,
    "indexer_compress_ratio": 4,
    "mtp_num_hidden_layers": 1,
    "linear_num_key_heads": 16,
    "linear_num_value_heads": 32,
    "layer_types": [
      "linear_attention", "linear_attention", "linear_attention", "full_attention", "linear_attention",
      "linear_attention", "linear_attention", "full_attention", "linear_attention", "linear_attention",
      "linear_attention", "full_attention", "linear_attention", "linear_attention", "linear_attention",
      "full_attention", "linear_attention", "linear_attention", "linear_attention", "full_attention",
      "linear_attention", "linear_attention", "linear_attention", "full_attention", "linear_attention",
      "linear_attention", "linear_attention", "full_attention", "linear_attention", "linear_attention",
      "linear_attention", "full_attention", "linear_attention", "linear_attention", "linear_attention",
      "full_attention", "linear_attention", "linear_attention", "linear_attention", "full_attention",
      "linear_attention", "linear_attention", "linear_attention", "full_attention", "linear_attention",
      "linear_attention", "linear_attention", "full_attention"]
  }
})";

// The same text model as a text-only config (Qwen4ExpForCausalLM), schedule from the interval
// rule, θ and partial_rotary_factor as top-level keys (older layout).
constexpr const char* kFlashNextText = R"({
  "model_type": "qwen4_exp_text",
  "hidden_size": 2560,
  "num_hidden_layers": 48,
  "num_attention_heads": 24,
  "num_key_value_heads": 2,
  "head_dim": 256,
  "rms_norm_eps": 1e-06,
  "max_position_embeddings": 262144,
  "rope_theta": 10000000,
  "partial_rotary_factor": 0.25,
  "indexer_n_heads": 4,
  "indexer_kv_heads": 1,
  "indexer_head_dim": 128,
  "indexer_budget": 2048,
  "indexer_compress_ratio": 4,
  "mtp_num_hidden_layers": 1
})";

// A copy, so that `const auto& c = qsa(parse_ok(...))` extends the lifetime of what it binds.
QsaConfig qsa(const ModelConfig& config) {
    EXPECT_NE(config.qsa(), nullptr) << config.model_type;
    return config.qsa() ? *config.qsa() : QsaConfig{};
}

void expect_flash_next(const QsaConfig& c) {
    EXPECT_EQ(c.hidden_size, 2560);
    EXPECT_EQ(c.num_hidden_layers, 48);
    EXPECT_EQ(c.num_attention_heads, 24);
    EXPECT_EQ(c.num_key_value_heads, 2);
    EXPECT_EQ(c.head_dim, 256);
    EXPECT_DOUBLE_EQ(c.rms_norm_eps, 1e-6);
    EXPECT_EQ(c.max_position_embeddings, 262144);
    EXPECT_EQ(c.mtp_num_hidden_layers, 1);
    EXPECT_TRUE(c.has_indexer);
    EXPECT_EQ(c.indexer_n_heads, 4);
    EXPECT_EQ(c.indexer_kv_heads, 1);
    EXPECT_EQ(c.indexer_head_dim, 128);
    EXPECT_EQ(c.indexer_budget, 2048);
    EXPECT_EQ(c.indexer_compress_ratio, 4);
    // Derived (§2.1, §4.4–§4.7).
    EXPECT_EQ(c.rotary_dim, 64);
    EXPECT_EQ(c.gqa_group_size, 12);
    EXPECT_EQ(c.block_topk, 512);
    EXPECT_EQ(c.output_width, 2051);
    EXPECT_DOUBLE_EQ(c.softmax_scale, 1.0 / 16.0);
    EXPECT_DOUBLE_EQ(c.indexer_score_scale, 1.0 / std::sqrt(128.0));
    // §4.1/§4.2: θ 1e7, NeoX pairs on the first 64 dims, the same table on the index queries.
    for (const RopeConfig* rope : {&c.rope, &c.rope_indexer}) {
        EXPECT_EQ(rope->theta, 1.0e7);
        EXPECT_EQ(rope->rotated_dims, 64);
        EXPECT_EQ(rope->slice, RopeConfigSlice::first);
        EXPECT_EQ(rope->pairing, RopeConfigPairing::neox);
        EXPECT_FALSE(rope->yarn.has_value());
    }
    EXPECT_EQ(c.mrope_section, (std::vector<int64_t>{11, 11, 10}));
    // 36 GatedDeltaNet layers and 12 QSA layers: 3, 7, ..., 47.
    ASSERT_EQ(c.layers.size(), 48u);
    EXPECT_EQ(c.num_qsa_layers, 12);
    for (size_t i = 0; i < c.layers.size(); ++i) {
        SCOPED_TRACE(i);
        EXPECT_EQ(c.layers[i], (i + 1) % 4 == 0 ? QsaLayerKind::qsa : QsaLayerKind::linear_attention);
    }
}

TEST(ConfigQsa, FlashNextMultimodalWrapper) {
    ModelConfig config = parse_ok(kFlashNext);
    EXPECT_EQ(config.model_type, "qwen4_exp");
    const QsaConfig& c = qsa(config);
    EXPECT_TRUE(c.from_text_config);
    expect_flash_next(c);
    EXPECT_STREQ(qsa_layer_kind_name(c.layers[0]), "linear_attention");
    EXPECT_STREQ(qsa_layer_kind_name(c.layers[3]), "qsa");
}

TEST(ConfigQsa, FlashNextTextOnly) {
    ModelConfig config = parse_ok(kFlashNextText);
    EXPECT_EQ(config.model_type, "qwen4_exp_text");
    const QsaConfig& c = qsa(config);
    EXPECT_FALSE(c.from_text_config);
    expect_flash_next(c);
    // A flat qwen4_exp config (no text_config) reads the same fields from the top level.
    const QsaConfig& flat = qsa(parse_ok(patched(kFlashNextText, R"({"model_type": "qwen4_exp"})")));
    EXPECT_FALSE(flat.from_text_config);
    expect_flash_next(flat);
}

TEST(ConfigQsa, LayerTypeNamesAndInterval) {
    std::string json = patched(kFlashNextText, R"({"num_hidden_layers": 4,
        "layer_types": ["linear_attention", "qwen_sparse_attention", "linear_attention", "full_attention"]})");
    const QsaConfig& c = qsa(parse_ok(json));
    EXPECT_EQ(c.layers, (std::vector<QsaLayerKind>{QsaLayerKind::linear_attention, QsaLayerKind::qsa,
                                                   QsaLayerKind::linear_attention, QsaLayerKind::qsa}));
    EXPECT_EQ(c.num_qsa_layers, 2);
    const QsaConfig& interval =
        qsa(parse_ok(patched(kFlashNextText, R"({"num_hidden_layers": 6, "full_attention_interval": 3})")));
    EXPECT_EQ(interval.layers, (std::vector<QsaLayerKind>{QsaLayerKind::linear_attention, QsaLayerKind::linear_attention,
                                                          QsaLayerKind::qsa, QsaLayerKind::linear_attention,
                                                          QsaLayerKind::linear_attention, QsaLayerKind::qsa}));
}

TEST(ConfigQsa, RopeDefaultsAndGeneralSizes) {
    // Absent partial_rotary_factor = full rotary; absent mrope_section = [11, 11, 10] (§2.1).
    std::string json = patched(kFlashNext, R"({"text_config": {"head_dim": 64, "num_attention_heads": 8,
        "num_key_value_heads": 4, "indexer_budget": 96, "indexer_compress_ratio": 3,
        "rope_parameters": {"partial_rotary_factor": null, "mrope_section": null}}})");
    const QsaConfig& c = qsa(parse_ok(json));
    EXPECT_EQ(c.rotary_dim, 64);
    EXPECT_EQ(c.rope.rotated_dims, 64);
    EXPECT_EQ(c.rope_indexer.rotated_dims, 64);  // not rescaled to the index head dim (§4.2)
    EXPECT_EQ(c.gqa_group_size, 2);
    EXPECT_EQ(c.block_topk, 32);
    EXPECT_EQ(c.output_width, 98);
    EXPECT_DOUBLE_EQ(c.softmax_scale, 0.125);
    EXPECT_EQ(c.mrope_section, (std::vector<int64_t>{11, 11, 10}));
}

TEST(ConfigQsa, NoIndexerIsFineWithoutQsaLayers) {
    std::string json = patched(kFlashNextText, R"({"num_hidden_layers": 2, "layer_types": ["linear_attention",
        "linear_attention"], "mtp_num_hidden_layers": 0, "indexer_n_heads": null, "indexer_kv_heads": null,
        "indexer_head_dim": null, "indexer_budget": null, "indexer_compress_ratio": null})");
    const QsaConfig& c = qsa(parse_ok(json));
    EXPECT_FALSE(c.has_indexer);
    EXPECT_EQ(c.num_qsa_layers, 0);
}

// indexer_budget counts positions of one request: above max_position_embeddings it is refused, naming the
// field (inside text_config) and both values; up to it it is accepted.
TEST(ConfigQsa, IndexerBudgetWithinTheContext) {
    expect_error(patched(kFlashNext, R"({"text_config": {"indexer_budget": 262148}})"), StatusCode::invalid_argument,
                 {"field \"text_config.indexer_budget\" = 262148 exceeds field "
                  "\"text_config.max_position_embeddings\" = 262144"});
    expect_error(patched(kFlashNext, R"({"text_config": {"indexer_budget": 2147483647, "indexer_compress_ratio": 1}})"),
                 StatusCode::invalid_argument, {"\"text_config.indexer_budget\" = 2147483647"});
    const ModelConfig c = parse_ok(patched(kFlashNext, R"({"text_config": {"indexer_budget": 262144}})"));
    ASSERT_NE(c.qsa(), nullptr);
    EXPECT_EQ(c.qsa()->indexer_budget, 262144);
}

TEST(ConfigQsa, Errors) {
    expect_error(patched(kFlashNext, R"({"text_config": {"indexer_budget": null}})"), StatusCode::not_found,
                 {"missing required fields: text_config.indexer_budget", "given: text_config.indexer_n_heads"});
    expect_error(patched(kFlashNext, R"({"text_config": {"indexer_n_heads": null, "indexer_kv_heads": null,
                 "indexer_head_dim": null, "indexer_budget": null, "indexer_compress_ratio": null}})"),
                 StatusCode::invalid_argument, {"12 backbone: [3, 7, 11", "1 MTP", "indexer"});
    expect_error(patched(kFlashNext, R"({"text_config": {"indexer_kv_heads": 2}})"), StatusCode::invalid_argument,
                 {"field \"text_config.indexer_kv_heads\"", "2"});
    expect_error(patched(kFlashNext, R"({"text_config": {"indexer_budget": 2050}})"), StatusCode::invalid_argument,
                 {"\"text_config.indexer_budget\" = 2050", "\"text_config.indexer_compress_ratio\" = 4"});
    expect_error(patched(kFlashNext, R"({"text_config": {"indexer_n_heads": 0}})"), StatusCode::invalid_argument,
                 {"field \"text_config.indexer_n_heads\": must be positive, got 0"});
    expect_error(patched(kFlashNext, R"({"text_config": {"indexer_compress_ratio": -4}})"),
                 StatusCode::invalid_argument, {"field \"text_config.indexer_compress_ratio\"", "-4"});
    expect_error(patched(kFlashNext, R"({"text_config": {"rope_parameters": {"partial_rotary_factor": 1.0}}})"),
                 StatusCode::invalid_argument, {"= 256 exceeds field \"text_config.indexer_head_dim\" = 128"});
    expect_error(patched(kFlashNext, R"({"text_config": {"rope_parameters": {"partial_rotary_factor": 0.0}}})"),
                 StatusCode::invalid_argument, {"field \"text_config.rope_parameters.partial_rotary_factor\""});
    expect_error(patched(kFlashNext, R"({"text_config": {"rope_parameters": {"rope_type": "yarn"}}})"),
                 StatusCode::unsupported, {"field \"text_config.rope_parameters.rope_type\"", "\"yarn\""});
    expect_error(patched(kFlashNextText, R"({"rope_scaling": {"type": "linear", "factor": 2}})"),
                 StatusCode::unsupported, {"field \"rope_scaling\""});
    expect_error(patched(kFlashNext, R"({"text_config": {"rope_parameters": {"rope_theta": null}}})"),
                 StatusCode::not_found, {"text_config.rope_theta", "text_config.rope_parameters.rope_theta"});
    expect_error(patched(kFlashNextText, R"({"num_hidden_layers": 2, "layer_types": ["linear_attention",
                 "sliding_attention"]})"),
                 StatusCode::invalid_argument, {"field \"layer_types[1]\"", "\"sliding_attention\""});
    expect_error(patched(kFlashNextText, R"({"layer_types": ["linear_attention"]})"), StatusCode::invalid_argument,
                 {"field \"layer_types\": 1 entries, expected num_hidden_layers = 48"});
    expect_error(patched(kFlashNextText, R"({"full_attention_interval": 0})"), StatusCode::invalid_argument,
                 {"field \"full_attention_interval\""});
    expect_error(patched(kFlashNextText, R"({"num_key_value_heads": 5})"), StatusCode::invalid_argument,
                 {"\"num_attention_heads\" = 24", "\"num_key_value_heads\" = 5"});
    expect_error(patched(kFlashNextText, R"({"attention_bias": true})"), StatusCode::unsupported,
                 {"field \"attention_bias\""});
    // Attention variants QSA does not have (qsa.md §8); their neutral values load.
    expect_error(patched(kFlashNextText, R"({"is_causal": false})"), StatusCode::unsupported,
                 {"field \"is_causal\"", "causal"});
    expect_error(patched(kFlashNextText, R"({"use_sliding_window": true, "sliding_window": 4096})"),
                 StatusCode::unsupported, {"field \"use_sliding_window\""});
    expect_error(patched(kFlashNextText, R"({"dual_chunk_attention_config": {"chunk_size": 8192}})"),
                 StatusCode::unsupported, {"field \"dual_chunk_attention_config\""});
    parse_ok(patched(kFlashNextText, R"({"is_causal": true, "use_sliding_window": false, "sliding_window": null,
                                         "dual_chunk_attention_config": null})"));
    expect_error(patched(kFlashNext, R"({"text_config": {"model_type": "qwen3_next"}})"),
                 StatusCode::invalid_argument, {"field \"text_config.model_type\"", "\"qwen3_next\""});
    expect_error(patched(kFlashNext, R"({"text_config": [1, 2]})"), StatusCode::invalid_argument,
                 {"field \"text_config\"", "expected an object"});
    expect_error(patched(kFlashNext, R"({"text_config": {"head_dim": null}})"), StatusCode::not_found,
                 {"field \"text_config.head_dim\""});
}

}  // namespace
}  // namespace sieve
