// DSA on MLA: DeepSeek-V3.2 and Hy4 configs (specs/dsa_mla.md "Decisions for sieve", §1–§2), the
// shared-top-k schedule in all its forms, RoPE per path, softmax scale with YaRN mscale, gates.
#include <cmath>
#include <set>

#include "config_test_util.h"

namespace sieve {
namespace {

using config_test::expect_error;
using config_test::parse_ok;
using config_test::patched;

// DeepSeek-V3.2 config.json (release, legacy rope_scaling; dsa_mla.md §1.1).
constexpr const char* kV32 = R"({
  "architectures": ["DeepseekV32ForCausalLM"],
  "model_type": "deepseek_v32",
  "vocab_size": 129280,
  "hidden_size": 7168,
  "num_hidden_layers": 61,
  "first_k_dense_replace": 3,
  "num_attention_heads": 128,
  "num_key_value_heads": 128,
  "q_lora_rank": 1536,
  "kv_lora_rank": 512,
  "qk_nope_head_dim": 128,
  "qk_rope_head_dim": 64,
  "v_head_dim": 128,
  "index_n_heads": 64,
  "index_head_dim": 128,
  "index_topk": 2048,
  "rope_theta": 10000,
  "rope_scaling": {"type": "yarn", "factor": 40, "original_max_position_embeddings": 4096,
                   "beta_fast": 32, "beta_slow": 1, "mscale": 1.0, "mscale_all_dim": 1.0},
  "rms_norm_eps": 1e-06,
  "max_position_embeddings": 163840,
  "num_nextn_predict_layers": 1,
  "torch_dtype": "bfloat16"
})";

// Hy4-preview (dsa_mla.md §1.2): indexer_types full at {0, 1, 5, 9, ..., 77}.
constexpr const char* kHy4 = R"({
  "architectures": ["HYV4ForCausalLM"],
  "model_type": "hy_v4",
  "vocab_size": 120832,
  "hidden_size": 6144,
  "num_hidden_layers": 78,
  "num_attention_heads": 64,
  "q_lora_rank": 2048,
  "kv_lora_rank": 512,
  "qk_nope_head_dim": 192,
  "qk_rope_head_dim": 64,
  "v_head_dim": 256,
  "index_n_heads": 32,
  "index_head_dim": 128,
  "index_topk": 2048,
  "gated_mla": true,
  "gating_type": "elementwise",
  "learnable_sink": true,
  "indexer_types": [
    "full", "full", "shared", "shared", "shared", "full", "shared", "shared", "shared", "full", "shared",
    "shared", "shared", "full", "shared", "shared", "shared", "full", "shared", "shared", "shared", "full",
    "shared", "shared", "shared", "full", "shared", "shared", "shared", "full", "shared", "shared", "shared",
    "full", "shared", "shared", "shared", "full", "shared", "shared", "shared", "full", "shared", "shared",
    "shared", "full", "shared", "shared", "shared", "full", "shared", "shared", "shared", "full", "shared",
    "shared", "shared", "full", "shared", "shared", "shared", "full", "shared", "shared", "shared", "full",
    "shared", "shared", "shared", "full", "shared", "shared", "shared", "full", "shared", "shared", "shared",
    "full"],
  "rope_parameters": {"rope_type": "default", "rope_theta": 10000000.0},
  "rms_norm_eps": 1e-05,
  "max_position_embeddings": 262144,
  "num_nextn_predict_layers": 1,
  "hc_mult": 4
})";

// A copy, so that `const auto& c = dsa(parse_ok(...))` extends the lifetime of what it binds.
DsaMlaConfig dsa(const ModelConfig& config) {
    EXPECT_NE(config.dsa_mla(), nullptr) << config.model_type;
    return config.dsa_mla() ? *config.dsa_mla() : DsaMlaConfig{};
}

std::set<int64_t> full_layers(const DsaMlaConfig& c) {
    std::set<int64_t> full;
    for (size_t i = 0; i < c.layers.size(); ++i)
        if (c.layers[i].kind == DsaLayerKind::full) full.insert(static_cast<int64_t>(i));
    return full;
}

// Checks each layer's top-k source: itself when full, else the nearest full layer before it.
void expect_sources_follow_full_layers(const DsaMlaConfig& c) {
    int64_t last_full = -1;
    for (size_t i = 0; i < c.layers.size(); ++i) {
        SCOPED_TRACE(i);
        if (c.layers[i].kind == DsaLayerKind::full) last_full = static_cast<int64_t>(i);
        ASSERT_GE(last_full, 0);
        EXPECT_EQ(c.layers[i].topk_source_layer, last_full);
    }
}

