// The DSA-on-MLA model's pieces against an independent naive (non-absorbed) reference (naive_reference.h):
// absorbed MLA ≡ naive MLA under the model's own sparse selection, sparse ≡ dense when every causal token is
// selected (requests shorter than index_topk, and index_topk raised above every request), shared layers
// reusing their source's selection; cache groups agreeing with the layout; loading both checkpoint name
// layouts and FP8 block-scaled weights; and the errors for missing or malformed tensors and unsupported
// configurations.
#include <gtest/gtest.h>

#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <limits>
#include <regex>

#include "sieve/backends/backend.h"
#include "model_test_util.h"
#include "sieve/models/attention_layout.h"
#include "sieve/models/model_factory.h"
#include "naive_reference.h"

namespace sieve::model_test {
namespace {

Expected<std::unique_ptr<AttentionModel>> load(const ModelConfig& config, const Checkpoint& ckpt, Backend& b,
                                               NumericsProfile profile = NumericsProfile::exact,
                                               std::vector<int64_t> layers = {}) {
    ModelOptions o;
    o.profile = profile;
    o.backend = &b;
    o.layers = std::move(layers);
    return load_attention_model(config, ckpt, o);
}

ModelConfig config_with(const Golden& g, const std::string& from, const std::string& to) {
    std::string json = g.config_json;
    const size_t at = json.find(from);
    EXPECT_NE(at, std::string::npos) << from;
    json.replace(at, from.size(), to);
    auto c = parse_model_config(json, "modified config.json");
    EXPECT_TRUE(c.has_value()) << c.status().to_string();
    return std::move(*c);
}

// Per position, the selection the model used (from the run's observer records).
std::vector<std::vector<int32_t>> selections_of(const GoldenRun& r, int64_t request, int64_t layer, int64_t T) {
    std::vector<std::vector<int32_t>> out(static_cast<size_t>(T));
    const auto& rows = r.requests[static_cast<size_t>(request)].selections[static_cast<size_t>(layer)];
    EXPECT_EQ(static_cast<int64_t>(rows.size()), T) << "layer " << layer << ": a selection for every token";
    for (int64_t p = 0; p < T && p < static_cast<int64_t>(rows.size()); ++p) out[static_cast<size_t>(p)] = rows.at(p).selected;
    return out;
}

class NaiveEquivalence : public testing::TestWithParam<std::string> {};

// Absorbed sparse MLA (the model) = naive MLA masked to the model's own selection; shared layers use the
// selection their source layer made in the same step.
TEST_P(NaiveEquivalence, AbsorbedSparseEqualsNaiveOnTheSameSelection) {
    const Golden g = load_golden(GetParam());
    const DsaMlaConfig& c = *g.config.dsa_mla();
    const auto weights = checkpoint_tensors(*g.checkpoint);
    auto b = test_backend();
    auto model = load(g.config, *g.checkpoint, *b);
    ASSERT_TRUE(model.has_value()) << model.status().to_string();
    for (const char* name : {"one-shot", "chunk:6"}) {
        auto run = run_fixture(**model, g, schedule(name, g));
        ASSERT_TRUE(run.has_value()) << run.status().to_string();
        for (int64_t r = 0; r < g.n_requests(); ++r) {
            const int64_t T = g.fixture.requests[static_cast<size_t>(r)].n_tokens;
            for (int64_t l = 0; l < c.num_hidden_layers; ++l) {
                SCOPED_TRACE(fmt::format("{} {} request {} layer {}", GetParam(), name, r, l));
                const auto sel = selections_of(*run, r, l, T);
                const int64_t source = c.layers[static_cast<size_t>(l)].topk_source_layer;
                if (source != l) {
                    EXPECT_EQ(sel, selections_of(*run, r, source, T)) << "shared layer reuses layer " << source;
                }
                // Every row: min(K, p + 1) distinct causal positions, ascending, then −1 up to the step's row
                // width, which is min(K, the most positions a token of the step sees).
                for (int64_t p = 0; p < T; ++p) {
                    const auto& row = sel[static_cast<size_t>(p)];
                    const int64_t n = std::min<int64_t>(c.index_topk, p + 1);
                    ASSERT_GE(static_cast<int64_t>(row.size()), n);
                    ASSERT_LE(static_cast<int64_t>(row.size()), c.index_topk);
                    for (int64_t j = 0; j < static_cast<int64_t>(row.size()); ++j) {
                        if (j < n) {
                            EXPECT_GE(row[static_cast<size_t>(j)], 0);
                            EXPECT_LE(row[static_cast<size_t>(j)], p);
                            if (j > 0) {
                                EXPECT_LT(row[static_cast<size_t>(j - 1)], row[static_cast<size_t>(j)]);
                            }
                        } else {
                            EXPECT_EQ(row[static_cast<size_t>(j)], -1);
                        }
                    }
                }
                NaiveLayer naive(c, weights, l);
                const auto want = naive.forward(g.input(r, l), sel);
                const OutputDiff d = output_diff(run->requests[static_cast<size_t>(r)].outputs[static_cast<size_t>(l)], want);
                EXPECT_LE(d.rel, 2e-6) << "max |Δ| " << d.max_abs;
            }
        }
    }
}

// Sparse = dense exactly when every causal token is selected: requests shorter than index_topk take the
// whole causal prefix without scoring (observer: empty scores), and raising index_topk above every
// request makes all rows dense; both equal the naive dense-causal reference.
TEST_P(NaiveEquivalence, SparseEqualsDenseWhenEveryTokenIsSelected) {
    const Golden g = load_golden(GetParam());
    const auto weights = checkpoint_tensors(*g.checkpoint);
    auto b = test_backend();
    const std::string k_field = fmt::format("\"index_topk\": {}", g.config.dsa_mla()->index_topk);
    for (const bool raised : {false, true}) {
        const ModelConfig config = raised ? config_with(g, k_field, "\"index_topk\": 1000") : g.config;
        const DsaMlaConfig& c = *config.dsa_mla();
        auto model = load(config, *g.checkpoint, *b);
        ASSERT_TRUE(model.has_value()) << model.status().to_string();
        auto run = run_fixture(**model, g, schedule("chunk:5", g));
        ASSERT_TRUE(run.has_value()) << run.status().to_string();
        for (int64_t r = 0; r < g.n_requests(); ++r) {
            const int64_t T = g.fixture.requests[static_cast<size_t>(r)].n_tokens;
            if (!raised && T > c.index_topk) continue;  // selects for p ≥ K: covered by the test above
            for (int64_t l = 0; l < c.num_hidden_layers; ++l) {
                SCOPED_TRACE(fmt::format("{} index_topk {} request {} layer {}", GetParam(), c.index_topk, r, l));
                for (int64_t p = 0; p < T; ++p) {
                    EXPECT_TRUE(run->requests[static_cast<size_t>(r)].selections[static_cast<size_t>(l)].at(p).scores.empty()) << "position " << p << " was scored";
                    const auto& row = run->requests[static_cast<size_t>(r)].selections[static_cast<size_t>(l)].at(p).selected;
                    for (int64_t j = 0; j <= p; ++j) EXPECT_EQ(row[static_cast<size_t>(j)], j);
                }
                const auto want = NaiveLayer(c, weights, l).forward(g.input(r, l), {});
                const OutputDiff d = output_diff(run->requests[static_cast<size_t>(r)].outputs[static_cast<size_t>(l)], want);
                EXPECT_LE(d.rel, 2e-6) << "max |Δ| " << d.max_abs;
                // And the transformers reference agrees (for T ≤ K it is dense too).
                if (!raised) {
                    EXPECT_LE(output_diff(run->requests[static_cast<size_t>(r)].outputs[static_cast<size_t>(l)],
                                   g.output(r, l)).rel, 1e-5);
                }
            }
        }
    }
}

INSTANTIATE_TEST_SUITE_P(Fixtures, NaiveEquivalence, testing::Values("deepseek_v32", "hy_v4"));

TEST(DsaMlaModel, CacheGroupsAgreeWithLayout) {
    for (const char* name : {"deepseek_v32", "hy_v4"}) {
        const Golden g = load_golden(name);
        auto b = test_backend();
        for (const auto profile : {NumericsProfile::exact, NumericsProfile::deployed}) {
            SCOPED_TRACE(fmt::format("{} {}", name, numerics_profile_name(profile)));
            auto model = load(g.config, *g.checkpoint, *b, profile);
            ASSERT_TRUE(model.has_value()) << model.status().to_string();
            const auto groups = (*model)->cache_groups();
            const AttentionLayout layout = *attention_layout(g.config, profile);
            const DsaMlaConfig& c = *g.config.dsa_mla();
            // Every layer keeps latents, only the full-indexer layers keep keys (hy_v4's shared layers
            // reuse another layer's top-k, dsa_mla.md §1.3), each in layer order.
            std::vector<int64_t> all, full;
            for (int64_t l = 0; l < c.num_hidden_layers; ++l) {
                all.push_back(l);
                if (c.layers[static_cast<size_t>(l)].kind == DsaLayerKind::full) full.push_back(l);
            }
            ASSERT_EQ(groups.size(), 2u);
            EXPECT_EQ(groups[0].name, "latent_kv");
            EXPECT_EQ(groups[0].layers, all);
            EXPECT_EQ(groups[1].name, "indexer_keys");
            EXPECT_EQ(groups[1].layers, full);
            EXPECT_EQ(groups[0].block_size, 64);  // dsa_mla.md §4.1
            const bool exact = profile == NumericsProfile::exact;
            // R = 32, Dr = 8, Di = 16: exact f32 [40] and [16]; deployed 32 fp8 + 1 scale + 8 bf16, 16 fp8 + 1 scale.
            EXPECT_EQ(groups[0].spec.entry_bytes, exact ? 160 : 32 + 4 + 16);
            EXPECT_EQ(groups[1].spec.entry_bytes, exact ? 64 : 16 + 4);
            for (const auto& l : layout.layers)
                for (const CacheSpec& s : l.caches) {
                    const auto& g = s.name == "latent_kv" ? groups[0] : groups[1];
                    EXPECT_EQ(g.spec.entry_bytes, s.entry_bytes) << s.name;
                    EXPECT_EQ(g.spec.format, s.format) << s.name;
                }
            EXPECT_EQ((*model)->layers().size(), static_cast<size_t>(c.num_hidden_layers));
        }
    }
}

// The DeepSeek reference's names (layers.N.attn.wq_a …, dsa_mla.md §6.1) load the same model.
TEST(DsaMlaModel, DeepseekNameLayoutLoadsTheSameModel) {
    const Golden g = load_golden("deepseek_v32");
    const std::vector<std::pair<std::string, std::string>> renames = {
        {"self_attn.q_a_proj", "attn.wq_a"},         {"self_attn.q_a_layernorm", "attn.q_norm"},
        {"self_attn.q_b_proj", "attn.wq_b"},         {"self_attn.kv_a_proj_with_mqa", "attn.wkv_a"},
        {"self_attn.kv_a_layernorm", "attn.kv_norm"}, {"self_attn.kv_b_proj", "attn.wkv_b"},
        {"self_attn.o_proj", "attn.wo"},             {"self_attn.indexer", "attn.indexer"}};
    auto tensors = checkpoint_tensors(*g.checkpoint);
    for (HostTensor& t : tensors) {
        for (const auto& [hf, ds] : renames) {
            const size_t at = t.name.find(hf);
            if (at != std::string::npos) {
                t.name.replace(at, hf.size(), ds);
                t.name = t.name.substr(std::string("model.").size());  // DS-ref: no "model." prefix
                break;
            }
        }
    }
    auto ckpt = memory_checkpoint(tensors, "deepseek names");
    ASSERT_TRUE(ckpt.has_value()) << ckpt.status().to_string();
    auto b = test_backend();
    auto hf = load(g.config, *g.checkpoint, *b);
    auto ds = load(g.config, **ckpt, *b);
    ASSERT_TRUE(hf.has_value()) << hf.status().to_string();
    ASSERT_TRUE(ds.has_value()) << ds.status().to_string();
    auto a = run_fixture(**hf, g, schedule("chunk:7", g));
    auto d = run_fixture(**ds, g, schedule("chunk:7", g));
    ASSERT_TRUE(a.has_value()) << a.status().to_string();
    ASSERT_TRUE(d.has_value()) << d.status().to_string();
    for (size_t r = 0; r < a->requests.size(); ++r) EXPECT_EQ(a->requests[r].outputs, d->requests[r].outputs) << "request " << r;

    // Both layouts at once is ambiguous.
    auto both = tensors;
    for (const HostTensor& t : checkpoint_tensors(*g.checkpoint))
        if (t.name.find("self_attn") != std::string::npos) both.push_back(t);
    auto ckpt_both = memory_checkpoint(both, "both layouts");
    ASSERT_TRUE(ckpt_both.has_value()) << ckpt_both.status().to_string();
    auto bad = load(g.config, **ckpt_both, *b);
    ASSERT_FALSE(bad.has_value());
    EXPECT_NE(bad.status().message().find("both"), std::string::npos) << bad.status().to_string();
}

// FP8 e4m3 weights with 128×128 block scales (`.weight_scale_inv` f32 or `.scale` e8m0, §3.6) give the same
// model as their dequantized f32 values.
TEST(DsaMlaModel, Fp8BlockWeightsEqualTheirDequantizedValues) {
    const Golden g = load_golden("hy_v4");
    const std::regex fp8_names(R"(.*self_attn\.(q_a_proj|q_b_proj|kv_a_proj_with_mqa|kv_b_proj|o_proj|indexer\.wq_b|indexer\.wk)\.weight)");
    for (const bool e8m0 : {false, true}) {
        std::vector<HostTensor> fp8, dequant;
        for (const HostTensor& t : checkpoint_tensors(*g.checkpoint)) {
            if (!std::regex_match(t.name, fp8_names)) {
                fp8.push_back(t);
                dequant.push_back(t);
                continue;
            }
            Fp8Blocks q = fp8_blocks(t.f32(), t.shape[0], t.shape[1], Fp8Scale::ue8m0);
            const std::string stem = t.name.substr(0, t.name.size() - std::string(".weight").size());
            if (e8m0) {
                HostTensor s{stem + ".scale", DType::f8_e8m0, q.scale_shape, {}};
                for (float x : q.scales) s.bytes.push_back(ue8m0_from_pow2(x));
                fp8.push_back(std::move(s));
            } else {
                fp8.push_back(HostTensor::from_f32(stem + ".weight_scale_inv", q.scale_shape, q.scales));
            }
            fp8.push_back({t.name, DType::f8_e4m3, t.shape, std::move(q.values)});
            dequant.push_back(HostTensor::from_f32(t.name, t.shape, q.dequantized));
        }
        auto c8 = memory_checkpoint(fp8, "fp8");
        auto cd = memory_checkpoint(dequant, "dequantized");
        ASSERT_TRUE(c8.has_value() && cd.has_value());
        for (const char* spec : {"cpu", "ref"}) {
            SCOPED_TRACE(fmt::format("{} scales, backend {}", e8m0 ? "e8m0" : "f32", spec));
            auto b = test_backend(spec);
            auto m8 = load(g.config, **c8, *b);
            auto md = load(g.config, **cd, *b);
            ASSERT_TRUE(m8.has_value()) << m8.status().to_string();
            ASSERT_TRUE(md.has_value()) << md.status().to_string();
            auto r8 = run_fixture(**m8, g, schedule("one-shot", g));
            auto rd = run_fixture(**md, g, schedule("one-shot", g));
            ASSERT_TRUE(r8.has_value() && rd.has_value());
            for (size_t r = 0; r < r8->requests.size(); ++r) {
                for (size_t l = 0; l < r8->layers.size(); ++l)
                    EXPECT_LE(output_diff(r8->requests[r].outputs[l], rd->requests[r].outputs[l]).rel, 1e-6)
                        << "request " << r << " layer " << l;
                EXPECT_EQ(selected_rows(r8->requests[r]), selected_rows(rd->requests[r])) << "request " << r;
            }
        }
    }
}

// index_topk = max_position_embeddings = 2^31 − 1 (a config that passes validation): the model runs, sizes
// its selection rows and slot lists by what the step can use (min(index_topk, positions seen)) and equals
// the same model at index_topk 1000 (both dense on these short requests); its scratch stays small. Before,
// a step allocated T × index_topk selection entries and std::bad_alloc escaped the forward call.
TEST_P(NaiveEquivalence, HugeIndexTopkSizesRowsByTheStep) {
    const Golden g = load_golden(GetParam());
    const std::string k_field = fmt::format("\"index_topk\": {}", g.config.dsa_mla()->index_topk);
    std::string json = g.config_json;
    json.replace(json.find(k_field), k_field.size(), "\"index_topk\": 2147483647");
    const std::string ctx_field =
        fmt::format("\"max_position_embeddings\": {}", g.config.dsa_mla()->max_position_embeddings);
    json.replace(json.find(ctx_field), ctx_field.size(), "\"max_position_embeddings\": 2147483647");
    auto huge = parse_model_config(json, "modified config.json");
    ASSERT_TRUE(huge.has_value()) << huge.status().to_string();
    const ModelConfig wide = config_with(g, k_field, "\"index_topk\": 1000");
    auto b = test_backend();
    for (const NumericsProfile profile : {NumericsProfile::exact, NumericsProfile::deployed}) {
        SCOPED_TRACE(numerics_profile_name(profile));
        auto mh = load(*huge, *g.checkpoint, *b, profile);
        auto mw = load(wide, *g.checkpoint, *b, profile);
        ASSERT_TRUE(mh.has_value()) << mh.status().to_string();
        ASSERT_TRUE(mw.has_value()) << mw.status().to_string();
        for (const char* name : {"one-shot", "decode"}) {
            SCOPED_TRACE(name);
            auto rh = run_fixture(**mh, g, schedule(name, g));
            auto rw = run_fixture(**mw, g, schedule(name, g));
            ASSERT_TRUE(rh.has_value()) << rh.status().to_string();
            ASSERT_TRUE(rw.has_value()) << rw.status().to_string();
            for (size_t r = 0; r < rh->requests.size(); ++r) {
                for (size_t l = 0; l < rh->layers.size(); ++l)
                    EXPECT_EQ(rh->requests[r].outputs[l], rw->requests[r].outputs[l]) << "request " << r << " layer " << l;
                EXPECT_EQ(selected_rows(rh->requests[r]), selected_rows(rw->requests[r])) << "request " << r;
            }
        }
        EXPECT_LT((*mh)->workspace_bytes(), int64_t{64} << 20) << "scratch sized by index_topk";
    }
}

// The fixture's tensors with layer 0's attention poisoned: one NaN in q_b_proj (q of head 0, dim 0, for
// every token), or (huge_scale) q_b_proj as e4m3 values with unit block scales except block [0, 0]'s, 3e38:
// finite, so the loader accepts it, but its e4m3 values of magnitude ≥ 1.2 dequantize to inf.
std::vector<HostTensor> with_poisoned_attention_weight(const Golden& g, bool huge_scale) {
    const std::string target = "model.layers.0.self_attn.q_b_proj.weight";
    std::vector<HostTensor> tensors;
    for (const HostTensor& t : checkpoint_tensors(*g.checkpoint)) {
        if (t.name != target) {
            tensors.push_back(t);
            continue;
        }
        std::vector<float> v = t.f32();
        if (!huge_scale) {
            v[0] = std::numeric_limits<float>::quiet_NaN();
            tensors.push_back(HostTensor::from_f32(t.name, t.shape, v));
            continue;
        }
        const int64_t rows = t.shape[0], cols = t.shape[1], br = (rows + 127) / 128, bc = (cols + 127) / 128;
        HostTensor w{t.name, DType::f8_e4m3, t.shape, std::vector<uint8_t>(static_cast<size_t>(rows * cols))};
        for (size_t i = 0; i < v.size(); ++i) w.bytes[i] = f32_to_fp8_e4m3(std::clamp(v[i] * 64.0f, -448.0f, 448.0f));
        std::vector<float> scale(static_cast<size_t>(br * bc), 1.0f / 64.0f);
        scale[0] = 3e38f;
        tensors.push_back(std::move(w));
        tensors.push_back(HostTensor::from_f32(target.substr(0, target.size() - 7) + ".weight_scale_inv", {br, bc}, scale));
    }
    return tensors;
}

// Non-finite values among layer 0's outputs of a run of every fixture request (chunks of 6 tokens).
int64_t non_finite_layer0_outputs(const Golden& g, const Checkpoint& ckpt, const char* backend_spec,
                                  NumericsProfile profile) {
    auto b = test_backend(backend_spec);
    auto model = load(g.config, ckpt, *b, profile, {0});
    EXPECT_TRUE(model.has_value()) << model.status().to_string();
    if (!model) return -1;
    auto run = run_fixture(**model, g, schedule("chunk:6", g));
    EXPECT_TRUE(run.has_value()) << run.status().to_string();
    if (!run) return -1;
    int64_t n = 0;
    for (const GoldenRequestRun& request : run->requests)
        for (float x : request.outputs.at(0)) n += !std::isfinite(x);
    return n;
}

// A NaN attention weight, or an FP8 block scale so large that its block dequantizes to inf, makes the layer's
// outputs non-finite, so that a run counts them (`sieve run` reports non_finite_outputs): NaN logits must
// not turn into zero rows in sparse attention (ops/sparse_attention.h). Before, attention returned 0 for the
// poisoned heads and every output stayed finite. Both families, both profiles, cpu and ref.
TEST_P(NaiveEquivalence, NonFiniteWeightsGiveNonFiniteOutputs) {
    const Golden g = load_golden(GetParam());
    for (const bool huge_scale : {false, true}) {
        auto ckpt = memory_checkpoint(with_poisoned_attention_weight(g, huge_scale), "poisoned");
        ASSERT_TRUE(ckpt.has_value()) << ckpt.status().to_string();
        for (const NumericsProfile profile : {NumericsProfile::exact, NumericsProfile::deployed})
            for (const char* spec : {"cpu", "ref"}) {
                SCOPED_TRACE(fmt::format("{} {} {}", huge_scale ? "huge fp8 block scale" : "NaN weight",
                                         numerics_profile_name(profile), spec));
                EXPECT_GT(non_finite_layer0_outputs(g, **ckpt, spec, profile), 0);
            }
    }
}

// Writes, under $SIEVE_NUMERICS_SCRATCH (else a temporary directory, removed after), nan_weight/<family>: a
// checkpoint directory of each DSA fixture with one NaN in layer 0's q_b_proj, on which
// tests/cli/numerics_cases.cmake runs `sieve run` and expects non_finite_outputs > 0; checks that the copy
// loads and gives non-finite outputs.
TEST(DsaMlaFixtureCopies, WriteNanWeight) {
    namespace fs = std::filesystem;
    const char* env = std::getenv("SIEVE_NUMERICS_SCRATCH");
    const bool own = !(env && *env);
    const fs::path root = own ? fs::temp_directory_path() / fmt::format("sieve_nan_weight_{}", ::getpid()) : fs::path(env);
    for (const char* family : {"deepseek_v32", "hy_v4"}) {
        SCOPED_TRACE(family);
        const Golden g = load_golden(family);
        const fs::path dir = root / "nan_weight" / family;
        const Status st = write_checkpoint_dir(with_poisoned_attention_weight(g, false), g.config_json, dir);
        ASSERT_TRUE(st.is_ok()) << st.to_string();
        auto config = load_model_config(dir);
        auto ckpt = Checkpoint::open(dir);
        ASSERT_TRUE(config.has_value()) << config.status().to_string();
        ASSERT_TRUE(ckpt.has_value()) << ckpt.status().to_string();
        EXPECT_GT(non_finite_layer0_outputs(g, **ckpt, "cpu", NumericsProfile::deployed), 0);
    }
    if (own) fs::remove_all(root);
}

// vLLM's headwise gate (§2.9: linear_gate [H, D], one sigmoid per head), which transformers does not
// implement: the model against the naive reference on a checkpoint whose gates were replaced.
TEST(DsaMlaModel, HeadwiseGateMatchesNaive) {
    const Golden g = load_golden("hy_v4");
    const ModelConfig config = config_with(g, "\"indexer_types\"", "\"gating_type\": \"headwise\", \"indexer_types\"");
    ASSERT_EQ(config.dsa_mla()->output_gate, DsaOutputGate::headwise);
    const DsaMlaConfig& c = *config.dsa_mla();
    auto tensors = checkpoint_tensors(*g.checkpoint);
    uint32_t seed = 12345;
    for (HostTensor& t : tensors) {
        if (t.name.find("self_attn.linear_gate.weight") == std::string::npos) continue;
        std::vector<float> g(static_cast<size_t>(c.num_attention_heads * c.hidden_size));
        for (float& v : g) {
            seed = seed * 1664525u + 1013904223u;
            v = (static_cast<float>(seed >> 8) / 16777216.0f - 0.5f) * 0.5f;
        }
        t = HostTensor::from_f32(t.name, {c.num_attention_heads, c.hidden_size}, g);
    }
    auto ckpt = memory_checkpoint(tensors, "headwise gate");
    ASSERT_TRUE(ckpt.has_value());
    auto b = test_backend();
    auto model = load(config, **ckpt, *b);
    ASSERT_TRUE(model.has_value()) << model.status().to_string();
    auto run = run_fixture(**model, g, schedule("chunk:9", g));
    ASSERT_TRUE(run.has_value()) << run.status().to_string();
    for (int64_t r = 0; r < g.n_requests(); ++r)
        for (int64_t l = 0; l < c.num_hidden_layers; ++l) {
            const int64_t T = g.fixture.requests[static_cast<size_t>(r)].n_tokens;
            const auto want = NaiveLayer(c, tensors, l).forward(g.input(r, l), selections_of(*run, r, l, T));
            const OutputDiff d = output_diff(run->requests[static_cast<size_t>(r)].outputs[static_cast<size_t>(l)], want);
            EXPECT_LE(d.rel, 2e-6) << "request " << r << " layer " << l;
            // The gate made a difference: the elementwise-gated reference output is far away.
            EXPECT_GT(output_diff(run->requests[static_cast<size_t>(r)].outputs[static_cast<size_t>(l)], g.output(r, l)).rel, 1e-2);
        }
    // An elementwise-sized gate under a headwise config is an error naming both.
    auto wrong = load(config, *g.checkpoint, *b);
    ASSERT_FALSE(wrong.has_value());
    EXPECT_NE(wrong.status().message().find("linear_gate.weight"), std::string::npos) << wrong.status().to_string();
}

// Errors name the tensor, the values and the rule.
TEST(DsaMlaModel, LoadErrors) {
    const Golden g = load_golden("hy_v4");
    auto b = test_backend();
    auto expect_error = [&](const ModelConfig& config, const std::vector<HostTensor>& tensors, StatusCode code,
                            const std::vector<std::string>& needles, std::vector<int64_t> layers = {},
                            NumericsProfile profile = NumericsProfile::exact) {
        auto ckpt = memory_checkpoint(tensors, "modified");
        ASSERT_TRUE(ckpt.has_value());
        auto m = load(config, **ckpt, *b, profile, layers);
        ASSERT_FALSE(m.has_value());
        EXPECT_EQ(m.status().code(), code) << m.status().to_string();
        for (const auto& n : needles) EXPECT_NE(m.status().message().find(n), std::string::npos) << m.status().to_string();
    };
    const auto all = checkpoint_tensors(*g.checkpoint);
    auto without = [&](const std::string& name) {
        std::vector<HostTensor> v;
        for (const HostTensor& t : all)
            if (t.name != name) v.push_back(t);
        return v;
    };
    // A missing tensor.
    expect_error(g.config, without("model.layers.2.self_attn.kv_b_proj.weight"), StatusCode::not_found,
                 {"model.layers.2.self_attn.kv_b_proj.weight"});
    expect_error(g.config, without("model.layers.0.self_attn.indexer.k_norm.bias"), StatusCode::not_found,
                 {"indexer.k_norm.bias"});
    expect_error(g.config, without("model.layers.1.self_attn.q_a_proj.weight"), StatusCode::not_found,
                 {"layer 1", "model.layers.1.self_attn.q_a_proj.weight", "layers.1.attn.wq_a.weight"});
    // A wrong shape.
    auto reshaped = all;
    for (HostTensor& t : reshaped)
        if (t.name == "model.layers.0.self_attn.q_b_proj.weight") {
            t.shape = {48, 64};
            t.bytes.resize(48 * 64 * 4);
        }
    expect_error(g.config, reshaped, StatusCode::invalid_argument,
                 {"model.layers.0.self_attn.q_b_proj.weight", "[48, 64]", "[96, 32]"});
    // Gate and sink must agree with the config (the checkpoint decides, "Decisions for sieve").
    expect_error(g.config, without("model.layers.3.self_attn.linear_gate.weight"), StatusCode::invalid_argument,
                 {"layer 3", "elementwise", "linear_gate.weight", "absent"});
    expect_error(g.config, without("model.layers.0.self_attn.learnable_sink_param"), StatusCode::invalid_argument,
                 {"learnable_sink", "absent"});
    // Layers: a shared layer without its source, an unknown one, an MTP layer whose tensors are missing.
    expect_error(g.config, all, StatusCode::invalid_argument, {"layer 3", "layer 2", "not among"}, {0, 3});
    expect_error(g.config, all, StatusCode::invalid_argument, {"layer 9"}, {9});
    const ModelConfig mtp = config_with(g, "\"num_hidden_layers\": 4", "\"num_hidden_layers\": 4, \"num_nextn_predict_layers\": 1");
    expect_error(mtp, all, StatusCode::not_found, {"layer 4", "model.mtp_layers.0.self_attn.q_a_proj.weight"}, {4});
    // Unsupported deployed geometry: an fp8_v32 latent needs whole 128-value scale groups.
    const ModelConfig wide = config_with(g, "\"kv_lora_rank\": 32", "\"kv_lora_rank\": 160");
    expect_error(wide, all, StatusCode::unsupported, {"kv_lora_rank = 160"}, {}, NumericsProfile::deployed);
}

// On a device the host cannot touch (host-copy, backends/host_copy) the model equals the same model on the
// inner backend bit for bit: without an observer (the fused selection on the device, unscored rows left to
// selected_slots, shared layers reading their source's rows in place), with one (the one readback: rows and
// scores down, rows back up) and with one that changes the rows (attention and the shared layers must use
// the changed rows), in both profiles, in one step and in chunks.
TEST(DsaMlaModel, HostCopyEqualsItsInnerBackend) {
    enum class Mode { fused, observed, changed };
    const auto drop_first = [](std::span<int32_t> selected) {
        if (selected.size() < 2 || selected[1] < 0) return;
        std::rotate(selected.begin(), selected.begin() + 1, selected.end());
        selected.back() = -1;
    };
    for (const char* name : {"deepseek_v32", "hy_v4"}) {
        const Golden g = load_golden(name);
        for (const NumericsProfile profile : {NumericsProfile::exact, NumericsProfile::deployed}) {
            std::vector<std::vector<GoldenRun>> runs;  // [backend][schedule × mode]
            for (const char* spec : {"cpu", "host-copy:cpu"}) {
                auto b = test_backend(spec);
                auto model = load(g.config, *g.checkpoint, *b, profile);
                ASSERT_TRUE(model.has_value()) << model.status().to_string();
                runs.emplace_back();
                for (const char* sched : {"one-shot", "chunk:16"})
                    for (const Mode mode : {Mode::fused, Mode::observed, Mode::changed}) {
                        SCOPED_TRACE(fmt::format("{} {} {} {} mode {}", name, numerics_profile_name(profile), spec,
                                                 sched, static_cast<int>(mode)));
                        GoldenRunOptions o;
                        o.observe = mode != Mode::fused;
                        if (mode == Mode::changed)
                            o.rewrite = [&](int64_t, int64_t, int64_t, std::span<int32_t> selected, std::span<const float>,
                                            int64_t) { drop_first(selected); };
                        auto run = run_fixture(**model, g, schedule(sched, g), o);
                        ASSERT_TRUE(run.has_value()) << run.status().to_string();
                        runs.back().push_back(std::move(*run));
                    }
            }
            for (size_t i = 0; i < runs[0].size(); ++i) {
                SCOPED_TRACE(fmt::format("{} {} run {}", name, numerics_profile_name(profile), i));
                // outputs, and each token's rows and scores
                EXPECT_EQ(runs[0][i].requests, runs[1][i].requests);
            }
            // The changed rows reached attention (one shot: run 2 against run 1), and a shared layer saw its
            // source's rows as the observer left them (§1.3): the rows its source chose, changed.
            const GoldenRun& changed = runs[1][2];
            bool outputs_changed = false;
            for (size_t r = 0; r < changed.requests.size(); ++r)
                outputs_changed |= changed.requests[r].outputs != runs[1][1].requests[r].outputs;
            EXPECT_TRUE(outputs_changed);
            const DsaMlaConfig& c = *g.config.dsa_mla();
            for (size_t r = 0; r < changed.requests.size(); ++r)
                for (size_t layer = 0; layer < changed.layers.size(); ++layer) {
                    const int64_t source = c.layers[layer].topk_source_layer;
                    if (source == static_cast<int64_t>(layer)) continue;
                    const auto& rows = changed.requests[r].selections[layer];
                    EXPECT_EQ(rows.size(), static_cast<size_t>(g.fixture.requests[r].n_tokens));
                    for (const auto& [position, record] : rows) {
                        std::vector<int32_t> want =
                            changed.requests[r].selections[static_cast<size_t>(source)].at(position).selected;
                        drop_first(want);
                        EXPECT_EQ(record.selected, want) << "request " << r << " layer " << layer << " position " << position;
                    }
                }
        }
    }
}

// A shared layer run without its source layer in the same step is an error, never a silent reuse of stale
// indices (dsa_mla.md §1.3, §7.9); so is a layer of a step that was not planned (attention_model.h).
TEST(DsaMlaModel, SharedLayerNeedsItsSourceInTheSameStep) {
    const Golden g = load_golden("hy_v4");
    auto b = test_backend();
    auto model = load(g.config, *g.checkpoint, *b);
    ASSERT_TRUE(model.has_value());
    std::vector<std::unique_ptr<CacheGroup>> groups;
    StepCaches caches;
    for (const CacheGroupDesc& d : (*model)->cache_groups()) {
        groups.push_back(CacheGroup::create(*b, d.name, d.spec, d.block_size, 4, d.n_layers()).value());
        ASSERT_TRUE(groups.back()->reserve(7, 3).is_ok());
        caches.groups.push_back(groups.back().get());
    }
    const StepBatch batch = make_step_batch({{7, 0, 3, false}}, caches);
    std::vector<float> in(3 * 64, 0.5f), out(3 * 64);
    const Status unplanned = (*model)->forward(0, batch, in.data(), out.data(), nullptr);
    EXPECT_EQ(unplanned.code(), StatusCode::internal);
    EXPECT_NE(unplanned.message().find("not planned"), std::string::npos) << unplanned.to_string();
    ASSERT_TRUE((*model)->plan_step(batch).is_ok());
    const Status s = (*model)->forward(1, batch, in.data(), out.data(), nullptr);
    EXPECT_EQ(s.code(), StatusCode::internal);
    EXPECT_NE(s.message().find("reuses the top-k of layer 0"), std::string::npos) << s.to_string();
    ASSERT_TRUE((*model)->forward(0, batch, in.data(), out.data(), nullptr).is_ok());
    EXPECT_TRUE((*model)->forward(1, batch, in.data(), out.data(), nullptr).is_ok());
    const StepBatch next = make_step_batch({{7, 0, 2, false}}, caches);  // another step: layer 0 not rerun
    EXPECT_EQ((*model)->forward(1, next, in.data(), out.data(), nullptr).code(), StatusCode::internal);  // not planned
    ASSERT_TRUE((*model)->plan_step(next).is_ok());
    const Status stale = (*model)->forward(1, next, in.data(), out.data(), nullptr);
    EXPECT_EQ(stale.code(), StatusCode::internal);
    EXPECT_NE(stale.message().find("did not run in this step"), std::string::npos) << stale.to_string();
    // The same batch planned again is a new step too: its source must run again.
    ASSERT_TRUE((*model)->plan_step(batch).is_ok());
    EXPECT_EQ((*model)->forward(1, batch, in.data(), out.data(), nullptr).code(), StatusCode::internal);
}

}  // namespace
}  // namespace sieve::model_test
