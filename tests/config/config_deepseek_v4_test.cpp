// DeepSeek-V4: the released configs (Flash, Pro) in both layouts, the small transformers test
// config, and every rule of specs/deepseek_v4.md §1.4 and "Decisions for sieve".
#include <cmath>

#include "config_test_util.h"

namespace sieve {
namespace {

using config_test::expect_error;
using config_test::parse_ok;
using config_test::patched;

// V4-Flash config.json, original release layout (deepseek_v4.md §1.1).
constexpr const char* kFlash = R"({
  "architectures": ["DeepseekV4ForCausalLM"],
  "model_type": "deepseek_v4",
  "vocab_size": 129280,
  "hidden_size": 4096,
  "num_hidden_layers": 43,
  "num_attention_heads": 64,
  "num_key_value_heads": 1,
  "head_dim": 512,
  "qk_rope_head_dim": 64,
  "q_lora_rank": 1024,
  "o_lora_rank": 1024,
  "o_groups": 8,
  "sliding_window": 128,
  "index_n_heads": 64,
  "index_head_dim": 128,
  "index_topk": 512,
  "rope_theta": 10000,
  "compress_rope_theta": 160000,
  "rope_scaling": {"type": "yarn", "factor": 16, "original_max_position_embeddings": 65536,
                   "beta_fast": 32, "beta_slow": 1},
  "rms_norm_eps": 1e-06,
  "max_position_embeddings": 1048576,
  "num_nextn_predict_layers": 1,
  "compress_ratios": [0, 0, 4, 128, 4, 128, 4, 128, 4, 128, 4, 128, 4, 128, 4, 128, 4, 128, 4, 128, 4, 128,
                      4, 128, 4, 128, 4, 128, 4, 128, 4, 128, 4, 128, 4, 128, 4, 128, 4, 128, 4, 128, 4, 0],
  "quantization_config": {"quant_method": "fp8", "fmt": "e4m3", "weight_block_size": [128, 128],
                          "scale_fmt": "ue8m0", "activation_scheme": "dynamic"},
  "torch_dtype": "bfloat16"
})";

// V4-Pro config.json, original release layout.
constexpr const char* kProOriginal = R"({
  "model_type": "deepseek_v4",
  "hidden_size": 7168,
  "num_hidden_layers": 61,
  "num_attention_heads": 128,
  "num_key_value_heads": 1,
  "head_dim": 512,
  "qk_rope_head_dim": 64,
  "q_lora_rank": 1536,
  "o_lora_rank": 1024,
  "o_groups": 16,
  "sliding_window": 128,
  "index_n_heads": 64,
  "index_head_dim": 128,
  "index_topk": 1024,
  "rope_theta": 10000.0,
  "compress_rope_theta": 160000.0,
  "rope_scaling": {"type": "yarn", "factor": 16.0, "original_max_position_embeddings": 65536,
                   "beta_fast": 32, "beta_slow": 1},
  "rms_norm_eps": 1e-06,
  "max_position_embeddings": 1048576,
  "num_nextn_predict_layers": 1,
  "compress_ratios": [128, 128, 4, 128, 4, 128, 4, 128, 4, 128, 4, 128, 4, 128, 4, 128, 4, 128, 4, 128, 4,
                      128, 4, 128, 4, 128, 4, 128, 4, 128, 4, 128, 4, 128, 4, 128, 4, 128, 4, 128, 4, 128, 4,
                      128, 4, 128, 4, 128, 4, 128, 4, 128, 4, 128, 4, 128, 4, 128, 4, 128, 4, 0]
})";

