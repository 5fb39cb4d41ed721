// The golden fixtures' config.json files (written by transformers 5.17.0 save_pretrained,
// tests/data/<family>/ckpt/) parse, and give the per-layer kinds and derived values that
// tests/data/README.md states for them.
#include <cmath>
#include <filesystem>

#include <gtest/gtest.h>

#include "sieve/io/config.h"

namespace sieve {
namespace {

ModelConfig load_fixture(const char* family) {
    std::filesystem::path dir = std::filesystem::path(SIEVE_TEST_DATA_DIR) / family / "ckpt";
    Expected<ModelConfig> config = load_model_config(dir);
    if (!config) ADD_FAILURE() << config.status().to_string();
    return config ? *config : ModelConfig{};
}

TEST(ConfigFixtures, DeepseekV4) {
    ModelConfig config = load_fixture("deepseek_v4");
    ASSERT_NE(config.deepseek_v4(), nullptr);
    const DeepseekV4Config& c = *config.deepseek_v4();
    EXPECT_EQ(c.layout, DeepseekV4ConfigLayout::transformers);
    ASSERT_EQ(c.layers.size(), 3u);
    EXPECT_EQ(c.layers[0].kind, DeepseekV4LayerKind::swa);
    EXPECT_EQ(c.layers[1].kind, DeepseekV4LayerKind::csa);
    EXPECT_EQ(c.layers[1].compress_ratio, 4);
    EXPECT_TRUE(c.layers[1].has_indexer);
    EXPECT_EQ(c.layers[2].kind, DeepseekV4LayerKind::hca);
    EXPECT_EQ(c.layers[2].compress_ratio, 16);
    EXPECT_FALSE(c.layers[2].has_indexer);
    EXPECT_TRUE(c.mtp_layers.empty());
    EXPECT_EQ(c.head_dim, 32);
    EXPECT_EQ(c.rope_head_dim, 8);
    EXPECT_EQ(c.heads_per_group, 2);
    EXPECT_EQ(c.sliding_window, 8);
    EXPECT_EQ(c.index_n_heads, 8);
    EXPECT_EQ(c.index_head_dim, 16);
    EXPECT_EQ(c.index_topk, 8);
    EXPECT_DOUBLE_EQ(c.rms_norm_eps, 1e-2);
    EXPECT_DOUBLE_EQ(c.softmax_scale, 1.0 / std::sqrt(32.0));
    // Layer 0: main table θ 10000 plain; layers 1, 2: compress table θ 160000, YaRN 16 / 65536 / 32 / 1,
    // attention_factor 1.0, ramp low 1, high 4. Last 8 dims, interleaved.
    EXPECT_EQ(c.layers[0].rope.theta, 10000.0);
    EXPECT_FALSE(c.layers[0].rope.yarn.has_value());
    for (size_t i = 1; i < 3; ++i) {
        const RopeConfig& rope = c.layers[i].rope;
        EXPECT_EQ(rope.theta, 160000.0);
        EXPECT_EQ(rope.rotated_dims, 8);
        EXPECT_EQ(rope.slice, RopeConfigSlice::last);
        EXPECT_EQ(rope.pairing, RopeConfigPairing::interleaved);
        ASSERT_TRUE(rope.yarn.has_value());
        EXPECT_EQ(rope.yarn->factor, 16.0);
        EXPECT_EQ(rope.yarn->original_max_position_embeddings, 65536);
        EXPECT_EQ(rope.yarn->beta_fast, 32.0);
        EXPECT_EQ(rope.yarn->beta_slow, 1.0);
        EXPECT_EQ(rope.yarn->attention_factor, 1.0);
        RopeConfigYarnRange range = rope_config_yarn_range(rope);
        EXPECT_EQ(range.low, 1.0);
        EXPECT_EQ(range.high, 4.0);
    }
}

TEST(ConfigFixtures, DeepseekV32) {
    ModelConfig config = load_fixture("deepseek_v32");
    ASSERT_NE(config.dsa_mla(), nullptr);
    const DsaMlaConfig& c = *config.dsa_mla();
    EXPECT_EQ(c.model, DsaMlaModel::deepseek_v32);
    ASSERT_EQ(c.layers.size(), 2u);
    for (size_t i = 0; i < 2; ++i) {
        EXPECT_EQ(c.layers[i].kind, DsaLayerKind::full);
        EXPECT_EQ(c.layers[i].topk_source_layer, static_cast<int64_t>(i));
    }
    EXPECT_EQ(c.qk_head_dim, 24);
    EXPECT_EQ(c.index_topk, 16);
    EXPECT_NEAR(c.softmax_scale, 0.38249889, 5e-9);  // 24^-0.5 · (0.1 ln 40 + 1)²
    EXPECT_DOUBLE_EQ(c.latent_norm_eps, 1e-6);       // not rms_norm_eps = 1e-2
    EXPECT_DOUBLE_EQ(c.indexer_key_norm_eps, 1e-6);
    EXPECT_EQ(c.output_gate, DsaOutputGate::none);
    EXPECT_FALSE(c.has_attention_sink);
    EXPECT_EQ(c.rope_mla.slice, RopeConfigSlice::last);
    EXPECT_EQ(c.rope_mla.pairing, RopeConfigPairing::interleaved);
    EXPECT_EQ(c.rope_indexer.slice, RopeConfigSlice::first);
    EXPECT_EQ(c.rope_indexer.pairing, RopeConfigPairing::neox);
    ASSERT_TRUE(c.rope_mla.yarn.has_value());
    EXPECT_EQ(c.rope_mla.yarn->factor, 40.0);
    EXPECT_DOUBLE_EQ(c.rope_mla.yarn->attention_factor, 1.0);
    RopeConfigYarnRange range = rope_config_yarn_range(c.rope_mla);
    EXPECT_EQ(range.low, 1.0);
    EXPECT_EQ(range.high, 3.0);
}

TEST(ConfigFixtures, HyV4) {
    ModelConfig config = load_fixture("hy_v4");
    ASSERT_NE(config.dsa_mla(), nullptr);
    const DsaMlaConfig& c = *config.dsa_mla();
    EXPECT_EQ(c.model, DsaMlaModel::hy_v4);
    ASSERT_EQ(c.layers.size(), 4u);
    // full, shared, full, shared: layer 1 reads layer 0's top-k, layer 3 reads layer 2's.
    EXPECT_EQ(c.layers[0].kind, DsaLayerKind::full);
    EXPECT_EQ(c.layers[1].kind, DsaLayerKind::shared);
    EXPECT_EQ(c.layers[1].topk_source_layer, 0);
    EXPECT_EQ(c.layers[2].kind, DsaLayerKind::full);
    EXPECT_EQ(c.layers[3].kind, DsaLayerKind::shared);
    EXPECT_EQ(c.layers[3].topk_source_layer, 2);
    EXPECT_DOUBLE_EQ(c.softmax_scale, 1.0 / std::sqrt(24.0));
    EXPECT_FALSE(c.rope_mla.yarn.has_value());
    EXPECT_EQ(c.rope_mla.theta, 10000.0);
    EXPECT_EQ(c.rope_indexer.slice, RopeConfigSlice::last);
    EXPECT_EQ(c.rope_indexer.pairing, RopeConfigPairing::interleaved);
    EXPECT_EQ(c.output_gate, DsaOutputGate::elementwise);
    EXPECT_TRUE(c.has_attention_sink);
    EXPECT_DOUBLE_EQ(c.latent_norm_eps, 1e-2);  // rms_norm_eps
    EXPECT_DOUBLE_EQ(c.indexer_key_norm_eps, 1e-6);
}

TEST(ConfigFixtures, Qwen4Exp) {
    ModelConfig config = load_fixture("qwen4_exp");
    EXPECT_EQ(config.model_type, "qwen4_exp");
    ASSERT_NE(config.qsa(), nullptr);
    const QsaConfig& c = *config.qsa();
    EXPECT_TRUE(c.from_text_config);
    EXPECT_EQ(c.layers, (std::vector<QsaLayerKind>{QsaLayerKind::linear_attention, QsaLayerKind::qsa,
                                                   QsaLayerKind::linear_attention, QsaLayerKind::qsa}));
    EXPECT_EQ(c.gqa_group_size, 2);
    EXPECT_EQ(c.head_dim, 32);
    EXPECT_EQ(c.rotary_dim, 8);
    EXPECT_EQ(c.rope.theta, 10000.0);
    EXPECT_EQ(c.rope.slice, RopeConfigSlice::first);
    EXPECT_EQ(c.rope.pairing, RopeConfigPairing::neox);
    EXPECT_EQ(c.indexer_n_heads, 4);
    EXPECT_EQ(c.indexer_head_dim, 16);
    EXPECT_EQ(c.block_topk, 4);
    EXPECT_EQ(c.output_width, 19);
    EXPECT_DOUBLE_EQ(c.softmax_scale, 1.0 / std::sqrt(32.0));
}

}  // namespace
}  // namespace sieve
