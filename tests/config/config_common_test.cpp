// What every model type shares: malformed JSON, model_type dispatch, JSON value types and
// ranges, file loading.
#include <atomic>
#include <filesystem>
#include <fstream>
#include <string>

#include <unistd.h>

#include "config_test_util.h"

namespace sieve {
namespace {

using config_test::expect_error;
using config_test::parse_ok;
using config_test::patched;

// A small valid config to vary (DeepSeek-V3.2 shaped, plain RoPE).
constexpr const char* kSmall = R"({
  "model_type": "deepseek_v32",
  "hidden_size": 64, "num_hidden_layers": 2, "num_attention_heads": 4, "q_lora_rank": 32,
  "kv_lora_rank": 16, "qk_nope_head_dim": 8, "qk_rope_head_dim": 8, "v_head_dim": 8,
  "index_n_heads": 2, "index_head_dim": 16, "index_topk": 8, "rope_theta": 10000,
  "rms_norm_eps": 1e-6, "max_position_embeddings": 256
})";

TEST(ConfigCommon, MalformedJsonGivesPosition) {
    Expected<ModelConfig> c = parse_model_config("{\n  \"model_type\": \"hy_v4\",\n  \"head_dim\": }\n", "x/config.json");
    ASSERT_FALSE(c.has_value());
    EXPECT_EQ(c.status().code(), StatusCode::corrupt);
    const std::string m = c.status().message();
    EXPECT_EQ(m.rfind("x/config.json: malformed JSON at line 3, column 15", 0), 0u) << m;
    EXPECT_EQ(m.find("[json.exception"), std::string::npos) << m;

    expect_error("", StatusCode::corrupt, {"malformed JSON at line 1, column 1"});
    expect_error("{\"model_type\": \"deepseek_v4\"", StatusCode::corrupt, {"malformed JSON", "line 1"});
    expect_error("{\"a\": 1,}", StatusCode::corrupt, {"malformed JSON at line 1, column 9"});
    expect_error("{\"a\": NaN}", StatusCode::corrupt, {"malformed JSON"});
    expect_error("{\"a\": \"\xff\"}", StatusCode::corrupt, {"malformed JSON"});
    expect_error("{} trailing", StatusCode::corrupt, {"malformed JSON"});
}

TEST(ConfigCommon, TopLevelAndModelType) {
    expect_error("[1, 2]", StatusCode::invalid_argument, {"top level is an array of 2 entries, expected a JSON object"});
    expect_error("{}", StatusCode::not_found,
                 {"field \"model_type\"", "deepseek_v4, deepseek_v32, hy_v4, qwen4_exp, qwen4_exp_text"});
    expect_error(patched(kSmall, R"({"model_type": null})"), StatusCode::not_found, {"field \"model_type\""});
    expect_error(patched(kSmall, R"({"model_type": "llama"})"), StatusCode::unsupported,
                 {"field \"model_type\": \"llama\" is not supported; supported: deepseek_v4, deepseek_v32, hy_v4, "
                  "qwen4_exp, qwen4_exp_text"});
    expect_error(patched(kSmall, R"({"model_type": 3})"), StatusCode::invalid_argument,
                 {"field \"model_type\": expected a string, got 3 (number)"});
    EXPECT_STREQ(config_supported_model_types(), "deepseek_v4, deepseek_v32, hy_v4, qwen4_exp, qwen4_exp_text");
}

TEST(ConfigCommon, ValueTypesAndRanges) {
    // Integral floats are integers; everything else that is not an integer is an error.
    EXPECT_EQ(parse_ok(patched(kSmall, R"({"hidden_size": 64.0})")).dsa_mla()->hidden_size, 64);
    expect_error(patched(kSmall, R"({"hidden_size": 64.5})"), StatusCode::invalid_argument,
                 {"field \"hidden_size\": expected an integer, got 64.5 (number)"});
    expect_error(patched(kSmall, R"({"hidden_size": "64"})"), StatusCode::invalid_argument,
                 {"field \"hidden_size\": expected an integer, got \"64\" (string)"});
    expect_error(patched(kSmall, R"({"hidden_size": true})"), StatusCode::invalid_argument,
                 {"field \"hidden_size\": expected an integer, got true (boolean)"});
    expect_error(patched(kSmall, R"({"hidden_size": [64]})"), StatusCode::invalid_argument,
                 {"field \"hidden_size\": expected an integer, got an array of 1 entries"});
    expect_error(patched(kSmall, R"({"hidden_size": null})"), StatusCode::not_found,
                 {"field \"hidden_size\": required, but absent or null"});
    expect_error(patched(kSmall, R"({"hidden_size": -64})"), StatusCode::invalid_argument,
                 {"field \"hidden_size\": must be positive, got -64"});
    expect_error(patched(kSmall, R"({"hidden_size": 0})"), StatusCode::invalid_argument,
                 {"field \"hidden_size\": must be positive, got 0"});
    expect_error(patched(kSmall, R"({"hidden_size": 18446744073709551615})"), StatusCode::invalid_argument,
                 {"field \"hidden_size\": must be in [1, 2147483647], got 18446744073709551615"});
    expect_error(patched(kSmall, R"({"hidden_size": 1e300})"), StatusCode::invalid_argument,
                 {"field \"hidden_size\"", "1e+300"});
    expect_error(patched(kSmall, R"({"num_hidden_layers": 100000})"), StatusCode::invalid_argument,
                 {"field \"num_hidden_layers\": must be in [1, 65536], got 100000"});
    expect_error(patched(kSmall, R"({"rope_theta": "1e4"})"), StatusCode::invalid_argument,
                 {"field \"rope_theta\": expected a number, got \"1e4\" (string)"});
    expect_error(patched(kSmall, R"({"rms_norm_eps": -1e-6})"), StatusCode::invalid_argument,
                 {"field \"rms_norm_eps\": must be > 0, got -1e-06"});
    expect_error(R"({"model_type": "deepseek_v32", "rms_norm_eps": 1e999})", StatusCode::corrupt,
                 {"malformed JSON", "number overflow", "1e999"});
    expect_error(patched(kSmall, R"({"rope_scaling": "yarn"})"), StatusCode::invalid_argument,
                 {"field \"rope_scaling\": expected an object, got \"yarn\" (string)"});
    expect_error(patched(kSmall, R"({"layer_types": "sparse"})"), StatusCode::invalid_argument,
                 {"field \"layer_types\": expected a list of strings"});
    expect_error(patched(kSmall, R"({"layer_types": ["sparse", 3]})"), StatusCode::invalid_argument,
                 {"field \"layer_types[1]\": expected a string, got 3 (number)"});
    // A long string value is cut in messages.
    std::string long_name(500, 'x');
    Expected<ModelConfig> long_type =
        parse_model_config(patched(kSmall, "{\"hidden_size\": \"" + long_name + "\"}"), "config.json");
    ASSERT_FALSE(long_type.has_value());
    EXPECT_LT(long_type.status().message().size(), 200u) << long_type.status().message();
}