// The same model in the layout transformers' save_pretrained writes (§1.4).
constexpr const char* kProTransformers = R"({
  "model_type": "deepseek_v4",
  "hidden_size": 7168,
  "num_hidden_layers": 61,
  "num_attention_heads": 128,
  "num_key_value_heads": 1,
  "head_dim": 512,
  "qk_rope_head_dim": 64,
  "partial_rotary_factor": 0.125,
  "q_lora_rank": 1536,
  "o_lora_rank": 1024,
  "o_groups": 16,
  "sliding_window": 128,
  "index_n_heads": 64,
  "index_head_dim": 128,
  "index_topk": 1024,
  "rope_theta": 10000.0,
  "compress_rope_theta": 160000.0,
  "rope_parameters": {
    "main": {"rope_type": "default", "rope_theta": 10000.0, "partial_rotary_factor": 0.125},
    "compress": {"rope_type": "yarn", "rope_theta": 160000.0, "factor": 16.0,
                 "original_max_position_embeddings": 65536, "beta_fast": 32, "beta_slow": 1,
                 "attention_factor": 1.0, "partial_rotary_factor": 0.125}
  },
  "rms_norm_eps": 1e-06,
  "max_position_embeddings": 1048576,
  "num_nextn_predict_layers": 1,
  "compress_rates": {"compressed_sparse_attention": 4, "heavily_compressed_attention": 128},
  "layer_types": [
    "heavily_compressed_attention", "heavily_compressed_attention", "compressed_sparse_attention",
    "heavily_compressed_attention", "compressed_sparse_attention", "heavily_compressed_attention",
    "compressed_sparse_attention", "heavily_compressed_attention", "compressed_sparse_attention",
    "heavily_compressed_attention", "compressed_sparse_attention", "heavily_compressed_attention",
    "compressed_sparse_attention", "heavily_compressed_attention", "compressed_sparse_attention",
    "heavily_compressed_attention", "compressed_sparse_attention", "heavily_compressed_attention",
    "compressed_sparse_attention", "heavily_compressed_attention", "compressed_sparse_attention",
    "heavily_compressed_attention", "compressed_sparse_attention", "heavily_compressed_attention",
    "compressed_sparse_attention", "heavily_compressed_attention", "compressed_sparse_attention",
    "heavily_compressed_attention", "compressed_sparse_attention", "heavily_compressed_attention",
    "compressed_sparse_attention", "heavily_compressed_attention", "compressed_sparse_attention",
    "heavily_compressed_attention", "compressed_sparse_attention", "heavily_compressed_attention",
    "compressed_sparse_attention", "heavily_compressed_attention", "compressed_sparse_attention",
    "heavily_compressed_attention", "compressed_sparse_attention", "heavily_compressed_attention",
    "compressed_sparse_attention", "heavily_compressed_attention", "compressed_sparse_attention",
    "heavily_compressed_attention", "compressed_sparse_attention", "heavily_compressed_attention",
    "compressed_sparse_attention", "heavily_compressed_attention", "compressed_sparse_attention",
    "heavily_compressed_attention", "compressed_sparse_attention", "heavily_compressed_attention",
    "compressed_sparse_attention", "heavily_compressed_attention", "compressed_sparse_attention",
    "heavily_compressed_attention", "compressed_sparse_attention", "heavily_compressed_attention",
    "compressed_sparse_attention"]
})";

// The small model of deepseek_v4.md §9.1 as its constructor arguments would be saved: a flat
// rope_parameters dict (the compress table), one layer of each kind, HCA ratio 8.
constexpr const char* kTiny = R"({
  "model_type": "deepseek_v4",
  "hidden_size": 64, "num_attention_heads": 4, "num_key_value_heads": 1, "num_hidden_layers": 3,
  "head_dim": 32, "partial_rotary_factor": 0.25, "q_lora_rank": 32, "o_groups": 2, "o_lora_rank": 16,
  "layer_types": ["sliding_attention", "compressed_sparse_attention", "heavily_compressed_attention"],
  "compress_rates": {"compressed_sparse_attention": 4, "heavily_compressed_attention": 8},
  "sliding_window": 8, "index_n_heads": 2, "index_head_dim": 16, "index_topk": 2,
  "num_nextn_predict_layers": 0, "rope_theta": 10000.0, "compress_rope_theta": 160000.0,
  "max_position_embeddings": 1024, "rms_norm_eps": 1e-6,
  "rope_parameters": {"rope_type": "yarn", "factor": 16, "original_max_position_embeddings": 64,
                      "beta_fast": 32, "beta_slow": 1}
})";

// A copy, so that `const auto& c = v4(parse_ok(...))` extends the lifetime of what it binds.
DeepseekV4Config v4(const ModelConfig& config) {
    EXPECT_NE(config.deepseek_v4(), nullptr) << config.model_type;
    return config.deepseek_v4() ? *config.deepseek_v4() : DeepseekV4Config{};
}