std::set<int64_t> hy4_release_full_layers() {
    std::set<int64_t> full = {0};
    for (int64_t i = 1; i < 78; i += 4) full.insert(i);  // dsa_mla.md §1.2: [0, 1, *range(5, 78, 4)]
    return full;
}

TEST(ConfigDsaMla, V32FieldsAndScales) {
    ModelConfig config = parse_ok(kV32);
    EXPECT_EQ(config.model_type, "deepseek_v32");
    const DsaMlaConfig& c = dsa(config);
    EXPECT_EQ(c.model, DsaMlaModel::deepseek_v32);
    EXPECT_EQ(c.hidden_size, 7168);
    EXPECT_EQ(c.num_hidden_layers, 61);
    EXPECT_EQ(c.num_attention_heads, 128);
    EXPECT_EQ(c.q_lora_rank, 1536);
    EXPECT_EQ(c.kv_lora_rank, 512);
    EXPECT_EQ(c.qk_nope_head_dim, 128);
    EXPECT_EQ(c.qk_rope_head_dim, 64);
    EXPECT_EQ(c.v_head_dim, 128);
    EXPECT_EQ(c.index_n_heads, 64);
    EXPECT_EQ(c.index_head_dim, 128);
    EXPECT_EQ(c.index_topk, 2048);
    EXPECT_EQ(c.qk_head_dim, 192);
    EXPECT_EQ(c.kv_cache_dim, 576);
    // §1.1: 192^-0.5 · (0.1·ln 40 + 1)² = 0.13523378.
    EXPECT_NEAR(c.softmax_scale, 0.13523378, 5e-9);
    EXPECT_DOUBLE_EQ(c.indexer_softmax_scale, 1.0 / std::sqrt(128.0));
    EXPECT_DOUBLE_EQ(c.indexer_head_weight_scale, 1.0 / 8.0);
    EXPECT_NEAR(c.indexer_softmax_scale * c.indexer_head_weight_scale, 0.0110485, 1e-7);
    EXPECT_DOUBLE_EQ(c.latent_norm_eps, 1e-6);
    EXPECT_DOUBLE_EQ(c.indexer_key_norm_eps, 1e-6);
    EXPECT_EQ(c.output_gate, DsaOutputGate::none);
    EXPECT_FALSE(c.has_attention_sink);
}

TEST(ConfigDsaMla, V32EveryLayerFull) {
    const DsaMlaConfig& c = dsa(parse_ok(kV32));
    ASSERT_EQ(c.layers.size(), 61u);
    EXPECT_EQ(full_layers(c).size(), 61u);
    expect_sources_follow_full_layers(c);
    ASSERT_EQ(c.mtp_layers.size(), 1u);
    EXPECT_EQ(c.mtp_layers[0].kind, DsaLayerKind::full);
    EXPECT_EQ(c.mtp_layers[0].topk_source_layer, 61);
    // deepseek_v32 has no shared layers even if a config carried Hy4's schedule keys.
    EXPECT_EQ(full_layers(dsa(parse_ok(patched(kV32, R"({"index_topk_freq": 4})")))).size(), 61u);
}

TEST(ConfigDsaMla, V32Rope) {
    const DsaMlaConfig& c = dsa(parse_ok(kV32));
    // §2.2: one table of width 64; MLA slice interleaved on the last dims; indexer NeoX on the first dims.
    EXPECT_EQ(c.rope_mla.theta, 10000.0);
    EXPECT_EQ(c.rope_mla.rotated_dims, 64);
    EXPECT_EQ(c.rope_mla.slice, RopeConfigSlice::last);
    EXPECT_EQ(c.rope_mla.pairing, RopeConfigPairing::interleaved);
    EXPECT_EQ(c.rope_indexer.theta, 10000.0);
    EXPECT_EQ(c.rope_indexer.rotated_dims, 64);
    EXPECT_EQ(c.rope_indexer.slice, RopeConfigSlice::first);
    EXPECT_EQ(c.rope_indexer.pairing, RopeConfigPairing::neox);
    for (const RopeConfig* rope : {&c.rope_mla, &c.rope_indexer}) {
        ASSERT_TRUE(rope->yarn.has_value());
        EXPECT_EQ(rope->yarn->factor, 40.0);
        EXPECT_EQ(rope->yarn->original_max_position_embeddings, 4096);
        EXPECT_EQ(rope->yarn->beta_fast, 32.0);
        EXPECT_EQ(rope->yarn->beta_slow, 1.0);
        // mscale = mscale_all_dim = 1: cos/sin unscaled.
        EXPECT_DOUBLE_EQ(rope->yarn->attention_factor, 1.0);
        // §1.1: correction range 10 / 23.
        RopeConfigYarnRange range = rope_config_yarn_range(*rope);
        EXPECT_EQ(range.low, 10.0);
        EXPECT_EQ(range.high, 23.0);
    }
    EXPECT_STREQ(rope_config_pairing_name(c.rope_indexer.pairing), "neox");
    EXPECT_STREQ(rope_config_slice_name(c.rope_indexer.slice), "first");
}