TEST(ConfigCommon, UnknownKeysAndDuplicateKeys) {
    // Keys sieve does not use are ignored; a repeated key keeps its last value, as Python's json does.
    ModelConfig c = parse_ok(patched(kSmall, R"({"some_future_key": {"a": [1, {"b": null}]}})"));
    EXPECT_EQ(c.dsa_mla()->hidden_size, 64);
    std::string twice = R"({"hidden_size": 32,)" + std::string(kSmall).substr(1);
    EXPECT_EQ(parse_ok(twice).dsa_mla()->hidden_size, 64);
}

TEST(ConfigCommon, DeeplyNestedJsonDoesNotCrash) {
    std::string deep = std::string(R"({"model_type": "deepseek_v32", "junk": )") + std::string(20000, '[') +
                       std::string(20000, ']') + "}";
    expect_error(deep, StatusCode::not_found, {"field \"hidden_size\""});
    std::string unbalanced = std::string(R"({"junk": )") + std::string(20000, '[');
    expect_error(unbalanced, StatusCode::corrupt, {"malformed JSON"});
}

class ConfigFiles : public ::testing::Test {
protected:
    void SetUp() override {
        static std::atomic<int> counter{0};
        dir_ = std::filesystem::temp_directory_path() /
               ("sieve_config_test_" + std::to_string(::getpid()) + "_" + std::to_string(counter++));
        std::filesystem::create_directories(dir_);
    }
    void TearDown() override {
        std::error_code ec;
        std::filesystem::remove_all(dir_, ec);
    }
    void write(const std::filesystem::path& path, const std::string& text) {
        std::ofstream out(path, std::ios::binary);
        out << text;
    }
    std::filesystem::path dir_;
};

TEST_F(ConfigFiles, LoadsFileOrDirectory) {
    write(dir_ / "config.json", kSmall);
    Expected<ModelConfig> from_dir = load_model_config(dir_);
    ASSERT_TRUE(from_dir.has_value()) << from_dir.status().to_string();
    EXPECT_EQ(from_dir->model_type, "deepseek_v32");
    Expected<ModelConfig> from_file = load_model_config(dir_ / "config.json");
    ASSERT_TRUE(from_file.has_value()) << from_file.status().to_string();
    EXPECT_EQ(from_file->dsa_mla()->num_hidden_layers, 2);
}

TEST_F(ConfigFiles, ErrorsNameThePath) {
    Expected<ModelConfig> missing = load_model_config(dir_ / "nope");
    ASSERT_FALSE(missing.has_value());
    EXPECT_EQ(missing.status().code(), StatusCode::not_found);
    EXPECT_NE(missing.status().message().find((dir_ / "nope").string()), std::string::npos);

    std::filesystem::create_directories(dir_ / "empty_ckpt");
    Expected<ModelConfig> no_config = load_model_config(dir_ / "empty_ckpt");
    ASSERT_FALSE(no_config.has_value());
    EXPECT_EQ(no_config.status().code(), StatusCode::not_found);
    EXPECT_NE(no_config.status().message().find("config.json"), std::string::npos);

    write(dir_ / "bad.json", patched(kSmall, R"({"v_head_dim": 0})"));
    Expected<ModelConfig> bad = load_model_config(dir_ / "bad.json");
    ASSERT_FALSE(bad.has_value());
    EXPECT_EQ(bad.status().message(),
              (dir_ / "bad.json").string() + ": field \"v_head_dim\": must be positive, got 0");
}

}  // namespace
}  // namespace sieve