int count_kind(const DeepseekV4Config& c, DeepseekV4LayerKind kind) {
    int n = 0;
    for (const DeepseekV4Layer& layer : c.layers) n += layer.kind == kind ? 1 : 0;
    return n;
}

void expect_rope_eq(const RopeConfig& a, const RopeConfig& b) {
    EXPECT_EQ(a.theta, b.theta);
    EXPECT_EQ(a.rotated_dims, b.rotated_dims);
    EXPECT_EQ(a.slice, b.slice);
    EXPECT_EQ(a.pairing, b.pairing);
    ASSERT_EQ(a.yarn.has_value(), b.yarn.has_value());
    if (a.yarn) {
        EXPECT_EQ(a.yarn->factor, b.yarn->factor);
        EXPECT_EQ(a.yarn->original_max_position_embeddings, b.yarn->original_max_position_embeddings);
        EXPECT_EQ(a.yarn->beta_fast, b.yarn->beta_fast);
        EXPECT_EQ(a.yarn->beta_slow, b.yarn->beta_slow);
        EXPECT_EQ(a.yarn->truncate, b.yarn->truncate);
        EXPECT_EQ(a.yarn->attention_factor, b.yarn->attention_factor);
    }
}

TEST(ConfigDeepseekV4, FlashFieldsAndDerivedDims) {
    ModelConfig config = parse_ok(kFlash);
    EXPECT_EQ(config.model_type, "deepseek_v4");
    const DeepseekV4Config& c = v4(config);
    EXPECT_EQ(c.layout, DeepseekV4ConfigLayout::original);
    EXPECT_EQ(c.hidden_size, 4096);
    EXPECT_EQ(c.num_hidden_layers, 43);
    EXPECT_EQ(c.num_attention_heads, 64);
    EXPECT_EQ(c.num_key_value_heads, 1);
    EXPECT_EQ(c.head_dim, 512);
    EXPECT_EQ(c.q_lora_rank, 1024);
    EXPECT_EQ(c.o_lora_rank, 1024);
    EXPECT_EQ(c.o_groups, 8);
    EXPECT_EQ(c.sliding_window, 128);
    EXPECT_EQ(c.index_n_heads, 64);
    EXPECT_EQ(c.index_head_dim, 128);
    EXPECT_EQ(c.index_topk, 512);
    EXPECT_EQ(c.max_position_embeddings, 1048576);
    EXPECT_EQ(c.num_nextn_predict_layers, 1);
    EXPECT_DOUBLE_EQ(c.rms_norm_eps, 1e-6);
    // §1.2
    EXPECT_EQ(c.rope_head_dim, 64);
    EXPECT_EQ(c.nope_head_dim, 448);
    EXPECT_EQ(c.heads_per_group, 8);
    EXPECT_DOUBLE_EQ(c.softmax_scale, 1.0 / std::sqrt(512.0));
    EXPECT_DOUBLE_EQ(c.index_score_scale, std::pow(128.0, -0.5) * std::pow(64.0, -0.5));
}

TEST(ConfigDeepseekV4, FlashLayerSchedule) {
    const DeepseekV4Config& c = v4(parse_ok(kFlash));
    ASSERT_EQ(c.layers.size(), 43u);
    // §1.1: layers 0,1 SWA-only; even 2..42 CSA (21); odd 3..41 HCA (20); MTP = SWA.
    EXPECT_EQ(count_kind(c, DeepseekV4LayerKind::swa), 2);
    EXPECT_EQ(count_kind(c, DeepseekV4LayerKind::csa), 21);
    EXPECT_EQ(count_kind(c, DeepseekV4LayerKind::hca), 20);
    for (size_t i = 0; i < c.layers.size(); ++i) {
        const DeepseekV4Layer& layer = c.layers[i];
        SCOPED_TRACE(i);
        if (i < 2) {
            EXPECT_EQ(layer.kind, DeepseekV4LayerKind::swa);
            EXPECT_EQ(layer.compress_ratio, 0);
            EXPECT_FALSE(layer.has_indexer);
            EXPECT_FALSE(layer.compressor_overlap);
            expect_rope_eq(layer.rope, c.rope_main);
        } else if (i % 2 == 0) {
            EXPECT_EQ(layer.kind, DeepseekV4LayerKind::csa);
            EXPECT_EQ(layer.compress_ratio, 4);
            EXPECT_TRUE(layer.has_indexer);
            EXPECT_TRUE(layer.compressor_overlap);
            expect_rope_eq(layer.rope, c.rope_compress);
        } else {
            EXPECT_EQ(layer.kind, DeepseekV4LayerKind::hca);
            EXPECT_EQ(layer.compress_ratio, 128);
            EXPECT_FALSE(layer.has_indexer);
            EXPECT_FALSE(layer.compressor_overlap);
            expect_rope_eq(layer.rope, c.rope_compress);
        }
    }
    ASSERT_EQ(c.mtp_layers.size(), 1u);
    EXPECT_EQ(c.mtp_layers[0].kind, DeepseekV4LayerKind::swa);
    expect_rope_eq(c.mtp_layers[0].rope, c.rope_main);
    EXPECT_STREQ(deepseek_v4_layer_kind_name(c.layers[2].kind), "csa");
}

