// Loading QSA models: the fixture's layers and caches (agreeing with `sieve inspect`'s layout),
// both checkpoint name layouts, weight dtypes taken from the file (f32, bf16, FP8 with block
// scales), and clear errors for a missing tensor, a wrong shape, an ambiguous name and a layer
// sieve does not run.
#include <gtest/gtest.h>

#include <random>

#include "sieve/backends/backend.h"
#include "sieve/models/attention_layout.h"
#include "sieve/models/model_factory.h"
#include "models/qsa/model.h"
#include "qsa_test_util.h"

namespace sieve::model_test {
namespace {

Expected<std::unique_ptr<AttentionModel>> load_with(const QsaTestConfig& tc, const Checkpoint& ckpt, Backend& b,
                                                    NumericsProfile profile = NumericsProfile::exact,
                                                    std::vector<int64_t> layers = {}) {
    SIEVE_ASSIGN_OR_RETURN(ModelConfig config, parse_model_config(qsa_config_json(tc), "test config.json"));
    ModelOptions o;
    o.profile = profile;
    o.backend = &b;
    o.layers = std::move(layers);
    return load_attention_model(config, ckpt, o);
}

TEST(QsaLoad, FixtureLayersAndCachesAgreeWithTheLayout) {
    const Golden g = load_golden("qwen4_exp");
    const ModelConfig* config = &g.config;
    const Checkpoint* ckpt = g.checkpoint.get();
    ASSERT_NE(ckpt, nullptr);
    auto b = test_backend();
    for (NumericsProfile profile : {NumericsProfile::exact, NumericsProfile::deployed}) {
        SCOPED_TRACE(numerics_profile_name(profile));
        ModelOptions o;
        o.profile = profile;
        o.backend = b.get();
        auto m = load_attention_model(*config, *ckpt, o);
        ASSERT_TRUE(m.has_value()) << m.status().to_string();
        EXPECT_EQ((*m)->model_type(), "qwen4_exp");
        EXPECT_EQ((*m)->layers(), (std::vector<int64_t>{1, 3}));  // the QSA layers; 0 and 2 are linear attention
        EXPECT_EQ((*m)->hidden_size(), 64);
        auto layout = attention_layout(*config, profile);
        ASSERT_TRUE(layout.has_value());
        const AttentionLayerLayout& l1 = layout->layers[1];
        ASSERT_EQ(l1.kind, "qsa");
        const std::vector<CacheGroupDesc> groups = (*m)->cache_groups();
        ASSERT_EQ(groups.size(), l1.caches.size());
        for (size_t i = 0; i < groups.size(); ++i) {
            const CacheSpec& want = l1.caches[i];
            EXPECT_EQ(groups[i].name, want.name);
            EXPECT_EQ(groups[i].spec.entry_bytes, want.entry_bytes);
            EXPECT_EQ(groups[i].spec.tokens_per_entry, want.tokens_per_entry);
            EXPECT_EQ(groups[i].spec.window_tokens, want.window_tokens);
            EXPECT_EQ(groups[i].layers, (std::vector<int64_t>{1, 3}));  // the QSA layers
        }
        // K|V of 2 heads × 32 dims (f32 exact / bf16 deployed), one compressed key [16] per 4 tokens, a
        // ring of the last 4 raw keys (qsa.md §5).
        const int64_t e = profile == NumericsProfile::exact ? 4 : 2;
        EXPECT_EQ(groups[0].spec.entry_bytes, 2 * 2 * 32 * e);
        EXPECT_EQ(groups[1].spec.entry_bytes, 16 * e);
        EXPECT_EQ(groups[1].spec.tokens_per_entry, 4);
        EXPECT_EQ(groups[2].spec.window_tokens, 4);
    }
}

TEST(QsaLoad, BothNameLayoutsAndEveryWeightDtypeGiveTheSameLayer) {
    QsaTestConfig text;
    QsaTestConfig multi = text;
    multi.multimodal = true;
    auto weights = qsa_random_weights(text, 3);
    auto b = test_backend();
    auto run = [&](const QsaTestConfig& tc, const std::map<std::string, Tensor>& w, StoredAs stored,
                   NumericsProfile profile = NumericsProfile::exact) {
        auto ckpt = qsa_checkpoint(tc, w, stored);
        EXPECT_TRUE(ckpt.has_value()) << ckpt.status().to_string();
        auto m = load_with(tc, **ckpt, *b, profile);
        EXPECT_TRUE(m.has_value()) << m.status().to_string();
        const RandomRequests req = random_requests({17}, 1, tc.hidden, 4);
        auto r = run_golden_requests(**m, req.requests(), qsa_schedule("chunk:5", req.n_tokens));
        EXPECT_TRUE(r.has_value()) << r.status().to_string();
        return r->requests[0].outputs[0];
    };
    const std::vector<float> a = run(text, weights, StoredAs::f32);
    EXPECT_EQ(a, run(multi, weights, StoredAs::f32));  // model.language_model.* names (qsa.md §3)
    // FP8 blocks dequantize once at load (ops/linear.h): the same layer as f32 weights holding the
    // dequantized values, bit for bit.
    const auto roundtrip = qsa_fp8_roundtrip(weights);
    EXPECT_EQ(run(text, roundtrip, StoredAs::f32), run(multi, weights, StoredAs::fp8_block));
    EXPECT_NE(a, run(text, roundtrip, StoredAs::f32));  // the quantization is visible: the test can fail
    // bf16 checkpoints (as released): the dtype comes from the file.
    const std::vector<float> bf = run(text, weights, StoredAs::bf16);
    double d2 = 0, r2 = 0;
    for (size_t i = 0; i < a.size(); ++i) {
        d2 += (bf[i] - a[i]) * (bf[i] - a[i]);
        r2 += a[i] * a[i];
    }
    EXPECT_LT(std::sqrt(d2 / r2), 2e-2);  // bf16 weight rounding (2^-9 relative) through the layer
    EXPECT_GT(std::sqrt(d2 / r2), 0.0);
}

TEST(QsaLoad, ErrorsNameTheTensorAndTheValues) {
    QsaTestConfig tc;
    auto b = test_backend();
    {  // missing tensor
        auto w = qsa_random_weights(tc, 1);
        w.erase("model.layers.1.self_attn.indexer.k_layernorm.weight");
        auto ckpt = qsa_checkpoint(tc, w);
        ASSERT_TRUE(ckpt.has_value());
        auto m = load_with(tc, **ckpt, *b);
        ASSERT_FALSE(m.has_value());
        EXPECT_EQ(m.status().code(), StatusCode::not_found) << m.status().to_string();
        EXPECT_NE(m.status().message().find("model.layers.1.self_attn.indexer.k_layernorm.weight"), std::string::npos)
            << m.status().message();
    }
    {  // wrong shape
        auto w = qsa_random_weights(tc, 1);
        w["model.layers.1.self_attn.k_proj.weight"] = Tensor::zeros_or_die(DType::f32, {tc.kv_heads * tc.head_dim + 1, tc.hidden});
        auto ckpt = qsa_checkpoint(tc, w);
        ASSERT_TRUE(ckpt.has_value());
        auto m = load_with(tc, **ckpt, *b);
        ASSERT_FALSE(m.has_value());
        EXPECT_EQ(m.status().code(), StatusCode::invalid_argument);
        EXPECT_NE(m.status().message().find("k_proj.weight"), std::string::npos) << m.status().message();
        EXPECT_NE(m.status().message().find("shape [33, 48], expected [32, 48]"), std::string::npos)
            << m.status().message();
    }
    {  // both spellings of one tensor: ambiguous, never a silent pick
        auto w = qsa_random_weights(tc, 1);
        std::map<std::string, Tensor> both;
        for (const auto& [name, t] : w) {
            Tensor copy = Tensor::zeros_or_die(DType::f32, t.shape());
            std::memcpy(copy.data(), t.data(), t.nbytes());
            both.emplace(name, std::move(copy));
        }
        both.emplace("model.language_model.layers.1.self_attn.q_norm.weight", Tensor::zeros_or_die(DType::f32, {tc.head_dim}));
        auto ckpt = qsa_checkpoint(tc, both);
        ASSERT_TRUE(ckpt.has_value());
        auto m = load_with(tc, **ckpt, *b);
        ASSERT_FALSE(m.has_value());
        EXPECT_EQ(m.status().code(), StatusCode::corrupt) << m.status().to_string();
        EXPECT_NE(m.status().message().find("ambiguous"), std::string::npos) << m.status().message();
    }
    {  // a linear-attention layer, an out-of-range layer
        auto ckpt = qsa_checkpoint(tc, qsa_random_weights(tc, 1));
        ASSERT_TRUE(ckpt.has_value());
        auto m = load_with(tc, **ckpt, *b, NumericsProfile::exact, {0});
        ASSERT_FALSE(m.has_value());
        EXPECT_EQ(m.status().code(), StatusCode::unsupported);
        EXPECT_NE(m.status().message().find("layer 0 is a linear_attention layer"), std::string::npos)
            << m.status().message();
        m = load_with(tc, **ckpt, *b, NumericsProfile::exact, {7});
        ASSERT_FALSE(m.has_value());
        EXPECT_NE(m.status().message().find("layer 7 is out of range"), std::string::npos) << m.status().message();
        m = load_with(tc, **ckpt, *b, NumericsProfile::exact, {1});  // explicitly the QSA layer: fine
        EXPECT_TRUE(m.has_value()) << m.status().to_string();
    }
    {  // the MTP layer after the main layers: a QSA layer of its own under mtp.layers.0 (qsa.md §3, §7),
       // loaded when asked for and named when its tensors are missing
        QsaTestConfig mtp = tc;
        mtp.mtp_layers = 1;
        auto ckpt = qsa_checkpoint(mtp, qsa_random_weights(mtp, 1));
        ASSERT_TRUE(ckpt.has_value());
        auto m = load_with(mtp, **ckpt, *b, NumericsProfile::exact, {1, 2});
        ASSERT_TRUE(m.has_value()) << m.status().to_string();
        EXPECT_EQ((*m)->layers(), (std::vector<int64_t>{1, 2}));
        m = load_with(mtp, **ckpt, *b, NumericsProfile::exact, {});  // by default the main layers only
        ASSERT_TRUE(m.has_value()) << m.status().to_string();
        EXPECT_EQ((*m)->layers(), (std::vector<int64_t>{1}));
        auto main_only = qsa_checkpoint(mtp, qsa_random_weights(tc, 1));
        ASSERT_TRUE(main_only.has_value());
        m = load_with(mtp, **main_only, *b, NumericsProfile::exact, {2});
        ASSERT_FALSE(m.has_value());
        EXPECT_EQ(m.status().code(), StatusCode::not_found) << m.status().to_string();
        EXPECT_NE(m.status().message().find("mtp.layers.0.self_attn.q_proj.weight"), std::string::npos)
            << m.status().message();
        m = load_with(mtp, **ckpt, *b, NumericsProfile::exact, {3});
        ASSERT_FALSE(m.has_value());
        EXPECT_NE(m.status().message().find("layer 3 is out of range"), std::string::npos) << m.status().message();
    }
    {  // a hybrid without any QSA layer: nothing to run
        QsaTestConfig none = tc;
        none.layer_types = {"linear_attention", "linear_attention"};
        auto ckpt = qsa_checkpoint(none, {});
        ASSERT_TRUE(ckpt.has_value());
        auto m = load_with(none, **ckpt, *b);
        ASSERT_FALSE(m.has_value());
        EXPECT_EQ(m.status().code(), StatusCode::unsupported);
        EXPECT_NE(m.status().message().find("no qwen_sparse_attention layer"), std::string::npos) << m.status().message();
    }
}

}  // namespace
}  // namespace sieve::model_test