TEST(ConfigDsaMla, V32TransformersLayoutAgrees) {
    // transformers 5.x writes the scaling as rope_parameters with rope_theta inside, and layer_types.
    std::string json = patched(kV32, R"({"rope_theta": null, "rope_scaling": null,
        "rope_parameters": {"rope_type": "yarn", "rope_theta": 10000.0, "factor": 40.0,
                            "original_max_position_embeddings": 4096, "beta_fast": 32.0, "beta_slow": 1.0,
                            "mscale": 1.0, "mscale_all_dim": 1.0},
        "layer_types": ["deepseek_sparse_attention", "deepseek_sparse_attention", "deepseek_sparse_attention"],
        "num_hidden_layers": 3})");
    const DsaMlaConfig& c = dsa(parse_ok(json));
    EXPECT_NEAR(c.softmax_scale, 0.13523378, 5e-9);
    EXPECT_EQ(c.rope_mla.theta, 10000.0);
    ASSERT_TRUE(c.rope_mla.yarn.has_value());
    EXPECT_DOUBLE_EQ(c.rope_mla.yarn->attention_factor, 1.0);
    EXPECT_EQ(full_layers(c).size(), 3u);
}

TEST(ConfigDsaMla, V32YarnAttentionFactorRule) {
    // Only mscale_all_dim: a = m(40, 1) = 1.3688879 on cos/sin; the scale keeps its m².
    const DsaMlaConfig& only_all_dim = dsa(parse_ok(patched(kV32, R"({"rope_scaling": {"mscale": null}})")));
    EXPECT_NEAR(only_all_dim.rope_mla.yarn->attention_factor, 1.3688879, 1e-7);
    EXPECT_NEAR(only_all_dim.rope_indexer.yarn->attention_factor, 1.3688879, 1e-7);
    EXPECT_NEAR(only_all_dim.softmax_scale, 0.13523378, 5e-9);
    // mscale ≠ mscale_all_dim: a = m(40, mscale) / m(40, mscale_all_dim).
    const DsaMlaConfig& ratio = dsa(parse_ok(patched(kV32, R"({"rope_scaling": {"mscale": 0.5}})")));
    EXPECT_DOUBLE_EQ(ratio.rope_mla.yarn->attention_factor,
                     (0.05 * std::log(40.0) + 1.0) / (0.1 * std::log(40.0) + 1.0));
    // An explicit attention_factor wins.
    const DsaMlaConfig& given = dsa(parse_ok(patched(kV32, R"({"rope_scaling": {"attention_factor": 0.75}})")));
    EXPECT_EQ(given.rope_mla.yarn->attention_factor, 0.75);
    // No mscale_all_dim: no m² in the softmax scale.
    const DsaMlaConfig& no_m = dsa(parse_ok(patched(kV32, R"({"rope_scaling": {"mscale_all_dim": null}})")));
    EXPECT_DOUBLE_EQ(no_m.softmax_scale, 1.0 / std::sqrt(192.0));
    // Plain RoPE: Dqk^-0.5.
    const DsaMlaConfig& plain = dsa(parse_ok(patched(kV32, R"({"rope_scaling": null})")));
    EXPECT_FALSE(plain.rope_mla.yarn.has_value());
    EXPECT_DOUBLE_EQ(plain.softmax_scale, 1.0 / std::sqrt(192.0));
    // truncate = false keeps the correction range fractional.
    const DsaMlaConfig& untruncated = dsa(parse_ok(patched(kV32, R"({"rope_scaling": {"truncate": false}})")));
    RopeConfigYarnRange range = rope_config_yarn_range(untruncated.rope_mla);
    EXPECT_NEAR(range.low, 10.47, 0.01);
    EXPECT_NEAR(range.high, 22.51, 0.01);
}