TEST(ConfigDeepseekV4, FlashRopeTables) {
    const DeepseekV4Config& c = v4(parse_ok(kFlash));
    // §1.3: main = rope_theta, no YaRN; compress = compress_rope_theta with YaRN; last 64 dims, GPT-J pairs.
    EXPECT_EQ(c.rope_main.theta, 10000.0);
    EXPECT_FALSE(c.rope_main.yarn.has_value());
    EXPECT_EQ(c.rope_compress.theta, 160000.0);
    for (const RopeConfig* rope : {&c.rope_main, &c.rope_compress}) {
        EXPECT_EQ(rope->rotated_dims, 64);
        EXPECT_EQ(rope->slice, RopeConfigSlice::last);
        EXPECT_EQ(rope->pairing, RopeConfigPairing::interleaved);
    }
    ASSERT_TRUE(c.rope_compress.yarn.has_value());
    const RopeYarnConfig& y = *c.rope_compress.yarn;
    EXPECT_EQ(y.factor, 16.0);
    EXPECT_EQ(y.original_max_position_embeddings, 65536);
    EXPECT_EQ(y.beta_fast, 32.0);
    EXPECT_EQ(y.beta_slow, 1.0);
    EXPECT_TRUE(y.truncate);
    // §1.4: cos/sin not scaled in the legacy layout.
    EXPECT_EQ(y.attention_factor, 1.0);
    // §2.3: base 160000 → low = 15, high = 25.
    RopeConfigYarnRange range = rope_config_yarn_range(c.rope_compress);
    EXPECT_EQ(range.low, 15.0);
    EXPECT_EQ(range.high, 25.0);
}

TEST(ConfigDeepseekV4, ProOriginalLayout) {
    const DeepseekV4Config& c = v4(parse_ok(kProOriginal));
    EXPECT_EQ(c.hidden_size, 7168);
    EXPECT_EQ(c.num_attention_heads, 128);
    EXPECT_EQ(c.q_lora_rank, 1536);
    EXPECT_EQ(c.o_groups, 16);
    EXPECT_EQ(c.heads_per_group, 8);
    EXPECT_EQ(c.index_topk, 1024);
    ASSERT_EQ(c.layers.size(), 61u);
    // §1.1: layers 0,1 HCA; even 2..60 CSA (30); odd 3..59 HCA (29 + 2 = 31); no SWA-only backbone layer.
    EXPECT_EQ(count_kind(c, DeepseekV4LayerKind::swa), 0);
    EXPECT_EQ(count_kind(c, DeepseekV4LayerKind::csa), 30);
    EXPECT_EQ(count_kind(c, DeepseekV4LayerKind::hca), 31);
    EXPECT_EQ(c.layers[0].kind, DeepseekV4LayerKind::hca);
    EXPECT_EQ(c.layers[1].kind, DeepseekV4LayerKind::hca);
    EXPECT_EQ(c.layers[60].kind, DeepseekV4LayerKind::csa);
    ASSERT_EQ(c.mtp_layers.size(), 1u);
    EXPECT_EQ(c.mtp_layers[0].kind, DeepseekV4LayerKind::swa);
}

