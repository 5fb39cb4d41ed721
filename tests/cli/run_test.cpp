// `sieve run`'s argument parsing and presets (the runs themselves need a model family; their
// tests live with the families).
#include "run.h"

#include <gtest/gtest.h>

#include "models/attention_layout.h"
#include "presets.h"

namespace sieve::cli {
namespace {

TEST(RunOptions, LayerLists) {
    EXPECT_EQ(*parse_layer_list("0-3"), (std::vector<int64_t>{0, 1, 2, 3}));
    EXPECT_EQ(*parse_layer_list("7,2,2-3"), (std::vector<int64_t>{2, 3, 7}));
    for (const char* bad : {"", "a", "3-1", "-1", "1,,2", "2-", "1.5"}) {
        auto r = parse_layer_list(bad);
        EXPECT_FALSE(r.has_value()) << bad;
        if (!r) {
            EXPECT_NE(r.status().message().find("--layers"), std::string::npos);
        }
    }
}

TEST(Presets, ConfigsParseAndDefaultLayersExist) {
    ASSERT_EQ(presets().size(), 5u);
    for (const Preset& p : presets()) {
        SCOPED_TRACE(p.name);
        auto config = preset_config(p.name);
        ASSERT_TRUE(config.has_value()) << config.status().to_string();
        auto layout = attention_layout(*config, NumericsProfile::deployed);
        ASSERT_TRUE(layout.has_value());
        for (int64_t l : p.default_layers) {
            ASSERT_LT(l, static_cast<int64_t>(layout->layers.size()));
            EXPECT_TRUE(layout->layers[static_cast<size_t>(l)].sieve_runs);
        }
    }
    // The Flash defaults cover all three DeepSeek-V4 layer kinds.
    auto flash = preset_config("deepseek-v4-flash");
    auto layout = attention_layout(*flash, NumericsProfile::deployed);
    EXPECT_EQ(layout->layers[0].kind, "swa");
    EXPECT_EQ(layout->layers[2].kind, "csa");
    EXPECT_EQ(layout->layers[3].kind, "hca");
    EXPECT_FALSE(preset_config("gpt-2").has_value());
}

TEST(Presets, CheckpointHoldsTheLayoutsTensors) {
    // A V3.2 layer in full size is large; its shared-layer cousin in Hy4 too. Use the layout of
    // one DeepSeek-V4-Flash SWA layer (the smallest real layer) and check names, dtypes and shapes.
    auto config = preset_config("deepseek-v4-flash");
    ASSERT_TRUE(config.has_value());
    auto ckpt = preset_checkpoint("deepseek-v4-flash", *config, {0}, 7);
    ASSERT_TRUE(ckpt.has_value()) << ckpt.status().to_string();
    auto wq_b = (*ckpt)->tensor("layers.0.attn.wq_b.weight");
    ASSERT_TRUE(wq_b.has_value());
    EXPECT_EQ(wq_b->dtype, DType::f8_e4m3);
    EXPECT_EQ(std::vector<int64_t>(wq_b->shape.begin(), wq_b->shape.end()), (std::vector<int64_t>{32768, 1024}));
    auto scale = (*ckpt)->tensor("layers.0.attn.wq_b.scale");
    ASSERT_TRUE(scale.has_value());
    EXPECT_EQ(std::vector<int64_t>(scale->shape.begin(), scale->shape.end()), (std::vector<int64_t>{256, 8}));
    EXPECT_EQ((*ckpt)->tensor("layers.0.attn.attn_sink")->dtype, DType::f32);
    EXPECT_EQ((*ckpt)->tensor("layers.0.attn.kv_norm.weight")->dtype, DType::bf16);
    EXPECT_FALSE((*ckpt)->contains("layers.1.attn.wq_a.weight"));  // only the layers asked for
}

}  // namespace
}  // namespace sieve::cli