TEST(ConfigDsaMla, V32LatentEpsIsFixed) {
    // "Decisions for sieve": transformers' V3.2 ignores rms_norm_eps for the latent norms and k_norm.
    const DsaMlaConfig& c = dsa(parse_ok(patched(kV32, R"({"rms_norm_eps": 0.1})")));
    EXPECT_DOUBLE_EQ(c.rms_norm_eps, 0.1);
    EXPECT_DOUBLE_EQ(c.latent_norm_eps, 1e-6);
    EXPECT_DOUBLE_EQ(c.indexer_key_norm_eps, 1e-6);
}

TEST(ConfigDsaMla, Hy4FieldsAndScales) {
    ModelConfig config = parse_ok(kHy4);
    EXPECT_EQ(config.model_type, "hy_v4");
    const DsaMlaConfig& c = dsa(config);
    EXPECT_EQ(c.model, DsaMlaModel::hy_v4);
    EXPECT_EQ(c.hidden_size, 6144);
    EXPECT_EQ(c.num_attention_heads, 64);
    EXPECT_EQ(c.q_lora_rank, 2048);
    EXPECT_EQ(c.v_head_dim, 256);
    EXPECT_EQ(c.index_n_heads, 32);
    EXPECT_EQ(c.qk_head_dim, 256);
    EXPECT_EQ(c.kv_cache_dim, 576);
    EXPECT_DOUBLE_EQ(c.softmax_scale, 0.0625);  // §1.2: 256^-0.5, no YaRN mscale
    EXPECT_DOUBLE_EQ(c.latent_norm_eps, 1e-5);  // rms_norm_eps ("Decisions for sieve")
    EXPECT_DOUBLE_EQ(c.indexer_key_norm_eps, 1e-6);
    EXPECT_EQ(c.output_gate, DsaOutputGate::elementwise);
    EXPECT_TRUE(c.has_attention_sink);
    EXPECT_STREQ(dsa_output_gate_name(c.output_gate), "elementwise");
    // §2.2: both slices interleaved on the last 64 dims, θ from rope_parameters, no YaRN.
    EXPECT_EQ(c.rope_mla.theta, 1.0e7);
    EXPECT_FALSE(c.rope_mla.yarn.has_value());
    EXPECT_EQ(c.rope_indexer.theta, 1.0e7);
    EXPECT_EQ(c.rope_indexer.rotated_dims, 64);
    EXPECT_EQ(c.rope_indexer.slice, RopeConfigSlice::last);
    EXPECT_EQ(c.rope_indexer.pairing, RopeConfigPairing::interleaved);
    EXPECT_EQ(c.rope_mla.slice, RopeConfigSlice::last);
    EXPECT_EQ(c.rope_mla.pairing, RopeConfigPairing::interleaved);
}

TEST(ConfigDsaMla, Hy4SharedTopkSchedule) {
    const DsaMlaConfig& c = dsa(parse_ok(kHy4));
    ASSERT_EQ(c.layers.size(), 78u);
    EXPECT_EQ(full_layers(c), hy4_release_full_layers());
    EXPECT_EQ(full_layers(c).size(), 21u);
    expect_sources_follow_full_layers(c);
    EXPECT_EQ(c.layers[2].kind, DsaLayerKind::shared);
    EXPECT_EQ(c.layers[2].topk_source_layer, 1);
    EXPECT_EQ(c.layers[4].topk_source_layer, 1);
    EXPECT_EQ(c.layers[8].topk_source_layer, 5);
    EXPECT_EQ(c.layers[76].topk_source_layer, 73);
    EXPECT_EQ(c.layers[77].kind, DsaLayerKind::full);
    EXPECT_STREQ(dsa_layer_kind_name(c.layers[3].kind), "shared");
    // MTP layers always run a full indexer (§1.3).
    ASSERT_EQ(c.mtp_layers.size(), 1u);
    EXPECT_EQ(c.mtp_layers[0].kind, DsaLayerKind::full);
    EXPECT_EQ(c.mtp_layers[0].topk_source_layer, 78);
}