TEST(ConfigDeepseekV4, ProBothLayoutsAgree) {
    const DeepseekV4Config a = v4(parse_ok(kProOriginal));
    const DeepseekV4Config b = v4(parse_ok(kProTransformers));
    EXPECT_EQ(a.layout, DeepseekV4ConfigLayout::original);
    EXPECT_EQ(b.layout, DeepseekV4ConfigLayout::transformers);
    EXPECT_EQ(b.rope_head_dim, 64);
    ASSERT_EQ(a.layers.size(), b.layers.size());
    for (size_t i = 0; i < a.layers.size(); ++i) {
        SCOPED_TRACE(i);
        EXPECT_EQ(a.layers[i].kind, b.layers[i].kind);
        EXPECT_EQ(a.layers[i].compress_ratio, b.layers[i].compress_ratio);
        EXPECT_EQ(a.layers[i].has_indexer, b.layers[i].has_indexer);
        expect_rope_eq(a.layers[i].rope, b.layers[i].rope);
    }
    ASSERT_EQ(a.mtp_layers.size(), b.mtp_layers.size());
    expect_rope_eq(a.rope_main, b.rope_main);
    expect_rope_eq(a.rope_compress, b.rope_compress);
    EXPECT_EQ(a.softmax_scale, b.softmax_scale);
}

TEST(ConfigDeepseekV4, NestedCompressTableWithoutAttentionFactorUsesYarnDefault) {
    // §1.4: transformers then scales cos/sin by 0.1·ln(factor) + 1 ≈ 1.277 for factor 16.
    std::string json = patched(kProTransformers, R"({"rope_parameters": {"compress": {"attention_factor": null}}})");
    const DeepseekV4Config& c = v4(parse_ok(json));
    ASSERT_TRUE(c.rope_compress.yarn.has_value());
    EXPECT_DOUBLE_EQ(c.rope_compress.yarn->attention_factor, 0.1 * std::log(16.0) + 1.0);
    EXPECT_NEAR(c.rope_compress.yarn->attention_factor, 1.277, 1e-3);
    // The main table stays plain and the layers carry the compress table.
    EXPECT_FALSE(c.rope_main.yarn.has_value());
    EXPECT_DOUBLE_EQ(c.layers[2].rope.yarn->attention_factor, c.rope_compress.yarn->attention_factor);
}

TEST(ConfigDeepseekV4, NestedTablesTakeTheirOwnTheta) {
    std::string json = patched(kProTransformers, R"({"rope_theta": 1.0e9, "compress_rope_theta": 2.0e9,
        "rope_parameters": {"main": {"rope_theta": 20000}, "compress": {"rope_theta": 40000}}})");
    const DeepseekV4Config& c = v4(parse_ok(json));
    EXPECT_EQ(c.rope_main.theta, 20000.0);
    EXPECT_EQ(c.rope_compress.theta, 40000.0);
}

TEST(ConfigDeepseekV4, SmallTransformersConfig) {
    const DeepseekV4Config& c = v4(parse_ok(kTiny));
    EXPECT_EQ(c.layout, DeepseekV4ConfigLayout::transformers);
    EXPECT_EQ(c.rope_head_dim, 8);  // int(32 · 0.25)
    EXPECT_EQ(c.nope_head_dim, 24);
    EXPECT_EQ(c.heads_per_group, 2);
    ASSERT_EQ(c.layers.size(), 3u);
    EXPECT_EQ(c.layers[0].kind, DeepseekV4LayerKind::swa);
    EXPECT_EQ(c.layers[1].kind, DeepseekV4LayerKind::csa);
    EXPECT_EQ(c.layers[1].compress_ratio, 4);
    EXPECT_EQ(c.layers[2].kind, DeepseekV4LayerKind::hca);
    EXPECT_EQ(c.layers[2].compress_ratio, 8);
    EXPECT_TRUE(c.mtp_layers.empty());
    // §9.1: the flat rope_parameters become the compress table, θ = compress_rope_theta,
    // attention_factor 1.0; the main table is plain RoPE with θ = rope_theta.
    EXPECT_EQ(c.rope_main.theta, 10000.0);
    EXPECT_FALSE(c.rope_main.yarn.has_value());
    EXPECT_EQ(c.rope_compress.theta, 160000.0);
    ASSERT_TRUE(c.rope_compress.yarn.has_value());
    EXPECT_EQ(c.rope_compress.yarn->factor, 16.0);
    EXPECT_EQ(c.rope_compress.yarn->original_max_position_embeddings, 64);
    EXPECT_EQ(c.rope_compress.yarn->attention_factor, 1.0);
    expect_rope_eq(c.layers[0].rope, c.rope_main);
    expect_rope_eq(c.layers[2].rope, c.rope_compress);
    // §2.3: small D and L0 → low = 0 and a ramp over one or two indices (corr(32) < 0, corr(1) ≈ 0.77).
    RopeConfigYarnRange range = rope_config_yarn_range(c.rope_compress);
    EXPECT_EQ(range.low, 0.0);
    EXPECT_EQ(range.high, 1.0);
}

