// Loading the DeepSeek-V4 model: cache groups against the layout `sieve inspect` shows, layer
// selection, clear errors for missing or misshapen tensors and unsupported configurations, and the
// two checkpoint layouts (transformers names with fp32 weights; original names with FP8 e4m3 weights
// and UE8M0 128×128 block scales) giving the same layer.
#include <fmt/format.h>

#include "sieve/backends/backend.h"
#include "model_test_util.h"
#include "sieve/models/attention_layout.h"
#include "models/deepseek_v4/model.h"
#include "sieve/models/model_factory.h"

namespace sieve::model_test {
namespace {

bool same_spec(const CacheSpec& a, const CacheSpec& b) {
    return a.name == b.name && a.format == b.format && a.entry_bytes == b.entry_bytes &&
           a.tokens_per_entry == b.tokens_per_entry && a.window_tokens == b.window_tokens;
}

TEST(DeepseekV4Load, CacheGroupsAgreeWithTheLayout) {
    const Golden g = load_golden("deepseek_v4");
    auto backend = test_backend();
    for (NumericsProfile profile : {NumericsProfile::exact, NumericsProfile::deployed}) {
        SCOPED_TRACE(numerics_profile_name(profile));
        DeepseekV4Options o;
        o.profile = profile;
        o.backend = backend.get();
        auto model = load_deepseek_v4_model(*g.config.deepseek_v4(), *g.checkpoint, o);
        ASSERT_TRUE(model.has_value()) << model.status().to_string();
        EXPECT_EQ((*model)->model_type(), "deepseek_v4");
        EXPECT_EQ((*model)->hidden_size(), 64);
        EXPECT_EQ((*model)->layers(), (std::vector<int64_t>{0, 1, 2}));
        const std::vector<CacheGroupDesc> groups = (*model)->cache_groups();
        std::map<std::string, CacheGroupDesc> by_name;
        for (const CacheGroupDesc& g : groups) by_name[g.name] = g;
        ASSERT_EQ(by_name.size(), groups.size()) << "group names are unique";
        // (group, layers, block size): every layer keeps its window, the CSA layer 1 the m = 4 groups, the
        // HCA layer 2 the m = 16 ones; vLLM block sizes (§4.2) — 64 window rows, 256-token compressed and
        // indexer blocks (64 entries at m = 4, 16 at m = 16), state blocks of coff·m rows.
        using Layers = std::vector<int64_t>;
        const std::vector<std::tuple<std::string, Layers, int64_t>> want = {
            {"swa_kv", {0, 1, 2}, 64},     {"compressed_kv.m4", {1}, 64},         {"compressor_state.m4", {1}, 8},
            {"indexer_keys.m4", {1}, 64}, {"indexer_compressor_state.m4", {1}, 8}, {"compressed_kv.m16", {2}, 16},
            {"compressor_state.m16", {2}, 16}};
        ASSERT_EQ(groups.size(), want.size());
        for (const auto& [name, layers, block] : want) {
            ASSERT_TRUE(by_name.count(name)) << name;
            EXPECT_EQ(by_name[name].layers, layers) << name;
            EXPECT_EQ(by_name[name].block_size, block) << name;
        }
        // Every cache of every layer in the layout is the spec of exactly the group named after it.
        auto layout = attention_layout(g.config, profile);
        ASSERT_TRUE(layout.has_value());
        for (const AttentionLayerLayout& l : layout->layers) {
            for (const CacheSpec& cs : l.caches) {
                const int64_t m = g.config.deepseek_v4()->layers[static_cast<size_t>(l.layer)].compress_ratio;
                const std::string name = cs.name == "swa_kv" ? cs.name : fmt::format("{}.m{}", cs.name, m);
                ASSERT_TRUE(by_name.count(name)) << name;
                EXPECT_TRUE(same_spec(by_name[name].spec, cs)) << name << " of layer " << l.layer;
            }
        }
        // deployed rows are fp8_model1 records (48 B for d = 32, r = 8) and 20-byte FP8 keys; exact f32.
        const bool exact = profile == NumericsProfile::exact;
        EXPECT_EQ(by_name["swa_kv"].spec.entry_bytes, exact ? 128 : 48);
        EXPECT_EQ(by_name["indexer_keys.m4"].spec.entry_bytes, exact ? 64 : 20);
    }
}

TEST(DeepseekV4Load, FactoryAndLayerSelection) {
    const Golden g = load_golden("deepseek_v4");
    auto backend = test_backend();
    ModelOptions mo;
    mo.backend = backend.get();
    mo.layers = {1, 2};
    auto model = load_attention_model(g.config, *g.checkpoint, mo);
    ASSERT_TRUE(model.has_value()) << model.status().to_string();
    EXPECT_EQ((*model)->layers(), (std::vector<int64_t>{1, 2}));
    for (const CacheGroupDesc& g : (*model)->cache_groups()) {
        if (g.name == "swa_kv") {
            EXPECT_EQ(g.layers, (std::vector<int64_t>{1, 2}));
        }
    }

    mo.layers = {2, 1};
    auto bad = load_attention_model(g.config, *g.checkpoint, mo);
    ASSERT_FALSE(bad.has_value());
    EXPECT_NE(bad.status().message().find("ascending"), std::string::npos) << bad.status().message();
    mo.layers = {5};
    bad = load_attention_model(g.config, *g.checkpoint, mo);
    ASSERT_FALSE(bad.has_value());
    EXPECT_NE(bad.status().message().find("layer 5 does not exist"), std::string::npos) << bad.status().message();
    {  // an MTP layer (the one after the main layers) whose tensors the checkpoint lacks: named
        DeepseekV4Config with_mtp = *g.config.deepseek_v4();
        with_mtp.mtp_layers.push_back(with_mtp.layers.front());
        DeepseekV4Options o;
        o.backend = mo.backend;
        o.layers = {static_cast<int64_t>(with_mtp.layers.size())};
        auto mtp = load_deepseek_v4_model(with_mtp, *g.checkpoint, o);
        ASSERT_FALSE(mtp.has_value());
        EXPECT_EQ(mtp.status().code(), StatusCode::not_found) << mtp.status().to_string();
        EXPECT_NE(mtp.status().message().find("layer 3 (MTP, swa): tensor mtp.0.attn.attn_sink"), std::string::npos)
            << mtp.status().message();
    }
    mo.layers = {};
    mo.state_block_size = -2;
    bad = load_attention_model(g.config, *g.checkpoint, mo);
    ASSERT_FALSE(bad.has_value());
    EXPECT_NE(bad.status().message().find("block sizes"), std::string::npos) << bad.status().message();
    mo.state_block_size = 0;
    mo.backend = nullptr;
    bad = load_attention_model(g.config, *g.checkpoint, mo);
    ASSERT_FALSE(bad.has_value());
    EXPECT_EQ(bad.status().code(), StatusCode::invalid_argument);
}

// Only DeepSeek-V4 keeps compressor states: another family refuses the option rather than ignore it.
TEST(DeepseekV4Load, StateBlockSizeIsRefusedByOtherFamilies) {
    const Golden g = load_golden("deepseek_v32");
    auto backend = test_backend();
    ModelOptions mo;
    mo.backend = backend.get();
    mo.state_block_size = kFitStateBlocks;
    auto bad = load_attention_model(g.config, *g.checkpoint, mo);
    ASSERT_FALSE(bad.has_value());
    EXPECT_EQ(bad.status().code(), StatusCode::unsupported) << bad.status().to_string();
    EXPECT_NE(bad.status().message().find("only deepseek_v4"), std::string::npos) << bad.status().message();
}

TEST(DeepseekV4Load, MissingTensorIsAClearError) {
    const Golden g = load_golden("deepseek_v4");
    auto backend = test_backend();
    const std::vector<HostTensor> all = checkpoint_tensors(*g.checkpoint);
    const std::vector<std::pair<std::string, std::string>> cases = {
        {"model.layers.1.attn.compressor.wgate.weight", "layers.1.attn.compressor.wgate.weight"},
        {"model.layers.1.attn.indexer.compressor.ape", "layers.1.attn.indexer.compressor.ape"},
        {"model.layers.2.attn.compressor.norm.weight", "layers.2.attn.compressor.norm.weight"},
        {"model.layers.0.attn.norm.weight", "layers.0.attn.kv_norm.weight"},
        {"model.layers.2.attn.attn_sink", "layers.2.attn.attn_sink"},
    };
    for (const auto& [stored, canonical] : cases) {
        SCOPED_TRACE(stored);
        auto ckpt = memory_checkpoint(without_tensor(all, stored), "memory");
        ASSERT_TRUE(ckpt.has_value()) << ckpt.status().to_string();
        DeepseekV4Options o;
        o.backend = backend.get();
        auto model = load_deepseek_v4_model(*g.config.deepseek_v4(), **ckpt, o);
        ASSERT_FALSE(model.has_value());
        const std::string msg = model.status().message();
        EXPECT_EQ(model.status().code(), StatusCode::not_found) << msg;
        EXPECT_NE(msg.find(canonical), std::string::npos) << msg;
        const std::string layer = canonical.substr(7, 1);
        EXPECT_NE(msg.find("deepseek_v4 layer " + layer), std::string::npos) << msg;
    }
}

TEST(DeepseekV4Load, WrongShapeIsAClearError) {
    const Golden g = load_golden("deepseek_v4");
    auto backend = test_backend();
    std::vector<HostTensor> t = checkpoint_tensors(*g.checkpoint);
    HostTensor* ape = find_tensor(t, "model.layers.2.attn.compressor.ape");  // [16, 32]
    ASSERT_NE(ape, nullptr);
    ape->shape = {8, 64};
    auto ckpt = memory_checkpoint(t, "memory");
    ASSERT_TRUE(ckpt.has_value()) << ckpt.status().to_string();
    DeepseekV4Options o;
    o.backend = backend.get();
    auto model = load_deepseek_v4_model(*g.config.deepseek_v4(), **ckpt, o);
    ASSERT_FALSE(model.has_value());
    const std::string msg = model.status().message();
    EXPECT_NE(msg.find("compressor.ape"), std::string::npos) << msg;
    EXPECT_NE(msg.find("[16, 32]"), std::string::npos) << msg;
    EXPECT_NE(msg.find("[8, 64]"), std::string::npos) << msg;
}

TEST(DeepseekV4Load, UnsupportedConfigurationsAreErrors) {
    const Golden g = load_golden("deepseek_v4");
    auto backend = test_backend();
    DeepseekV4Options o;
    o.backend = backend.get();
    DeepseekV4Config c = *g.config.deepseek_v4();
    c.num_key_value_heads = 2;
    auto m = load_deepseek_v4_model(c, *g.checkpoint, o);
    ASSERT_FALSE(m.has_value());
    EXPECT_EQ(m.status().code(), StatusCode::unsupported);
    EXPECT_NE(m.status().message().find("num_key_value_heads = 2"), std::string::npos) << m.status().message();
    c = *g.config.deepseek_v4();
    c.layers[1].compressor_overlap = false;  // a CSA layer must overlap (§3.4)
    m = load_deepseek_v4_model(c, *g.checkpoint, o);
    ASSERT_FALSE(m.has_value());
    EXPECT_NE(m.status().message().find("layer 1"), std::string::npos) << m.status().message();
    c = *g.config.deepseek_v4();
    c.layers[2].rope.pairing = RopeConfigPairing::neox;
    m = load_deepseek_v4_model(c, *g.checkpoint, o);
    ASSERT_FALSE(m.has_value());
    EXPECT_EQ(m.status().code(), StatusCode::unsupported);
    EXPECT_NE(m.status().message().find("interleaved"), std::string::npos) << m.status().message();
    o.swa_block_size = 0;
    m = load_deepseek_v4_model(*g.config.deepseek_v4(), *g.checkpoint, o);
    ASSERT_FALSE(m.has_value());
    EXPECT_EQ(m.status().code(), StatusCode::invalid_argument);
}

// sliding_window = index_topk = max_position_embeddings = 2^31 − 1 (a config that passes validation): the
// layers size their window and top-k lists by what the step can use (min(width, positions or entries a
// token sees)), so the model runs the fixture with a small scratch and equals the same model with a window
// and a top-k of 1000 (both wider than every request, so the same rows are attended). Before, a step
// allocated N × sliding_window window slots and std::bad_alloc escaped the forward call.
TEST(DeepseekV4Load, HugeWindowAndTopkSizeListsByTheStep) {
    const Golden g = load_golden("deepseek_v4");
    auto backend = test_backend();
    DeepseekV4Options o;
    o.backend = backend.get();
    DeepseekV4Config huge = *g.config.deepseek_v4(), wide = *g.config.deepseek_v4();
    huge.sliding_window = huge.index_topk = huge.max_position_embeddings = 2147483647;
    wide.sliding_window = wide.index_topk = 1000;
    for (const NumericsProfile profile : {NumericsProfile::exact, NumericsProfile::deployed}) {
        SCOPED_TRACE(numerics_profile_name(profile));
        o.profile = profile;
        auto mh = load_deepseek_v4_model(huge, *g.checkpoint, o);
        auto mw = load_deepseek_v4_model(wide, *g.checkpoint, o);
        ASSERT_TRUE(mh.has_value()) << mh.status().to_string();
        ASSERT_TRUE(mw.has_value()) << mw.status().to_string();
        GoldenSchedule steps_of_64;
        steps_of_64.engine.scheduler.max_tokens_per_step = 64;
        steps_of_64.engine.cache_budget_tokens = 4 * 150;
        const auto rh = run_fixture(**mh, g, steps_of_64);
        const auto rw = run_fixture(**mw, g, steps_of_64);
        ASSERT_TRUE(rh.has_value()) << rh.status().to_string();
        ASSERT_TRUE(rw.has_value()) << rw.status().to_string();
        for (size_t r = 0; r < rh->requests.size(); ++r) {
            EXPECT_EQ(rh->requests[r].outputs, rw->requests[r].outputs) << "request " << r;
            EXPECT_EQ(selected_rows(rh->requests[r]), selected_rows(rw->requests[r])) << "request " << r;
        }
        EXPECT_LT((*mh)->workspace_bytes(), int64_t{64} << 20) << "scratch sized by the window or the top-k";
    }
}

// The original DeepSeek layout (§6, "Decisions for sieve"): no "model." prefix, attn.kv_norm, and the
// FP8 linears as e4m3 with a `.scale` sibling of UE8M0 bytes per 128×128 block. Built from the fixture
// by quantizing its linears; the transformers-layout twin holds the dequantized fp32 values. Both must
// give the same layer outputs (exact profile: W = e4m3 · 2^(S − 127) once, in fp32).
TEST(DeepseekV4Load, OriginalLayoutWithFp8BlocksMatchesDequantizedWeights) {
    const Golden g = load_golden("deepseek_v4");
    auto backend = test_backend();
    std::vector<HostTensor> original, dequantized;
    const std::vector<std::string> fp8_leaves = {"wq_a.weight", "wq_b.weight", "wkv.weight",
                                                 "wo_a.weight", "wo_b.weight", "indexer.wq_b.weight"};
    int64_t n_fp8 = 0;
    for (const HostTensor& t : checkpoint_tensors(*g.checkpoint)) {
        const std::string& name = t.name;
        if (name.rfind("model.layers.", 0) != 0 || name.find(".attn.") == std::string::npos) continue;
        std::string orig = name.substr(6);  // drop "model."
        if (const size_t p = orig.find(".attn.norm.weight"); p != std::string::npos)
            orig = orig.substr(0, p) + ".attn.kv_norm.weight";
        bool fp8 = false;
        for (const std::string& leaf : fp8_leaves)
            fp8 |= orig.size() > leaf.size() && orig.compare(orig.size() - leaf.size(), leaf.size(), leaf) == 0 &&
                   orig.find(".compressor.") == std::string::npos;
        if (!fp8) {
            original.push_back(t);
            original.back().name = orig;
            dequantized.push_back(t);
            continue;
        }
        ++n_fp8;
        Fp8Blocks q = fp8_blocks(t.f32(), t.shape[0], t.shape[1], Fp8Scale::ue8m0);
        HostTensor s{orig.substr(0, orig.size() - std::string("weight").size()) + "scale", DType::f8_e8m0, q.scale_shape, {}};
        for (float scale : q.scales) s.bytes.push_back(ue8m0_from_pow2(scale));
        original.push_back({orig, DType::f8_e4m3, t.shape, std::move(q.values)});
        original.push_back(std::move(s));
        dequantized.push_back(HostTensor::from_f32(name, t.shape, q.dequantized));
    }
    EXPECT_EQ(n_fp8, 3 * 5 + 1);
    auto ckpt_original = memory_checkpoint(original, "original"), ckpt_dequantized = memory_checkpoint(dequantized, "dequantized");
    ASSERT_TRUE(ckpt_original.has_value()) << ckpt_original.status().to_string();
    ASSERT_TRUE(ckpt_dequantized.has_value()) << ckpt_dequantized.status().to_string();
    DeepseekV4Options o;
    o.backend = backend.get();
    auto m_original = load_deepseek_v4_model(*g.config.deepseek_v4(), **ckpt_original, o);
    auto m_dequantized = load_deepseek_v4_model(*g.config.deepseek_v4(), **ckpt_dequantized, o);
    ASSERT_TRUE(m_original.has_value()) << m_original.status().to_string();
    ASSERT_TRUE(m_dequantized.has_value()) << m_dequantized.status().to_string();
    auto requests = golden_fixture_requests(g.fixture, (*m_original)->layers());
    ASSERT_TRUE(requests.has_value()) << requests.status().to_string();
    const std::vector<GoldenRunRequest> request_2 = {(*requests)[2]};
    const GoldenSchedule together;
    const auto a = run_golden_requests(**m_original, request_2, together);
    const auto b = run_golden_requests(**m_dequantized, request_2, together);
    ASSERT_TRUE(a.has_value()) << a.status().to_string();
    ASSERT_TRUE(b.has_value()) << b.status().to_string();
    for (size_t l = 0; l < 3; ++l) {
        // Same W in fp32; only the GEMMs' accumulation order differs (FP8 vs f32 panels).
        EXPECT_LE(output_diff(a->requests[0].outputs[l], b->requests[0].outputs[l]).rel, 1e-5) << "layer " << l;
    }
    EXPECT_EQ(selected_rows(a->requests[0]), selected_rows(b->requests[0]));
    // FP8 weights also load in the deployed profile (packed, W8A16) and run.
    o.profile = NumericsProfile::deployed;
    auto m_deployed = load_deepseek_v4_model(*g.config.deepseek_v4(), **ckpt_original, o);
    ASSERT_TRUE(m_deployed.has_value()) << m_deployed.status().to_string();
    const auto c = run_golden_requests(**m_deployed, request_2, together);
    ASSERT_TRUE(c.has_value()) << c.status().to_string();
    for (float v : c->requests[0].outputs[1]) ASSERT_TRUE(std::isfinite(v));
}

}  // namespace
}  // namespace sieve::model_test