TEST(ConfigDsaMla, Hy4ScheduleFromFrequencyRule) {
    // §1.3: without indexer_types, shared iff max(i − offset + 1, 0) % freq ≠ 0 (offset default 2).
    const DsaMlaConfig& freq4 = dsa(parse_ok(patched(kHy4, R"({"indexer_types": null, "index_topk_freq": 4})")));
    EXPECT_EQ(full_layers(freq4), hy4_release_full_layers());
    expect_sources_follow_full_layers(freq4);
    // GLM-5.2's form: freq 4, offset 3 → full layers 0, 1, 2, 6, 10, ..., 74 (21 of 78).
    const DsaMlaConfig& glm = dsa(parse_ok(
        patched(kHy4, R"({"indexer_types": null, "index_topk_freq": 4, "index_skip_topk_offset": 3})")));
    std::set<int64_t> expected = {0, 1, 2};
    for (int64_t i = 6; i <= 74; i += 4) expected.insert(i);
    EXPECT_EQ(full_layers(glm), expected);
    EXPECT_EQ(expected.size(), 21u);
    expect_sources_follow_full_layers(glm);
    // No schedule keys: freq 1, every layer full.
    const DsaMlaConfig& none = dsa(parse_ok(patched(kHy4, R"({"indexer_types": null})")));
    EXPECT_EQ(full_layers(none).size(), 78u);
}