TEST(ConfigDeepseekV4, LayerTypesWinOverCompressRatios) {
    std::string json = patched(kTiny, R"({"compress_ratios": [128, 128, 0, 0]})");
    const DeepseekV4Config& c = v4(parse_ok(json));
    EXPECT_EQ(c.layers[0].kind, DeepseekV4LayerKind::swa);
    EXPECT_EQ(c.layers[2].compress_ratio, 8);
}

TEST(ConfigDeepseekV4, CompressRateDefaultsAndLegacyOverrides) {
    const DeepseekV4Config& defaults = v4(parse_ok(patched(kTiny, R"({"compress_rates": null})")));
    EXPECT_EQ(defaults.layers[1].compress_ratio, 4);
    EXPECT_EQ(defaults.layers[2].compress_ratio, 128);
    const DeepseekV4Config& legacy =
        v4(parse_ok(patched(kTiny, R"({"compress_rate_csa": 8, "compress_rate_hca": 16})")));
    EXPECT_EQ(legacy.layers[1].compress_ratio, 8);
    EXPECT_EQ(legacy.layers[1].kind, DeepseekV4LayerKind::csa);
    EXPECT_EQ(legacy.layers[2].compress_ratio, 16);
}

TEST(ConfigDeepseekV4, OtherCompressRatioIsHca) {
    // "Decisions for sieve": any m > 0 other than 4 is an HCA layer of ratio m.
    std::string json = patched(kFlash, R"({"num_hidden_layers": 3, "compress_ratios": [0, 4, 16, 0]})");
    const DeepseekV4Config& c = v4(parse_ok(json));
    ASSERT_EQ(c.layers.size(), 3u);
    EXPECT_EQ(c.layers[2].kind, DeepseekV4LayerKind::hca);
    EXPECT_EQ(c.layers[2].compress_ratio, 16);
    EXPECT_FALSE(c.layers[2].compressor_overlap);
}

TEST(ConfigDeepseekV4, CompressRatiosWithoutMtpEntry) {
    std::string ok = patched(kFlash, R"({"num_hidden_layers": 2, "num_nextn_predict_layers": 0,
                                         "compress_ratios": [0, 4]})");
    EXPECT_EQ(v4(parse_ok(ok)).layers.size(), 2u);
    EXPECT_TRUE(v4(parse_ok(ok)).mtp_layers.empty());
    std::string bad = patched(kFlash, R"({"num_hidden_layers": 2, "compress_ratios": [0, 4]})");
    expect_error(bad, StatusCode::invalid_argument,
                 {"field \"compress_ratios\"", "2 entries", "expected num_hidden_layers + 1 = 2 + 1"});
}

TEST(ConfigDeepseekV4, RotatedWidthRules) {
    // §1.4: partial_rotary_factor wins, then qk_rope_head_dim, then head_dim · 64/512.
    EXPECT_EQ(v4(parse_ok(patched(kFlash, R"({"partial_rotary_factor": 0.25})"))).rope_head_dim, 128);
    EXPECT_EQ(v4(parse_ok(patched(kFlash, R"({"qk_rope_head_dim": 32})"))).rope_head_dim, 32);
    const DeepseekV4Config& fallback =
        v4(parse_ok(patched(kFlash, R"({"qk_rope_head_dim": null, "head_dim": 256})")));
    EXPECT_EQ(fallback.rope_head_dim, 32);
    EXPECT_EQ(fallback.rope_compress.rotated_dims, 32);
    EXPECT_EQ(fallback.layers[3].rope.rotated_dims, 32);
}

