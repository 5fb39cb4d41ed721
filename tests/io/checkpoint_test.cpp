#include "sieve/io/checkpoint.h"

#include <gtest/gtest.h>

#include "io_test_util.h"

namespace sieve {
namespace {

using test::expect_error;
using test::TempDir;
using test::to_bytes;
using test::write_text;

// Writes `file` holding f32 tensors of shape [2] with values {k, k + 0.5}, k = position in `names`.
void write_shard(const std::filesystem::path& file, const std::vector<std::string>& names) {
    std::vector<std::vector<uint8_t>> payloads;
    std::vector<SafetensorsWriteEntry> entries;
    for (size_t k = 0; k < names.size(); ++k) {
        payloads.push_back(to_bytes(std::vector<float>{static_cast<float>(k), static_cast<float>(k) + 0.5f}));
        entries.push_back({names[k], DType::f32, {2}, payloads.back()});
    }
    ASSERT_TRUE(write_safetensors(file, entries).is_ok());
}

std::string index_json(const std::vector<std::pair<std::string, std::string>>& map) {
    std::string s = R"({"metadata": {"total_size": 0}, "weight_map": {)";
    for (size_t i = 0; i < map.size(); ++i)
        s += (i ? ", " : "") + ("\"" + map[i].first + "\": \"" + map[i].second + "\"");
    return s + "}}";
}

constexpr const char* kShard1 = "model-00001-of-00002.safetensors";
constexpr const char* kShard2 = "model-00002-of-00002.safetensors";

TEST(Checkpoint, SingleFileAndModelSafetensors) {
    TempDir dir;
    write_shard(dir / "model.safetensors", {"a", "b"});
    write_shard(dir / "other.safetensors", {"zzz"});  // ignored: model.safetensors takes precedence
    for (const auto& path : {dir.path(), dir / "model.safetensors"}) {
        auto ckpt = Checkpoint::open(path);
        ASSERT_TRUE(ckpt.has_value()) << ckpt.status().to_string();
        EXPECT_EQ((*ckpt)->size(), 2u);
        EXPECT_EQ((*ckpt)->files().size(), 1u);
        EXPECT_EQ((*ckpt)->tensor_names(), (std::vector<std::string_view>{"a", "b"}));
        auto b = (*ckpt)->tensor("b");
        ASSERT_TRUE(b.has_value());
        EXPECT_EQ(b->file, "model.safetensors");
        auto t = read_tensor(*b);
        ASSERT_TRUE(t.has_value());
        EXPECT_EQ(t->as<float>()[1], 1.5f);
        expect_error((*ckpt)->tensor("c").status(), StatusCode::not_found, {"'c'"});
    }
}

TEST(Checkpoint, IndexedShards) {
    TempDir dir;
    write_shard(dir / kShard1, {"layers.0.w", "layers.1.w"});
    write_shard(dir / kShard2, {"layers.2.w", "norm"});
    write_text(dir / "model.safetensors.index.json",
               index_json({{"layers.0.w", kShard1}, {"layers.1.w", kShard1}, {"layers.2.w", kShard2}, {"norm", kShard2}}));
    auto ckpt = Checkpoint::open(dir.path());
    ASSERT_TRUE(ckpt.has_value()) << ckpt.status().to_string();
    EXPECT_EQ((*ckpt)->files().size(), 2u);
    EXPECT_EQ((*ckpt)->tensor_names(), (std::vector<std::string_view>{"layers.0.w", "layers.1.w", "layers.2.w", "norm"}));
    auto norm = (*ckpt)->find("norm");
    ASSERT_TRUE(norm.has_value());
    EXPECT_EQ(norm->file, kShard2);
    auto t = read_tensor(*norm);
    ASSERT_TRUE(t.has_value());
    EXPECT_EQ(t->as<float>()[0], 1.0f);
    EXPECT_TRUE((*ckpt)->contains("layers.1.w"));
    EXPECT_FALSE((*ckpt)->contains("layers.3.w"));
}

TEST(Checkpoint, DirectoryWithoutIndex) {
    TempDir dir;
    write_shard(dir / "b.safetensors", {"y"});
    write_shard(dir / "a.safetensors", {"x"});
    write_text(dir / "config.json", "{}");
    auto ckpt = Checkpoint::open(dir.path());
    ASSERT_TRUE(ckpt.has_value()) << ckpt.status().to_string();
    EXPECT_EQ((*ckpt)->files().size(), 2u);
    EXPECT_EQ((*ckpt)->find("y")->file, "b.safetensors");
    EXPECT_EQ((*ckpt)->find("x")->file, "a.safetensors");
}

TEST(Checkpoint, Errors) {
    {
        TempDir dir;
        expect_error(Checkpoint::open(dir / "absent").status(), StatusCode::not_found, {"absent"});
        expect_error(Checkpoint::open(dir.path()).status(), StatusCode::not_found, {"no model.safetensors.index.json"});
    }
    {  // missing shard
        TempDir dir;
        write_shard(dir / kShard1, {"a"});
        write_text(dir / "model.safetensors.index.json", index_json({{"a", kShard1}, {"b", kShard2}}));
        expect_error(Checkpoint::open(dir.path()).status(), StatusCode::not_found,
                     {kShard2, "model.safetensors.index.json"});
    }
    {  // tensor in the index, in another shard than the one named
        TempDir dir;
        write_shard(dir / kShard1, {"a"});
        write_shard(dir / kShard2, {"b"});
        write_text(dir / "model.safetensors.index.json", index_json({{"a", kShard2}, {"b", kShard2}}));
        // Only kShard2 is named, so kShard1 is not opened: 'a' is nowhere the index says.
        expect_error(Checkpoint::open(dir.path()).status(), StatusCode::corrupt,
                     {"model.safetensors.index.json", "'a'", kShard2, "does not hold it"});
        write_text(dir / "model.safetensors.index.json", index_json({{"a", kShard2}, {"b", kShard1}}));
        expect_error(Checkpoint::open(dir.path()).status(), StatusCode::corrupt,
                     {"model.safetensors.index.json", "'a'", std::string("listed in shard ") + kShard2,
                      std::string("it is in ") + kShard1});
    }
    {  // tensor in two shards
        TempDir dir;
        write_shard(dir / kShard1, {"a", "dup"});
        write_shard(dir / kShard2, {"b", "dup"});
        write_text(dir / "model.safetensors.index.json", index_json({{"a", kShard1}, {"b", kShard2}, {"dup", kShard1}}));
        expect_error(Checkpoint::open(dir.path()).status(), StatusCode::corrupt, {"'dup'", kShard1, kShard2});
        std::filesystem::remove(dir / "model.safetensors.index.json");
        expect_error(Checkpoint::open(dir.path()).status(), StatusCode::corrupt, {"'dup'", kShard1, kShard2});
    }
    {  // a corrupt shard: the error names the shard
        TempDir dir;
        write_text(dir / kShard1, "garbage");
        write_text(dir / "model.safetensors.index.json", index_json({{"a", kShard1}}));
        expect_error(Checkpoint::open(dir.path()).status(), StatusCode::corrupt, {kShard1});
    }
}

TEST(Checkpoint, HostileIndex) {
    struct Case {
        std::string text;
        std::vector<std::string_view> parts;
    };
    const Case cases[] = {
        {"{", {"invalid JSON"}},
        {"[]", {"expected an object"}},
        {R"({"metadata": {}})", {"no \"weight_map\""}},
        {R"({"weight_map": []})", {"\"weight_map\" is a JSON array"}},
        {R"({"weight_map": {"a": 1}})", {"tensor 'a'", "number"}},
        {R"({"weight_map": {"a": "../x.safetensors"}})", {"tensor 'a'", "not a plain file name"}},
        {R"({"weight_map": {"a": "/etc/passwd"}})", {"not a plain file name"}},
        {R"({"weight_map": {"a": ".."}})", {"not a plain file name"}},
        {R"({"weight_map": {"a": ""}})", {"not a plain file name"}},
        {R"({"weight_map": {"a": "x.safetensors", "a": "y.safetensors"}})", {"duplicate key 'a'"}},
        {R"({"weight_map": {}})", {"empty"}},
    };
    for (const Case& c : cases) {
        SCOPED_TRACE(c.text);
        TempDir dir;
        write_text(dir / "model.safetensors.index.json", c.text);
        const Status s = Checkpoint::open(dir.path()).status();
        EXPECT_EQ(s.code(), StatusCode::corrupt) << s.to_string();
        EXPECT_NE(s.message().find("model.safetensors.index.json"), std::string::npos) << s.message();
        for (auto part : c.parts) EXPECT_NE(s.message().find(part), std::string::npos) << s.message();
    }
    // The in-memory parser gives the sorted map.
    const std::string text = R"({"weight_map": {"b": "s2", "a": "s1"}})";
    auto map = parse_safetensors_index(std::span(reinterpret_cast<const uint8_t*>(text.data()), text.size()));
    ASSERT_TRUE(map.has_value());
    ASSERT_EQ(map->size(), 2u);
    EXPECT_EQ((*map)[0], (std::pair<std::string, std::string>{"a", "s1"}));
    EXPECT_EQ((*map)[1], (std::pair<std::string, std::string>{"b", "s2"}));
}

}  // namespace
}  // namespace sieve