TEST(ConfigDsaMla, Hy4ScheduleFromPattern) {
    // "S" = shared; positions past the pattern's end stay full; the pattern replaces the frequency rule.
    const DsaMlaConfig& c = dsa(parse_ok(patched(kHy4, R"({"indexer_types": null, "num_hidden_layers": 8,
        "index_topk_freq": 3, "index_topk_pattern": "FSSFxS"})")));
    EXPECT_EQ(full_layers(c), (std::set<int64_t>{0, 3, 4, 6, 7}));
    EXPECT_EQ(c.layers[5].topk_source_layer, 4);
    EXPECT_EQ(c.layers[2].topk_source_layer, 0);
    expect_sources_follow_full_layers(c);
    // An empty pattern shares nothing.
    const DsaMlaConfig& empty = dsa(parse_ok(patched(kHy4, R"({"indexer_types": null, "index_topk_freq": 4,
        "index_topk_pattern": ""})")));
    EXPECT_EQ(full_layers(empty).size(), 78u);
}

TEST(ConfigDsaMla, Hy4GateAndSinkOptions) {
    EXPECT_EQ(dsa(parse_ok(patched(kHy4, R"({"gating_type": "headwise"})"))).output_gate, DsaOutputGate::headwise);
    EXPECT_EQ(dsa(parse_ok(patched(kHy4, R"({"gated_mla": false})"))).output_gate, DsaOutputGate::none);
    const DsaMlaConfig& defaults =
        dsa(parse_ok(patched(kHy4, R"({"gated_mla": null, "gating_type": null, "learnable_sink": null})")));
    EXPECT_EQ(defaults.output_gate, DsaOutputGate::elementwise);
    EXPECT_TRUE(defaults.has_attention_sink);
    EXPECT_FALSE(dsa(parse_ok(patched(kHy4, R"({"learnable_sink": false})"))).has_attention_sink);
}

TEST(ConfigDsaMla, SparseLayerTypeAliases) {
    std::string json = patched(kHy4, R"({"num_hidden_layers": 4, "indexer_types": ["full", "shared", "full", "shared"],
        "layer_types": ["deepseek_sparse_attention", "sparse_attention", "sparse", "indexed_attention"]})");
    const DsaMlaConfig& c = dsa(parse_ok(json));
    EXPECT_EQ(full_layers(c), (std::set<int64_t>{0, 2}));
    EXPECT_EQ(c.layers[3].topk_source_layer, 2);
}

// index_topk counts positions of one request: above max_position_embeddings it is refused with both fields
// and values named (before: accepted, and a step then sized its rows by index_topk and threw
// std::bad_alloc); up to it, even at 2^31 − 1 with such a context, it is accepted and the model sizes its
// rows by the step (tests/models/dsa_mla).
TEST(ConfigDsaMla, IndexTopkWithinTheContext) {
    expect_error(patched(kV32, R"({"index_topk": 2147483647})"), StatusCode::invalid_argument,
                 {"field \"index_topk\" = 2147483647 exceeds field \"max_position_embeddings\" = 163840"});
    expect_error(patched(kHy4, R"({"index_topk": 262145})"), StatusCode::invalid_argument,
                 {"field \"index_topk\" = 262145", "field \"max_position_embeddings\" = 262144"});
    EXPECT_EQ(dsa(parse_ok(patched(kV32, R"({"index_topk": 163840})"))).index_topk, 163840);
    const DsaMlaConfig widest =
        dsa(parse_ok(patched(kV32, R"({"index_topk": 2147483647, "max_position_embeddings": 2147483647})")));
    EXPECT_EQ(widest.index_topk, 2147483647);
}

TEST(ConfigDsaMla, Errors) {
    expect_error(patched(kHy4, R"({"indexer_types": ["full", "shared"]})"), StatusCode::invalid_argument,
                 {"field \"indexer_types\": 2 entries, expected num_hidden_layers = 78"});
    expect_error(patched(kHy4, R"({"num_hidden_layers": 2, "indexer_types": ["full", "dense"]})"),
                 StatusCode::invalid_argument, {"field \"indexer_types[1]\"", "\"dense\""});
    expect_error(patched(kHy4, R"({"num_hidden_layers": 2, "indexer_types": ["shared", "full"]})"),
                 StatusCode::invalid_argument, {"field \"indexer_types[0]\"", "no earlier layer is \"full\""});
    expect_error(patched(kHy4, R"({"indexer_types": null, "index_topk_freq": 2, "index_skip_topk_offset": 0})"),
                 StatusCode::invalid_argument, {"layer 0 is shared", "index_topk_freq"});
    expect_error(patched(kHy4, R"({"indexer_types": null, "num_hidden_layers": 2, "index_topk_pattern": "SF"})"),
                 StatusCode::invalid_argument, {"layer 0 is shared"});
    expect_error(patched(kHy4, R"({"indexer_types": null, "index_topk_freq": 0})"), StatusCode::invalid_argument,
                 {"field \"index_topk_freq\": must be positive, got 0"});
    expect_error(patched(kHy4, R"({"indexer_types": null, "index_topk_pattern": 7})"), StatusCode::invalid_argument,
                 {"field \"index_topk_pattern\"", "expected a string"});
    expect_error(patched(kV32, R"({"num_hidden_layers": 2, "layer_types": ["deepseek_sparse_attention",
                 "full_attention"]})"),
                 StatusCode::unsupported, {"field \"layer_types[1]\"", "\"full_attention\"", "deepseek_sparse_attention"});
    expect_error(patched(kV32, R"({"layer_types": ["sparse"]})"), StatusCode::invalid_argument,
                 {"field \"layer_types\": 1 entries, expected num_hidden_layers = 61"});
    expect_error(patched(kV32, R"({"qk_rope_head_dim": 256})"), StatusCode::invalid_argument,
                 {"\"qk_rope_head_dim\" = 256", "\"index_head_dim\" = 128"});
    expect_error(patched(kV32, R"({"qk_rope_head_dim": 63})"), StatusCode::invalid_argument,
                 {"field \"qk_rope_head_dim\"", "63", "even"});
    expect_error(patched(kV32, R"({"q_lora_rank": null})"), StatusCode::not_found, {"field \"q_lora_rank\""});
    expect_error(patched(kV32, R"({"kv_lora_rank": -512})"), StatusCode::invalid_argument,
                 {"field \"kv_lora_rank\": must be positive, got -512"});
    expect_error(patched(kV32, R"({"rope_scaling": {"type": "dynamic"}})"), StatusCode::unsupported,
                 {"field \"rope_scaling.type\"", "\"dynamic\""});
    expect_error(patched(kV32, R"({"rope_scaling": {"beta_fast": 1e-320}})"), StatusCode::invalid_argument,
                 {"YaRN correction range", "not finite", "beta_fast 1e-320"});
    expect_error(patched(kV32, R"({"rope_scaling": {"beta_fast": 0}})"), StatusCode::invalid_argument,
                 {"field \"rope_scaling.beta_fast\"", "must be > 0"});
    expect_error(patched(kV32, R"({"rope_scaling": {"mscale": -7.0}})"),
                 StatusCode::invalid_argument, {"YaRN attention factor", "must be > 0"});
    expect_error(patched(kV32, R"({"rope_theta": null})"), StatusCode::not_found, {"field \"rope_theta\""});
    expect_error(patched(kHy4, R"({"rope_parameters": {"rope_theta": null}})"), StatusCode::not_found,
                 {"field \"rope_theta\"", "rope_parameters.rope_theta"});
    expect_error(patched(kHy4, R"({"gating_type": "channelwise"})"), StatusCode::invalid_argument,
                 {"field \"gating_type\"", "\"channelwise\""});
    expect_error(patched(kHy4, R"({"learnable_sink": "yes"})"), StatusCode::invalid_argument,
                 {"field \"learnable_sink\"", "expected true or false"});
}

}  // namespace
}  // namespace sieve