TEST(ConfigDeepseekV4, YarnFactorFallsBackToLengthRatio) {
    std::string json = patched(kFlash, R"({"max_position_embeddings": 262144,
                                           "rope_scaling": {"factor": null}})");
    const DeepseekV4Config& c = v4(parse_ok(json));
    EXPECT_EQ(c.rope_compress.yarn->factor, 4.0);  // 262144 / 65536
}

TEST(ConfigDeepseekV4, RopeScalingWithRopeTypeKey) {
    std::string json = patched(kFlash, R"({"rope_scaling": {"type": null, "rope_type": "yarn"}})");
    EXPECT_TRUE(v4(parse_ok(json)).rope_compress.yarn.has_value());
    std::string plain = patched(kFlash, R"({"rope_scaling": null})");
    const DeepseekV4Config& c = v4(parse_ok(plain));
    EXPECT_FALSE(c.rope_compress.yarn.has_value());
    EXPECT_EQ(c.rope_compress.theta, 160000.0);
}

// sliding_window (tokens), index_topk (compressed entries) and every compress ratio count positions of one
// request: above max_position_embeddings each is refused, naming the field and both values (before:
// accepted, and a step sized its window and top-k lists by them and threw std::bad_alloc); at the
// context's size, even 2^31 − 1, they are accepted and the layers size their lists by the step
// (tests/models/deepseek_v4).
TEST(ConfigDeepseekV4, PositionCountsWithinTheContext) {
    expect_error(patched(kFlash, R"({"sliding_window": 2147483647, "index_topk": 2147483647})"),
                 StatusCode::invalid_argument,
                 {"field \"sliding_window\" = 2147483647 exceeds field \"max_position_embeddings\" = 1048576"});
    expect_error(patched(kFlash, R"({"index_topk": 1048577})"), StatusCode::invalid_argument,
                 {"field \"index_topk\" = 1048577 exceeds field \"max_position_embeddings\" = 1048576"});
    expect_error(patched(kTiny, R"({"compress_rates": {"heavily_compressed_attention": 1025}})"),
                 StatusCode::invalid_argument,
                 {"layer 2 (hca) has compress ratio 1025", "field \"max_position_embeddings\" = 1024"});
    const DeepseekV4Config widest = v4(parse_ok(patched(
        kFlash, R"({"sliding_window": 2147483647, "index_topk": 2147483647, "max_position_embeddings": 2147483647})")));
    EXPECT_EQ(widest.sliding_window, 2147483647);
    EXPECT_EQ(widest.index_topk, 2147483647);
}

