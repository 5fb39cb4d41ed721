// `sieve inspect` on the committed fixtures, on a DeepSeek-V4 checkpoint rewritten with the
// original tensor names and FP8 block-scaled weights, and on broken checkpoints.
#include "inspect.h"

#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <random>
#include <sstream>

#include "sieve/core/dtype.h"
#include "sieve/io/checkpoint.h"
#include "sieve/io/safetensors.h"
#include "io/weights.h"

namespace sieve {
namespace {

namespace fs = std::filesystem;
const fs::path kData = SIEVE_TEST_DATA_DIR;

nlohmann::json inspect_json(const fs::path& dir, Status* status = nullptr) {
    std::ostringstream out;
    Status s = cli::run_inspect({dir, true}, out);
    if (status) *status = s;
    else {
        EXPECT_TRUE(s.is_ok()) << s.to_string();
    }
    return nlohmann::json::parse(out.str());
}

std::vector<std::string> kinds(const nlohmann::json& report) {
    std::vector<std::string> k;
    for (const auto& l : report["layers"]) k.push_back(l["kind"]);
    return k;
}

TEST(Inspect, CommittedFixturesMatchTheirConfigs) {
    const std::map<std::string, std::vector<std::string>> expected_kinds = {
        {"deepseek_v4", {"swa", "csa", "hca"}},
        {"deepseek_v32", {"dsa_full", "dsa_full"}},
        {"hy_v4", {"dsa_full", "dsa_shared", "dsa_full", "dsa_shared"}},
        {"qwen4_exp", {"linear_attention", "qsa", "linear_attention", "qsa"}},
    };
    for (const auto& [family, want] : expected_kinds) {
        SCOPED_TRACE(family);
        const nlohmann::json r = inspect_json(kData / family / "ckpt");
        EXPECT_EQ(r["model_type"], family);
        EXPECT_EQ(kinds(r), want);
        EXPECT_EQ(r["problems"], 0);
        for (const auto& l : r["layers"]) {
            EXPECT_TRUE(l["unexpected"].empty()) << l["unexpected"].dump();
            for (const auto& t : l["tensors"]) {
                EXPECT_FALSE(t.contains("problem")) << t.dump();
                EXPECT_EQ(t["shape"], t["expected_shape"]);
            }
            if (l["sieve_runs"]) {
                EXPECT_FALSE(l["tensors"].empty());
            }
        }
    }
}

// The MTP fixtures list their MTP layer after the main ones, under the family's MTP prefix, with every tensor
// found (none missing, none unexpected), and leave its caches out of the per-token totals.
TEST(Inspect, MtpLayersUnderTheirPrefixes) {
    const std::map<std::string, std::pair<int64_t, std::string>> mtp = {
        {"deepseek_v4", {3, "mtp.0.attn."}},
        {"deepseek_v32", {2, "model.layers.2.self_attn."}},
        {"hy_v4", {4, "model.mtp_layers.0.self_attn."}},
        {"qwen4_exp", {4, "mtp.layers.0.self_attn."}},
    };
    for (const auto& [family, where] : mtp) {
        SCOPED_TRACE(family);
        const nlohmann::json r = inspect_json(kData / "mtp" / family / "ckpt");
        const nlohmann::json plain = inspect_json(kData / family / "ckpt");
        EXPECT_EQ(r["problems"], 0);
        ASSERT_EQ(r["layers"].size(), static_cast<size_t>(where.first + 1));
        const nlohmann::json& l = r["layers"].back();
        EXPECT_EQ(l["layer"], where.first);
        EXPECT_TRUE(l["mtp"]);
        EXPECT_TRUE(l["unexpected"].empty()) << l["unexpected"].dump();
        EXPECT_FALSE(l["tensors"].empty());
        for (const auto& t : l["tensors"]) EXPECT_EQ(t["stored_name"].get<std::string>().rfind(where.second, 0), 0u) << t.dump();
        for (size_t i = 0; i + 1 < r["layers"].size(); ++i) EXPECT_FALSE(r["layers"][i]["mtp"]);
        // The same main layers as the plain fixture: the same totals.
        EXPECT_EQ(r["cache_bytes_per_token"], plain["cache_bytes_per_token"]);
    }
    // hy_v4's MTP sink is stored as bf16 (dsa_mla.md §1.2) and read as such.
    const nlohmann::json hy = inspect_json(kData / "mtp" / "hy_v4" / "ckpt");
    bool sink = false;
    for (const auto& t : hy["layers"].back()["tensors"])
        if (t["name"] == "model.mtp_layers.0.self_attn.learnable_sink_param") sink = t["dtype"] == "bf16";
    EXPECT_TRUE(sink);
}

// Each cache names its entry format as ops/cache_record.h does (one name per byte layout), with the
// fixtures' geometry and entry bytes: V4 fp8_model1 records (d = 32, rope 8: 24 + 16 + 8 bytes) and
// fp8_row_scale keys, DSA fp8_v32 latent records (32 + 4 + 16) and fp8_row_scale keys, QSA bf16 rows.
TEST(Inspect, CachesNameTheirEntryFormats) {
    struct Want {
        std::string family, cache, profile, format;
        int64_t entry_bytes;
    };
    const std::vector<Want> wants = {
        {"deepseek_v4", "swa_kv", "deployed", "fp8_model1 [24 + 8 rope]", 48},
        {"deepseek_v4", "compressed_kv", "deployed", "fp8_model1 [24 + 8 rope]", 48},
        {"deepseek_v4", "indexer_keys", "deployed", "fp8_row_scale [16]", 20},
        {"deepseek_v4", "swa_kv", "exact", "f32 [32]", 128},
        {"deepseek_v32", "latent_kv", "deployed", "fp8_v32 [32 + 8 rope]", 52},
        {"deepseek_v32", "indexer_keys", "deployed", "fp8_row_scale [16]", 20},
        {"deepseek_v32", "latent_kv", "exact", "f32 [40]", 160},
        {"qwen4_exp", "kv", "deployed", "bf16 K|V [2, 2·32]", 256},
        {"qwen4_exp", "compressed_keys", "deployed", "bf16 [16]", 32},
        {"qwen4_exp", "raw_key_ring", "exact", "f32 [16]", 64},
    };
    for (const Want& w : wants) {
        SCOPED_TRACE(w.family + " " + w.cache + " " + w.profile);
        const nlohmann::json r = inspect_json(kData / w.family / "ckpt");
        int found = 0;
        for (const auto& l : r["layers"])
            if (l.contains("caches"))
                for (const auto& c : l["caches"][w.profile])
                    if (c["name"] == w.cache) {
                        ++found;
                        EXPECT_EQ(c["format"], w.format);
                        EXPECT_EQ(c["entry_bytes"], w.entry_bytes);
                    }
        EXPECT_GT(found, 0);
    }
}

TEST(Inspect, SharedLayersNameTheirSource) {
    const nlohmann::json r = inspect_json(kData / "hy_v4" / "ckpt");
    EXPECT_EQ(r["layers"][1]["detail"], "top-k from layer 0");
    EXPECT_EQ(r["layers"][3]["detail"], "top-k from layer 2");
    // Shared layers keep no indexer cache (dsa_mla.md §3.3).
    for (int l : {1, 3})
        for (const auto& c : r["layers"][l]["caches"]["deployed"]) EXPECT_NE(c["name"], "indexer_keys");
}

// A scratch directory removed at the end of the test.
struct ScratchDir {
    fs::path path;
    ScratchDir() {
        std::random_device rd;
        path = fs::temp_directory_path() / ("sieve_inspect_" + std::to_string(rd()));
        fs::create_directories(path);
    }
    ~ScratchDir() { fs::remove_all(path); }
};

struct OwnedEntry {
    std::string name;
    DType dtype;
    Shape shape;
    std::vector<uint8_t> bytes;
};

std::vector<uint8_t> as_bytes(const void* p, size_t n) {
    const auto* b = static_cast<const uint8_t*>(p);
    return {b, b + n};
}

// Block-quantizes a [rows, cols] f32 matrix to e4m3 with one UE8M0 scale per 128×128 block, as
// the DeepSeek release stores its linears (deepseek_v4.md §6, §2.7).
void quantize_fp8_blocks(const float* w, int64_t rows, int64_t cols, std::vector<uint8_t>& q,
                         std::vector<uint8_t>& scales) {
    const int64_t br = (rows + 127) / 128, bc = (cols + 127) / 128;
    q.assign(static_cast<size_t>(rows * cols), 0);
    scales.assign(static_cast<size_t>(br * bc), 0);
    for (int64_t bi = 0; bi < br; ++bi)
        for (int64_t bj = 0; bj < bc; ++bj) {
            float amax = 0;
            for (int64_t o = bi * 128; o < std::min(rows, bi * 128 + 128); ++o)
                for (int64_t i = bj * 128; i < std::min(cols, bj * 128 + 128); ++i)
                    amax = std::max(amax, std::fabs(w[o * cols + i]));
            const float s = ue8m0_scale_for_amax(amax);
            scales[bi * bc + bj] = ue8m0_from_pow2(s);
            for (int64_t o = bi * 128; o < std::min(rows, bi * 128 + 128); ++o)
                for (int64_t i = bj * 128; i < std::min(cols, bj * 128 + 128); ++i)
                    q[o * cols + i] = f32_to_fp8_e4m3(w[o * cols + i] / s);
        }
}

bool is_fp8_linear(const std::string& leaf) {
    for (const char* l : {"wq_a.weight", "wq_b.weight", "wkv.weight", "wo_a.weight", "wo_b.weight"})
        if (leaf == l) return true;
    return leaf == "indexer.wq_b.weight";
}

// Rewrites the deepseek_v4 fixture as the original release names it: no "model." prefix,
// attn.kv_norm instead of attn.norm, FP8 e4m3 linears with e8m0 ".scale" siblings.
void write_original_layout_checkpoint(const fs::path& out_dir) {
    auto ckpt = Checkpoint::open(kData / "deepseek_v4" / "ckpt");
    ASSERT_TRUE(ckpt.has_value()) << ckpt.status().to_string();
    std::vector<OwnedEntry> entries;
    for (std::string_view name_view : (*ckpt)->tensor_names()) {
        std::string name(name_view);
        auto view = (*ckpt)->tensor(name);
        ASSERT_TRUE(view.has_value());
        if (name.rfind("model.", 0) == 0) name = name.substr(6);
        const size_t attn = name.find(".attn.");
        const std::string leaf = attn == std::string::npos ? "" : name.substr(attn + 6);
        if (leaf == "norm.weight") name = name.substr(0, attn + 6) + "kv_norm.weight";
        if (is_fp8_linear(leaf)) {
            auto w = read_tensor(*view, DType::f32);
            ASSERT_TRUE(w.has_value());
            std::vector<uint8_t> q, scales;
            quantize_fp8_blocks(w->as<float>(), w->dim(0), w->dim(1), q, scales);
            entries.push_back({name, DType::f8_e4m3, w->shape(), q});
            const std::string scale_name = name.substr(0, name.size() - std::string("weight").size()) + "scale";
            entries.push_back({scale_name, DType::f8_e8m0, {(w->dim(0) + 127) / 128, (w->dim(1) + 127) / 128}, scales});
            continue;
        }
        ASSERT_TRUE(view->dtype.has_value());
        entries.push_back({name, *view->dtype, Shape(view->shape.begin(), view->shape.end()),
                           as_bytes(view->bytes.data(), view->bytes.size())});
    }
    std::vector<SafetensorsWriteEntry> write;
    for (const auto& e : entries) write.push_back({e.name, e.dtype, e.shape, e.bytes});
    ASSERT_TRUE(write_safetensors(out_dir / "model.safetensors", write).is_ok());
    fs::copy_file(kData / "deepseek_v4" / "ckpt" / "config.json", out_dir / "config.json");
}

TEST(Inspect, OriginalNamesWithFp8Weights) {
    ScratchDir dir;
    write_original_layout_checkpoint(dir.path);
    const nlohmann::json r = inspect_json(dir.path);
    EXPECT_EQ(r["problems"], 0);
    EXPECT_EQ(kinds(r), (std::vector<std::string>{"swa", "csa", "hca"}));
    int fp8 = 0;
    for (const auto& l : r["layers"]) {
        EXPECT_TRUE(l["unexpected"].empty()) << l["unexpected"].dump();  // .scale siblings are claimed
        for (const auto& t : l["tensors"]) {
            EXPECT_EQ(t["stored_name"], t["name"]);  // the original names are sieve's canonical ones
            if (t.contains("quantization")) {
                ++fp8;
                EXPECT_EQ(t["dtype"], "f8_e4m3");
                EXPECT_NE(t["quantization"].get<std::string>().find("128x128"), std::string::npos);
            }
        }
    }
    EXPECT_EQ(fp8, 3 * 5 + 1);  // five linears per layer plus the CSA indexer's wq_b

    // The loader dequantizes them to what the quantizer wrote: e4m3 value × 2^(e − 127).
    auto ckpt = Checkpoint::open(dir.path);
    ASSERT_TRUE(ckpt.has_value());
    WeightStore store(**ckpt, WeightFamily::deepseek_v4);
    auto w = store.scope("layers.1.attn").get("wq_b.weight", {128, 32}, kWeightFloatOrFp8DTypes);
    ASSERT_TRUE(w.has_value()) << w.status().to_string();
    auto original = Checkpoint::open(kData / "deepseek_v4" / "ckpt");
    ASSERT_TRUE(original.has_value());
    auto ref = read_tensor(*(*original)->tensor("model.layers.1.attn.wq_b.weight"), DType::f32);
    ASSERT_TRUE(ref.has_value());
    for (int64_t i = 0; i < w->numel(); ++i) {
        const float a = w->as<float>()[i], b = ref->as<float>()[i];
        ASSERT_LE(std::fabs(a - b), std::fabs(b) / 16 + 1e-6f) << i;  // e4m3: 3 mantissa bits
    }
    auto kv_norm = store.scope("layers.2.attn").get("kv_norm.weight", {32}, kWeightFloatDTypes);
    EXPECT_TRUE(kv_norm.has_value()) << kv_norm.status().to_string();
}

// Copies the fixture with one tensor changed by `edit` (return false to drop it).
void write_edited_checkpoint(const fs::path& out_dir, const std::string& family,
                             const std::function<bool(OwnedEntry&)>& edit) {
    auto ckpt = Checkpoint::open(kData / family / "ckpt");
    ASSERT_TRUE(ckpt.has_value());
    std::vector<OwnedEntry> entries;
    for (std::string_view name : (*ckpt)->tensor_names()) {
        auto v = (*ckpt)->tensor(name);
        OwnedEntry e{std::string(name), *v->dtype, Shape(v->shape.begin(), v->shape.end()),
                     as_bytes(v->bytes.data(), v->bytes.size())};
        if (edit(e)) entries.push_back(std::move(e));
    }
    std::vector<SafetensorsWriteEntry> write;
    for (const auto& e : entries) write.push_back({e.name, e.dtype, e.shape, e.bytes});
    ASSERT_TRUE(write_safetensors(out_dir / "model.safetensors", write).is_ok());
    fs::copy_file(kData / family / "ckpt" / "config.json", out_dir / "config.json");
}

TEST(Inspect, ReportsMissingTensor) {
    ScratchDir dir;
    write_edited_checkpoint(dir.path, "deepseek_v4",
                            [](OwnedEntry& e) { return e.name != "model.layers.1.attn.compressor.wgate.weight"; });
    Status s;
    const nlohmann::json r = inspect_json(dir.path, &s);
    EXPECT_FALSE(s.is_ok());
    EXPECT_EQ(r["problems"], 1);
    bool found = false;
    for (const auto& t : r["layers"][1]["tensors"])
        if (t["name"] == "layers.1.attn.compressor.wgate.weight") found = t["problem"] == "missing";
    EXPECT_TRUE(found);
}

TEST(Inspect, ReportsWrongShapeAndUnexpectedTensor) {
    ScratchDir dir;
    write_edited_checkpoint(dir.path, "deepseek_v32", [](OwnedEntry& e) {
        if (e.name == "model.layers.1.self_attn.indexer.wk.weight") {
            e.shape = {8, 128};  // same bytes, wrong shape
        }
        if (e.name == "model.layers.0.self_attn.q_a_layernorm.weight") e.name = "model.layers.0.self_attn.q_a_norm_typo.weight";
        return true;
    });
    Status s;
    const nlohmann::json r = inspect_json(dir.path, &s);
    EXPECT_FALSE(s.is_ok());
    EXPECT_NE(s.message().find("2 problem(s)"), std::string::npos) << s.message();
    bool shape_reported = false;
    for (const auto& t : r["layers"][1]["tensors"])
        if (t["name"] == "model.layers.1.self_attn.indexer.wk.weight")
            shape_reported = t["problem"] == "shape [8, 128], expected [16, 64]";
    EXPECT_TRUE(shape_reported) << r["layers"][1].dump();
    EXPECT_EQ(r["layers"][0]["unexpected"], nlohmann::json::array({"model.layers.0.self_attn.q_a_norm_typo.weight"}));
}

TEST(Inspect, BadDirectoryIsAClearError) {
    std::ostringstream out;
    Status s = cli::run_inspect({kData / "no_such_checkpoint", false}, out);
    EXPECT_FALSE(s.is_ok());
    EXPECT_NE(s.message().find("no_such_checkpoint"), std::string::npos) << s.message();
}

}  // namespace
}  // namespace sieve
