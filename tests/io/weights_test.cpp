#include "io/weights.h"

#include <gtest/gtest.h>

#include <bit>
#include <cmath>

#include "io_test_util.h"

namespace sieve {
namespace {

using test::expect_error;
using test::TempDir;
using test::to_bytes;

// Builds a checkpoint from (name, dtype, shape, bytes) entries, in one or two shards.
class CheckpointBuilder {
public:
    template <typename T>
    CheckpointBuilder& add(std::string name, DType dtype, Shape shape, const std::vector<T>& values, int shard = 0) {
        payloads_.push_back(to_bytes(values));
        entries_[shard].push_back({std::move(name), dtype, std::move(shape), {}});
        payload_of_.push_back({shard, entries_[shard].size() - 1});
        return *this;
    }
    // A tensor of the given shape whose values do not matter.
    CheckpointBuilder& add_zeros(std::string name, DType dtype, Shape shape, int shard = 0) {
        const size_t n = static_cast<size_t>(shape_numel(shape).value()) * dtype_size(dtype);
        return add(std::move(name), dtype, std::move(shape), std::vector<uint8_t>(n), shard);
    }
    std::unique_ptr<Checkpoint> build(const TempDir& dir) {
        for (size_t i = 0; i < payloads_.size(); ++i) {
            const auto [shard, index] = payload_of_[i];
            entries_[shard][index].bytes = payloads_[i];
        }
        const bool sharded = !entries_[1].empty();
        for (int s = 0; s < (sharded ? 2 : 1); ++s) {
            const auto name = sharded ? shard_name(s) : std::string("model.safetensors");
            EXPECT_TRUE(write_safetensors(dir / name, entries_[s]).is_ok());
        }
        auto ckpt = Checkpoint::open(dir.path());
        EXPECT_TRUE(ckpt.has_value()) << ckpt.status().to_string();
        return ckpt.has_value() ? std::move(ckpt).value() : nullptr;
    }
    static std::string shard_name(int s) { return "model-0000" + std::to_string(s + 1) + "-of-00002.safetensors"; }

private:
    std::vector<std::vector<uint8_t>> payloads_;
    std::vector<SafetensorsWriteEntry> entries_[2];
    std::vector<std::pair<int, size_t>> payload_of_;
};

TEST(WeightNames, CandidatesPerFamily) {
    using V = std::vector<std::string>;
    EXPECT_EQ(weight_name_candidates(WeightFamily::deepseek_v4, "layers.3.attn.wq_a.weight"),
              (V{"layers.3.attn.wq_a.weight", "model.layers.3.attn.wq_a.weight"}));
    EXPECT_EQ(weight_name_candidates(WeightFamily::deepseek_v4, "layers.3.attn.kv_norm.weight"),
              (V{"layers.3.attn.kv_norm.weight", "model.layers.3.attn.kv_norm.weight", "layers.3.attn.norm.weight",
                 "model.layers.3.attn.norm.weight"}));
    // Segment-aligned: the compressor's norm and a kv_norm outside attn are not the main KV norm.
    EXPECT_EQ(weight_name_candidates(WeightFamily::deepseek_v4, "layers.3.attn.compressor.norm.weight"),
              (V{"layers.3.attn.compressor.norm.weight", "model.layers.3.attn.compressor.norm.weight"}));
    EXPECT_EQ(weight_name_candidates(WeightFamily::deepseek_v4, "layers.3.xattn.kv_norm.weight").size(), 2u);
    EXPECT_EQ(weight_name_candidates(WeightFamily::dsa_mla, "model.layers.0.self_attn.linear_gate.weight"),
              (V{"model.layers.0.self_attn.linear_gate.weight", "model.layers.0.self_attn.gate_proj.weight",
                 "model.layers.0.self_attn.g_proj.weight"}));
    EXPECT_EQ(weight_name_candidates(WeightFamily::dsa_mla, "model.layers.0.self_attn.learnable_sink_param"),
              (V{"model.layers.0.self_attn.learnable_sink_param", "model.layers.0.self_attn.sinks"}));
    // The MLP's linear_gate is not an attention gate alias.
    EXPECT_EQ(weight_name_candidates(WeightFamily::dsa_mla, "model.layers.0.mlp.linear_gate.weight"),
              (V{"model.layers.0.mlp.linear_gate.weight"}));
    EXPECT_EQ(weight_name_candidates(WeightFamily::qsa, "model.layers.3.self_attn.q_proj.weight"),
              (V{"model.layers.3.self_attn.q_proj.weight", "model.language_model.layers.3.self_attn.q_proj.weight"}));
    // Only a leading "model" segment is the prefix.
    EXPECT_EQ(weight_name_candidates(WeightFamily::qsa, "mtp.layers.0.model.x"), (V{"mtp.layers.0.model.x"}));
    EXPECT_EQ(weight_name_candidates(WeightFamily::qsa, "modelx.layers.0"), (V{"modelx.layers.0"}));

    EXPECT_EQ(weight_family_for_model_type("deepseek_v4"), WeightFamily::deepseek_v4);
    EXPECT_EQ(weight_family_for_model_type("deepseek_v32"), WeightFamily::dsa_mla);
    EXPECT_EQ(weight_family_for_model_type("hy_v4"), WeightFamily::dsa_mla);
    EXPECT_EQ(weight_family_for_model_type("qwen4_exp"), WeightFamily::qsa);
    EXPECT_EQ(weight_family_for_model_type("llama"), std::nullopt);
}

TEST(Weights, ResolvesDeepseekV4Layouts) {
    const std::vector<float> norm{1, 2, 3, 4};
    {  // transformers save_pretrained layout
        TempDir dir;
        auto ckpt = CheckpointBuilder().add("model.layers.0.attn.norm.weight", DType::f32, {4}, norm).build(dir);
        ASSERT_TRUE(ckpt);
        WeightStore store(*ckpt, WeightFamily::deepseek_v4);
        auto attn = store.scope("layers.0").sub("attn");
        EXPECT_EQ(attn.canonical_name("kv_norm.weight"), "layers.0.attn.kv_norm.weight");
        auto t = attn.get("kv_norm.weight", {4}, kWeightFloatDTypes);
        ASSERT_TRUE(t.has_value()) << t.status().to_string();
        EXPECT_EQ(t->as<float>()[3], 4.0f);
        EXPECT_EQ(store.requested_tensors(), (std::vector<std::string>{"model.layers.0.attn.norm.weight"}));
    }
    {  // original layout
        TempDir dir;
        auto ckpt = CheckpointBuilder().add("layers.0.attn.kv_norm.weight", DType::f32, {4}, norm).build(dir);
        ASSERT_TRUE(ckpt);
        WeightStore store(*ckpt, WeightFamily::deepseek_v4);
        EXPECT_TRUE(store.root().sub("layers.0.attn").get("kv_norm.weight", {4}, kWeightFloatDTypes).has_value());
    }
    {  // both spellings: ambiguous, both named
        TempDir dir;
        auto ckpt = CheckpointBuilder()
                        .add("layers.0.attn.kv_norm.weight", DType::f32, {4}, norm, 0)
                        .add("model.layers.0.attn.norm.weight", DType::f32, {4}, norm, 1)
                        .build(dir);
        ASSERT_TRUE(ckpt);
        WeightStore store(*ckpt, WeightFamily::deepseek_v4);
        auto attn = store.scope("layers.0.attn");
        expect_error(attn.get("kv_norm.weight", {4}, kWeightFloatDTypes).status(), StatusCode::corrupt,
                     {"layers.0.attn.kv_norm.weight", "ambiguous", "model.layers.0.attn.norm.weight",
                      CheckpointBuilder::shard_name(0), CheckpointBuilder::shard_name(1)});
        expect_error(attn.has("kv_norm.weight").status(), StatusCode::corrupt, {"ambiguous"});
    }
}

TEST(Weights, ResolvesDsaMlaAndQsaAliases) {
    TempDir dir;
    auto ckpt = CheckpointBuilder()
                    .add_zeros("model.layers.0.self_attn.gate_proj.weight", DType::bf16, {8, 4})
                    .add("model.layers.0.self_attn.sinks", DType::f32, {2}, std::vector<float>{0.5f, -1.0f})
                    .build(dir);
    ASSERT_TRUE(ckpt);
    WeightStore store(*ckpt, WeightFamily::dsa_mla);
    auto attn = store.scope("model.layers.0.self_attn");
    EXPECT_TRUE(attn.get("linear_gate.weight", {8, 4}, kWeightFloatDTypes).has_value());
    auto sink = attn.get("learnable_sink_param", {2}, DTypeSet{DType::f32});
    ASSERT_TRUE(sink.has_value());
    EXPECT_EQ(sink->as<float>()[1], -1.0f);
    EXPECT_TRUE(store.unrequested_tensors().empty());

    TempDir qdir;
    auto qckpt =
        CheckpointBuilder().add_zeros("model.language_model.layers.3.self_attn.q_norm.weight", DType::bf16, {16}).build(qdir);
    ASSERT_TRUE(qckpt);
    WeightStore qstore(*qckpt, WeightFamily::qsa);
    auto q = qstore.scope("model.layers.3.self_attn").get("q_norm.weight", {16}, kWeightFloatDTypes, DType::bf16);
    ASSERT_TRUE(q.has_value()) << q.status().to_string();
    EXPECT_EQ(q->dtype(), DType::bf16);
}

TEST(Weights, ShapeAndDTypeErrors) {
    TempDir dir;
    auto ckpt = CheckpointBuilder()
                    .add_zeros("layers.3.attn.attn_sink", DType::f32, {8}, 0)
                    .add_zeros("layers.3.attn.wq_b.weight", DType::bf16, {64, 16}, 1)
                    .build(dir);
    ASSERT_TRUE(ckpt);
    WeightStore store(*ckpt, WeightFamily::deepseek_v4);
    auto attn = store.scope("layers.3.attn");
    const Status shape = attn.get("wq_b.weight", {64, 32}, kWeightFloatDTypes).status();
    EXPECT_EQ(shape.code(), StatusCode::invalid_argument);
    EXPECT_EQ(shape.message(),
              "tensor layers.3.attn.wq_b.weight (in model-00002-of-00002.safetensors): shape [64, 16], expected [64, 32]");
    expect_error(attn.get("wq_b.weight", {64}, kWeightFloatDTypes).status(), StatusCode::invalid_argument,
                 {"shape [64, 16], expected [64]"});
    expect_error(attn.get("wq_b.weight", {-1, 8}, kWeightFloatDTypes).status(), StatusCode::invalid_argument,
                 {"expected [?, 8]"});
    EXPECT_TRUE(attn.get("wq_b.weight", {-1, 16}, kWeightFloatDTypes).has_value());
    expect_error(attn.get("attn_sink", {8}, DTypeSet{DType::bf16, DType::f16}).status(), StatusCode::invalid_argument,
                 {"tensor layers.3.attn.attn_sink (in model-00001-of-00002.safetensors)", "dtype f32, expected f16, bf16"});
    // Missing tensors name every spelling tried and are remembered; has() is not a request.
    expect_error(attn.get("wkv.weight", {4, 4}, kWeightFloatDTypes).status(), StatusCode::not_found,
                 {"layers.3.attn.wkv.weight", "model.layers.3.attn.wkv.weight"});
    auto has = attn.has("wo_a.weight");
    ASSERT_TRUE(has.has_value());
    EXPECT_FALSE(*has);
    EXPECT_TRUE(*attn.has("attn_sink"));
    EXPECT_EQ(store.missing_tensors(), (std::vector<std::string>{"layers.3.attn.wkv.weight"}));
}

TEST(Weights, RequestedAndUnrequested) {
    TempDir dir;
    auto ckpt = CheckpointBuilder()
                    .add_zeros("layers.0.attn.attn_sink", DType::f32, {4})
                    .add_zeros("layers.0.attn.q_norm.weight", DType::bf16, {4})
                    .add_zeros("layers.0.ffn.experts.0.w1.weight", DType::i8, {4, 2})
                    .add_zeros("embed.weight", DType::bf16, {8, 4})
                    .build(dir);
    ASSERT_TRUE(ckpt);
    WeightStore store(*ckpt, WeightFamily::deepseek_v4);
    auto attn = store.scope("layers.0.attn");
    EXPECT_TRUE(attn.get("attn_sink", {4}, DTypeSet{DType::f32}).has_value());
    auto raw = attn.raw("q_norm.weight");
    ASSERT_TRUE(raw.has_value());
    EXPECT_EQ(raw->dtype, DType::bf16);
    EXPECT_EQ(store.unrequested_tensors(),
              (std::vector<std::string>{"embed.weight", "layers.0.ffn.experts.0.w1.weight"}));
    EXPECT_TRUE(store.missing_tensors().empty());
}

// ---- FP8 block-scaled weights ------------------------------------------------------------------------

struct Fp8Case {
    int64_t rows, cols;
    std::vector<uint8_t> w8;  // [rows, cols]
};

Fp8Case random_fp8(int64_t rows, int64_t cols, uint32_t seed) {
    std::mt19937 rng(seed);
    Fp8Case c{rows, cols, std::vector<uint8_t>(static_cast<size_t>(rows * cols))};
    for (auto& b : c.w8) {
        b = static_cast<uint8_t>(rng());
        if ((b & 0x7f) == 0x7f) b ^= 1;  // no NaN codes: the comparison below is bitwise
    }
    return c;
}

// The scalar definition: W[o, i] = e4m3(W8[o, i]) · scale[o / 128, i / 128].
float reference_dequant(const Fp8Case& c, const std::vector<float>& scale_mult, int64_t o, int64_t i) {
    const int64_t scale_cols = (c.cols + 127) / 128;
    return fp8_e4m3_to_f32(c.w8[static_cast<size_t>(o * c.cols + i)]) *
           scale_mult[static_cast<size_t>((o / 128) * scale_cols + i / 128)];
}

TEST(WeightsFp8, DequantizesWithE8m0ScaleAndPartialBlocks) {
    // 200 = 128 + 72 rows, 300 = 128 + 128 + 44 columns: partial edge blocks on both axes.
    const Fp8Case c = random_fp8(200, 300, 7);
    const std::vector<uint8_t> scale_e8m0{120, 127, 130, 115, 140, 126};  // [2, 3], 2^(b − 127)
    std::vector<float> mult;
    for (uint8_t b : scale_e8m0) mult.push_back(std::ldexp(1.0f, b - 127));
    TempDir dir;
    auto ckpt = CheckpointBuilder()
                    .add("layers.0.attn.wq_a.weight", DType::f8_e4m3, {200, 300}, c.w8)
                    .add("layers.0.attn.wq_a.scale", DType::f8_e8m0, {2, 3}, scale_e8m0)
                    .build(dir);
    ASSERT_TRUE(ckpt);
    WeightStore store(*ckpt, WeightFamily::deepseek_v4);
    auto attn = store.scope("layers.0.attn");
    auto f32 = attn.get("wq_a.weight", {200, 300}, kWeightFloatOrFp8DTypes);
    ASSERT_TRUE(f32.has_value()) << f32.status().to_string();
    auto bf16 = attn.get("wq_a.weight", {200, 300}, kWeightFloatOrFp8DTypes, DType::bf16);
    ASSERT_TRUE(bf16.has_value());
    for (int64_t o = 0; o < 200; ++o)
        for (int64_t i = 0; i < 300; ++i) {
            const float want = reference_dequant(c, mult, o, i);
            ASSERT_EQ(std::bit_cast<uint32_t>(f32->as<float>()[o * 300 + i]), std::bit_cast<uint32_t>(want))
                << o << ", " << i;
            ASSERT_EQ(bf16->as<uint16_t>()[o * 300 + i], f32_to_bf16(want)) << o << ", " << i;
        }
    // The scale counts as requested.
    EXPECT_TRUE(store.unrequested_tensors().empty());

    // Packed form: same bytes, scale as f32 multipliers, and the standalone dequantizer agrees.
    auto packed = attn.get_fp8_block("wq_a.weight", 200, 300);
    ASSERT_TRUE(packed.has_value()) << packed.status().to_string();
    EXPECT_EQ(packed->scale_name, "layers.0.attn.wq_a.scale");
    EXPECT_EQ(packed->scale.shape(), (Shape{2, 3}));
    EXPECT_EQ(packed->scale.as<float>()[2], mult[2]);
    EXPECT_TRUE(std::equal(packed->weight.begin(), packed->weight.end(), c.w8.begin(), c.w8.end()));
    auto again = fp8_block_dequantize(*packed);
    ASSERT_TRUE(again.has_value());
    EXPECT_EQ(std::memcmp(again->data(), f32->data(), f32->nbytes()), 0);
    // The packed dequantizer checks its inputs.
    Fp8BlockWeight broken = std::move(packed).value();
    broken.cols = 299;
    expect_error(fp8_block_dequantize(broken).status(), StatusCode::invalid_argument, {"wq_a.weight"});
}

TEST(WeightsFp8, DequantizesWithF32WeightScaleInv) {
    // The HF / vLLM convention: X.weight_scale_inv, f32, a multiplier despite its name.
    const Fp8Case c = random_fp8(129, 130, 11);
    const std::vector<float> mult{0.37f, 1.5e-3f, 3.0f, 0.0625f};  // [2, 2]
    TempDir dir;
    auto ckpt = CheckpointBuilder()
                    .add("model.layers.0.self_attn.q_a_proj.weight", DType::f8_e4m3, {129, 130}, c.w8)
                    .add("model.layers.0.self_attn.q_a_proj.weight_scale_inv", DType::f32, {2, 2}, mult)
                    .build(dir);
    ASSERT_TRUE(ckpt);
    WeightStore store(*ckpt, WeightFamily::dsa_mla);
    auto w = store.scope("model.layers.0.self_attn").get("q_a_proj.weight", {129, 130}, kWeightFloatOrFp8DTypes);
    ASSERT_TRUE(w.has_value()) << w.status().to_string();
    for (int64_t o = 0; o < 129; ++o)
        for (int64_t i = 0; i < 130; ++i)
            ASSERT_EQ(w->as<float>()[o * 130 + i], reference_dequant(c, mult, o, i)) << o << ", " << i;
}

TEST(WeightsFp8, ConfigurableBlockSize) {
    const Fp8Case c = random_fp8(5, 7, 3);
    const std::vector<float> mult{2.0f, 0.5f, 4.0f, 8.0f, 0.25f, 1.0f};  // [⌈5/2⌉, ⌈7/4⌉] = [3, 2]
    TempDir dir;
    auto ckpt = CheckpointBuilder()
                    .add("w.weight", DType::f8_e4m3, {5, 7}, c.w8)
                    .add("w.scale", DType::f32, {3, 2}, mult)
                    .build(dir);
    ASSERT_TRUE(ckpt);
    WeightStore store(*ckpt, WeightFamily::qsa, WeightStoreOptions{2, 4});
    auto w = store.root().get("w.weight", {5, 7}, kWeightFloatOrFp8DTypes);
    ASSERT_TRUE(w.has_value()) << w.status().to_string();
    for (int64_t o = 0; o < 5; ++o)
        for (int64_t i = 0; i < 7; ++i)
            EXPECT_EQ(w->as<float>()[o * 7 + i], fp8_e4m3_to_f32(c.w8[o * 7 + i]) * mult[(o / 2) * 2 + i / 4]);
}

TEST(WeightsFp8, Errors) {
    TempDir dir;
    auto ckpt = CheckpointBuilder()
                    // scale of the wrong shape
                    .add_zeros("a.weight", DType::f8_e4m3, {256, 300})
                    .add_zeros("a.scale", DType::f8_e8m0, {2, 2})
                    // two scale siblings
                    .add_zeros("b.weight", DType::f8_e4m3, {4, 4})
                    .add_zeros("b.scale", DType::f8_e8m0, {1, 1})
                    .add_zeros("b.weight_scale_inv", DType::f32, {1, 1})
                    // no scale
                    .add_zeros("c.weight", DType::f8_e4m3, {4, 4})
                    // scale of a wrong dtype
                    .add_zeros("d.weight", DType::f8_e4m3, {4, 4})
                    .add_zeros("d.scale", DType::bf16, {1, 1})
                    // a bf16 weight with a scale
                    .add_zeros("e.weight", DType::bf16, {4, 4})
                    .add_zeros("e.scale", DType::f8_e8m0, {1, 1})
                    // a NaN scale (e8m0 0xFF)
                    .add_zeros("f.weight", DType::f8_e4m3, {4, 4})
                    .add("f.scale", DType::f8_e8m0, {1, 1}, std::vector<uint8_t>{0xff})
                    // FP8 of rank 3
                    .add_zeros("g.weight", DType::f8_e4m3, {2, 2, 2})
                    .build(dir);
    ASSERT_TRUE(ckpt);
    WeightStore store(*ckpt, WeightFamily::qsa);
    auto root = store.root();
    expect_error(root.get("a.weight", {256, 300}, kWeightFloatOrFp8DTypes).status(), StatusCode::invalid_argument,
                 {"tensor a.scale (in model.safetensors): shape [2, 2], expected [2, 3]", "128×128", "a.weight [256, 300]"});
    expect_error(root.get_fp8_block("a.weight", 256, 300).status(), StatusCode::invalid_argument, {"a.scale", "a.weight"});
    expect_error(root.get("b.weight", {4, 4}, kWeightFloatOrFp8DTypes).status(), StatusCode::corrupt,
                 {"b.weight", "b.scale", "b.weight_scale_inv"});
    expect_error(root.get("c.weight", {4, 4}, kWeightFloatOrFp8DTypes).status(), StatusCode::unsupported,
                 {"c.weight", "c.scale", "c.weight_scale_inv"});
    expect_error(root.get("d.weight", {4, 4}, kWeightFloatOrFp8DTypes).status(), StatusCode::invalid_argument,
                 {"d.scale", "BF16", "d.weight"});
    expect_error(root.get("e.weight", {4, 4}, kWeightFloatDTypes).status(), StatusCode::corrupt, {"e.weight", "e.scale"});
    expect_error(root.get("f.weight", {4, 4}, kWeightFloatOrFp8DTypes).status(), StatusCode::corrupt,
                 {"f.scale", "block [0, 0]", "nan"});
    expect_error(root.get("g.weight", {2, 2, 2}, kWeightFloatOrFp8DTypes).status(), StatusCode::unsupported,
                 {"g.weight", "rank 3"});
    // FP8 is refused where the caller does not accept it, and get_fp8_block wants FP8.
    expect_error(root.get("c.weight", {4, 4}, kWeightFloatDTypes).status(), StatusCode::invalid_argument,
                 {"dtype f8_e4m3, expected f32, f16, bf16"});
    expect_error(root.get_fp8_block("e.weight", 4, 4).status(), StatusCode::invalid_argument, {"e.weight", "BF16"});
}

TEST(Weights, OpaqueTensorsAreListedButNotConverted) {
    TempDir dir;
    const auto bytes = test::raw_safetensors(R"({"x.weight":{"dtype":"F4","shape":[2,4],"data_offsets":[0,4]}})", 4);
    test::write_bytes(dir / "model.safetensors", bytes);
    auto ckpt = Checkpoint::open(dir.path());
    ASSERT_TRUE(ckpt.has_value()) << ckpt.status().to_string();
    WeightStore store(**ckpt, WeightFamily::qsa);
    EXPECT_EQ(store.unrequested_tensors(), (std::vector<std::string>{"x.weight"}));
    expect_error(store.root().get("x.weight", {2, 4}, kWeightFloatDTypes).status(), StatusCode::unsupported,
                 {"x.weight", "F4"});
    auto raw = store.root().raw("x.weight");
    ASSERT_TRUE(raw.has_value());
    EXPECT_TRUE(raw->is_opaque());
    EXPECT_EQ(raw->bytes.size(), 4u);
}

}  // namespace
}  // namespace sieve