TEST(ConfigDeepseekV4, Errors) {
    expect_error(patched(kFlash, R"({"compress_ratios": [0, 0, 4]})"), StatusCode::invalid_argument,
                 {"field \"compress_ratios\": 3 entries, expected num_hidden_layers + 1 = 43 + 1"});
    expect_error(patched(kFlash, R"({"num_hidden_layers": 42})"), StatusCode::invalid_argument,
                 {"field \"compress_ratios\": 44 entries, expected num_hidden_layers + 1 = 42 + 1"});
    expect_error(patched(kFlash, R"({"num_hidden_layers": 2, "compress_ratios": [0, 4, 4]})"),
                 StatusCode::unsupported, {"field \"compress_ratios[2]\"", "MTP", "is 4"});
    expect_error(patched(kFlash, R"({"num_hidden_layers": 2, "compress_ratios": [0, -4, 0]})"),
                 StatusCode::invalid_argument, {"field \"compress_ratios[1]\"", "-4"});
    expect_error(patched(kFlash, R"({"num_hidden_layers": 2, "compress_ratios": [0, "4", 0]})"),
                 StatusCode::invalid_argument, {"field \"compress_ratios[1]\"", "expected an integer", "\"4\""});
    expect_error(patched(kTiny, R"({"layer_types": ["sliding_attention"]})"), StatusCode::invalid_argument,
                 {"field \"layer_types\": 1 entries, expected num_hidden_layers = 3"});
    expect_error(patched(kTiny, R"({"layer_types": ["sliding_attention", "full_attention", "sliding_attention"]})"),
                 StatusCode::invalid_argument, {"field \"layer_types[1]\"", "\"full_attention\""});
    expect_error(patched(kTiny, R"({"compress_rates": {"heavily_compressed_attention": 0}})"),
                 StatusCode::invalid_argument,
                 {"field \"compress_rates.heavily_compressed_attention\"", "must be positive, got 0"});
    expect_error(patched(kFlash, R"({"compress_ratios": null})"), StatusCode::not_found,
                 {"\"layer_types\"", "\"compress_ratios\""});
    expect_error(patched(kFlash, R"({"o_groups": 7})"), StatusCode::invalid_argument,
                 {"field \"o_groups\"", "7", "num_attention_heads = 64"});
    expect_error(patched(kFlash, R"({"num_key_value_heads": 8})"), StatusCode::unsupported,
                 {"field \"num_key_value_heads\"", "8"});
    expect_error(patched(kFlash, R"({"partial_rotary_factor": 1.5})"), StatusCode::invalid_argument,
                 {"field \"partial_rotary_factor\"", "1.5"});
    expect_error(patched(kFlash, R"({"partial_rotary_factor": 0.001})"), StatusCode::invalid_argument,
                 {"field \"partial_rotary_factor\"", "int(512 · 0.001) = 0"});
    expect_error(patched(kFlash, R"({"qk_rope_head_dim": 63})"), StatusCode::invalid_argument,
                 {"field \"qk_rope_head_dim\"", "63", "even"});
    expect_error(patched(kFlash, R"({"qk_rope_head_dim": 256})"), StatusCode::invalid_argument,
                 {"rotated width 256 exceeds index_head_dim = 128"});
    expect_error(patched(kFlash, R"({"compress_rope_theta": null})"), StatusCode::not_found,
                 {"field \"compress_rope_theta\""});
    expect_error(patched(kFlash, R"({"rope_theta": 1.0})"), StatusCode::invalid_argument,
                 {"field \"rope_theta\"", "got 1"});
    expect_error(patched(kFlash, R"({"rope_scaling": {"type": "linear"}})"), StatusCode::unsupported,
                 {"field \"rope_scaling.type\"", "\"linear\"", "default, yarn"});
    expect_error(patched(kFlash, R"({"rope_scaling": {"factor": 0.5}})"), StatusCode::invalid_argument,
                 {"field \"rope_scaling.factor\"", "0.5"});
    expect_error(patched(kFlash, R"({"rope_scaling": {"original_max_position_embeddings": null}})"),
                 StatusCode::not_found, {"field \"rope_scaling.original_max_position_embeddings\""});
    expect_error(patched(kFlash, R"({"rope_scaling": {"attention_factor": -1}})"), StatusCode::invalid_argument,
                 {"field \"rope_scaling.attention_factor\"", "-1"});
    expect_error(patched(kProTransformers, R"({"rope_parameters": {"main": null}})"), StatusCode::invalid_argument,
                 {"field \"rope_parameters\"", "\"compress\" but not \"main\""});
    expect_error(patched(kProTransformers, R"({"rope_parameters": {"compress": {"partial_rotary_factor": 0.25}}})"),
                 StatusCode::invalid_argument,
                 {"field \"rope_parameters.compress.partial_rotary_factor\"", "128", "64"});
    expect_error(patched(kProTransformers, R"({"rope_parameters": {"compress": {"rope_type": "longrope"}}})"),
                 StatusCode::unsupported, {"field \"rope_parameters.compress.rope_type\"", "\"longrope\""});
    expect_error(patched(kFlash, R"({"sliding_window": 0})"), StatusCode::invalid_argument,
                 {"field \"sliding_window\": must be positive, got 0"});
    expect_error(patched(kFlash, R"({"index_topk": null})"), StatusCode::not_found, {"field \"index_topk\""});
    expect_error(patched(kFlash, R"({"rms_norm_eps": 0})"), StatusCode::invalid_argument,
                 {"field \"rms_norm_eps\": must be > 0, got 0"});
}

}  // namespace
}  // namespace sieve
