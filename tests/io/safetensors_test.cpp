#include "sieve/io/safetensors.h"

#include <gtest/gtest.h>
#include <sys/stat.h>

#include <bit>
#include <cmath>
#include <limits>

#include "io_test_util.h"

namespace sieve {
namespace {

using test::expect_error;
using test::raw_safetensors;
using test::TempDir;
using test::to_bytes;

// Random bytes that are valid values of `t` (bool: 0/1).
std::vector<uint8_t> random_bytes(DType t, size_t numel, std::mt19937& rng) {
    std::vector<uint8_t> out(numel * dtype_size(t));
    for (auto& b : out) b = static_cast<uint8_t>(rng());
    if (t == DType::boolean)
        for (auto& b : out) b &= 1;
    return out;
}

TEST(Safetensors, RoundTripEveryDType) {
    std::mt19937 rng(1);
    std::vector<std::vector<uint8_t>> payloads;
    std::vector<SafetensorsWriteEntry> entries;
    for (DType t : kAllDTypes) {
        payloads.push_back(random_bytes(t, 6, rng));
        entries.push_back({"t." + std::string(dtype_name(t)), t, {2, 3}, payloads.back()});
    }
    payloads.push_back({});
    entries.push_back({"empty", DType::f32, {0, 4}, payloads.back()});
    payloads.push_back(random_bytes(DType::f64, 1, rng));
    entries.push_back({"scalar", DType::f64, {}, payloads.back()});
    const std::map<std::string, std::string> metadata{{"format", "pt"}, {"note", "round trip"}};

    TempDir dir;
    const auto path = dir / "all.safetensors";
    ASSERT_TRUE(write_safetensors(path, entries, metadata).is_ok());
    auto file = SafetensorsFile::open(path);
    ASSERT_TRUE(file.has_value()) << file.status().to_string();
    const SafetensorsFile& f = **file;
    EXPECT_EQ(f.metadata(), metadata);
    EXPECT_EQ(f.tensors().size(), entries.size());
    EXPECT_EQ(f.header().data_offset % 8, 0u);  // the writer pads the header as the reference does
    for (const auto& e : entries) {
        auto v = f.tensor(e.name);
        ASSERT_TRUE(v.has_value()) << e.name;
        ASSERT_TRUE(v->dtype.has_value());
        EXPECT_EQ(*v->dtype, e.dtype) << e.name;
        EXPECT_EQ(v->dtype_string, dtype_safetensors_name(e.dtype));
        EXPECT_EQ(Shape(v->shape.begin(), v->shape.end()), e.shape) << e.name;
        EXPECT_TRUE(std::equal(v->bytes.begin(), v->bytes.end(), e.bytes.begin(), e.bytes.end())) << e.name;
        // Largest elements first: each tensor starts aligned to its element size in the file.
        const uint64_t file_offset = f.header().data_offset + f.header().find(e.name)->data_begin;
        EXPECT_EQ(file_offset % dtype_size(e.dtype), 0u) << e.name;
        // A byte copy in the stored dtype gives the same bytes back.
        auto copy = read_tensor(*v, e.dtype);
        ASSERT_TRUE(copy.has_value());
        EXPECT_TRUE(e.bytes.empty() || std::memcmp(copy->data(), e.bytes.data(), e.bytes.size()) == 0) << e.name;
    }
    EXPECT_FALSE(f.find("missing").has_value());
    expect_error(f.tensor("missing").status(), StatusCode::not_found, {"all.safetensors", "missing"});

    // The in-memory serializer and the file writer produce the same bytes.
    auto bytes = serialize_safetensors(entries, metadata);
    ASSERT_TRUE(bytes.has_value());
    std::ifstream in(path, std::ios::binary);
    std::vector<uint8_t> on_disk((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    EXPECT_EQ(*bytes, on_disk);
}

TEST(Safetensors, ReadAsF32MatchesScalarDecoders) {
    std::mt19937 rng(2);
    constexpr size_t kN = 64;
    for (DType t : kAllDTypes) {
        const auto bytes = random_bytes(t, kN, rng);
        const SafetensorsWriteEntry e{"x", t, {8, 8}, bytes};
        auto file = serialize_safetensors(std::span(&e, 1));
        ASSERT_TRUE(file.has_value());
        auto header = parse_safetensors_header(*file);
        ASSERT_TRUE(header.has_value()) << header.status().to_string();
        const auto view = safetensors_tensor_view(*header, header->tensors[0], *file, "mem");
        auto f32 = read_tensor(view, DType::f32);
        ASSERT_TRUE(f32.has_value()) << dtype_name(t);
        ASSERT_EQ(f32->shape(), (Shape{8, 8}));
        const size_t es = dtype_size(t);
        for (size_t i = 0; i < kN; ++i) {
            const uint8_t* p = bytes.data() + i * es;
            float want = 0;
            switch (t) {
                case DType::f64: { double d; std::memcpy(&d, p, 8); want = static_cast<float>(d); break; }
                case DType::f32: std::memcpy(&want, p, 4); break;
                case DType::f16: { uint16_t h; std::memcpy(&h, p, 2); want = f16_to_f32(h); break; }
                case DType::bf16: { uint16_t h; std::memcpy(&h, p, 2); want = bf16_to_f32(h); break; }
                case DType::f8_e4m3: want = fp8_e4m3_to_f32(*p); break;
                case DType::f8_e5m2: want = fp8_e5m2_to_f32(*p); break;
                case DType::f8_e8m0: want = ue8m0_to_f32(*p); break;
                case DType::i64: { int64_t v; std::memcpy(&v, p, 8); want = static_cast<float>(v); break; }
                case DType::i32: { int32_t v; std::memcpy(&v, p, 4); want = static_cast<float>(v); break; }
                case DType::i16: { int16_t v; std::memcpy(&v, p, 2); want = static_cast<float>(v); break; }
                case DType::i8: want = static_cast<float>(static_cast<int8_t>(*p)); break;
                case DType::u64: { uint64_t v; std::memcpy(&v, p, 8); want = static_cast<float>(v); break; }
                case DType::u32: { uint32_t v; std::memcpy(&v, p, 4); want = static_cast<float>(v); break; }
                case DType::u16: { uint16_t v; std::memcpy(&v, p, 2); want = static_cast<float>(v); break; }
                case DType::u8: want = static_cast<float>(*p); break;
                case DType::boolean: want = *p ? 1.0f : 0.0f; break;
            }
            const float got = f32->as<float>()[i];
            if (std::isnan(want))
                EXPECT_TRUE(std::isnan(got)) << dtype_name(t) << " element " << i;
            else
                EXPECT_EQ(std::bit_cast<uint32_t>(got), std::bit_cast<uint32_t>(want)) << dtype_name(t) << " " << i;
        }
    }
}

TEST(Safetensors, ReadAsBf16) {
    // f32 → bf16 rounds to nearest even; bf16 → bf16 keeps the bits (NaN payloads included).
    const std::vector<float> values{1.0f, 1.00390625f /* tie: 1 + 2^-8 → 1 */, 1.01171875f /* tie → up */, -3.5f,
                                    std::numeric_limits<float>::infinity()};
    const auto f32_bytes = to_bytes(values);
    const std::vector<uint16_t> bf16_bits{0x3f80, 0x7fc1, 0x0001, 0x8000};
    const auto bf16_bytes = to_bytes(bf16_bits);
    const SafetensorsWriteEntry entries[] = {{"a", DType::f32, {5}, f32_bytes}, {"b", DType::bf16, {4}, bf16_bytes}};
    auto file = serialize_safetensors(entries);
    ASSERT_TRUE(file.has_value());
    auto header = parse_safetensors_header(*file);
    ASSERT_TRUE(header.has_value());
    auto a = read_tensor(safetensors_tensor_view(*header, *header->find("a"), *file, "mem"), DType::bf16);
    ASSERT_TRUE(a.has_value());
    for (size_t i = 0; i < values.size(); ++i) EXPECT_EQ(a->as<uint16_t>()[i], f32_to_bf16(values[i])) << i;
    EXPECT_EQ(a->as<uint16_t>()[1], 0x3f80);
    EXPECT_EQ(a->as<uint16_t>()[2], 0x3f82);
    auto b = read_tensor(safetensors_tensor_view(*header, *header->find("b"), *file, "mem"), DType::bf16);
    ASSERT_TRUE(b.has_value());
    EXPECT_EQ(std::memcmp(b->data(), bf16_bits.data(), 8), 0);
    // Only f32, bf16 or the stored dtype.
    auto bad = read_tensor(safetensors_tensor_view(*header, *header->find("a"), *file, "mem"), DType::i32);
    expect_error(bad.status(), StatusCode::invalid_argument, {"a", "f32", "i32"});
}

TEST(Safetensors, LargeConversionUsesEveryChunk) {
    // Above the parallel threshold: every element, across chunk borders, must be converted
    // (values are integers of magnitude ≤ 256, exact in bf16).
    constexpr int64_t kRows = 300, kCols = 301;
    std::vector<uint16_t> bits(kRows * kCols);
    for (size_t i = 0; i < bits.size(); ++i) bits[i] = f32_to_bf16(static_cast<float>(i % 256) - 128.0f);
    const auto bytes = to_bytes(bits);
    const SafetensorsWriteEntry e{"big", DType::bf16, {kRows, kCols}, bytes};
    auto file = serialize_safetensors(std::span(&e, 1));
    ASSERT_TRUE(file.has_value());
    auto header = parse_safetensors_header(*file);
    ASSERT_TRUE(header.has_value());
    auto t = read_tensor(safetensors_tensor_view(*header, header->tensors[0], *file, "mem"));
    ASSERT_TRUE(t.has_value());
    for (size_t i = 0; i < bits.size(); ++i) ASSERT_EQ(t->as<float>()[i], static_cast<float>(i % 256) - 128.0f) << i;
}

// ---- hostile headers -------------------------------------------------------------------------------

Status parse_error(std::string_view header, size_t data_bytes, std::optional<uint64_t> n = std::nullopt) {
    const auto bytes = raw_safetensors(header, data_bytes, n);
    return parse_safetensors_header(bytes, "bad.safetensors").status();
}

TEST(SafetensorsHostile, LengthField) {
    const std::vector<uint8_t> short_file{1, 0, 0};
    expect_error(parse_safetensors_header(short_file, "short.safetensors").status(), StatusCode::corrupt,
                 {"short.safetensors", "3 bytes", "too short"});
    expect_error(parse_error("{}", 0, 100), StatusCode::corrupt, {"bad.safetensors", "header length 100", "2 bytes"});
    expect_error(parse_error("{}", 0, uint64_t{1} << 63), StatusCode::corrupt,
                 {"bad.safetensors", "9223372036854775808", "limit of 100000000"});
    expect_error(parse_error("{}", 0, kSafetensorsMaxHeaderBytes + 1), StatusCode::corrupt, {"limit"});
    expect_error(parse_error("", 0), StatusCode::corrupt, {"bad.safetensors", "invalid JSON"});
    // The smallest valid file: an empty header object.
    EXPECT_TRUE(parse_safetensors_header(raw_safetensors("{}", 0), "ok").has_value());
    // Spaces after the JSON are padding.
    EXPECT_TRUE(parse_safetensors_header(raw_safetensors("{}      ", 0), "ok").has_value());
}

TEST(SafetensorsHostile, TruncatedData) {
    const std::string h = R"({"w":{"dtype":"F32","shape":[4],"data_offsets":[0,16]}})";
    EXPECT_TRUE(parse_safetensors_header(raw_safetensors(h, 16), "ok").has_value());
    expect_error(parse_error(h, 15), StatusCode::corrupt,
                 {"bad.safetensors", "tensor 'w'", "[0, 16]", "data section of 15 bytes"});
}

TEST(SafetensorsHostile, InvalidJson) {
    expect_error(parse_error(R"({"w": {"dtype": "F32",)", 0), StatusCode::corrupt, {"bad.safetensors", "invalid JSON"});
    expect_error(parse_error("{\"w\xff\": 1}", 0), StatusCode::corrupt, {"invalid JSON"});  // not UTF-8
    expect_error(parse_error("{} {}", 0), StatusCode::corrupt, {"invalid JSON"});
    expect_error(parse_error(std::string(5000, '[') + std::string(5000, ']'), 0), StatusCode::corrupt,
                 {"expected an object"});
    expect_error(parse_error("[1, 2]", 0), StatusCode::corrupt, {"bad.safetensors", "array", "expected an object"});
}

TEST(SafetensorsHostile, WrongFieldTypes) {
    struct Case {
        const char* header;
        std::vector<std::string_view> parts;
    };
    const Case cases[] = {
        {R"({"w": 3})", {"tensor 'w'", "entry is a JSON number"}},
        {R"({"w":{"shape":[1],"data_offsets":[0,4]}})", {"tensor 'w'", "no \"dtype\""}},
        {R"({"w":{"dtype":"F32","data_offsets":[0,4]}})", {"tensor 'w'", "no \"shape\""}},
        {R"({"w":{"dtype":"F32","shape":[1]}})", {"tensor 'w'", "no \"data_offsets\""}},
        {R"({"w":{"dtype":32,"shape":[1],"data_offsets":[0,4]}})", {"tensor 'w'", "\"dtype\" is a JSON number"}},
        {R"({"w":{"dtype":"F32","shape":"1","data_offsets":[0,4]}})", {"tensor 'w'", "\"shape\" is a JSON string"}},
        {R"({"w":{"dtype":"F32","shape":[1.0],"data_offsets":[0,4]}})", {"tensor 'w'", "shape dim 0 is 1.0"}},
        {R"({"w":{"dtype":"F32","shape":[null],"data_offsets":[0,4]}})", {"tensor 'w'", "shape dim 0 is null"}},
        {R"({"w":{"dtype":"F32","shape":[1],"data_offsets":[0,4,8]}})", {"tensor 'w'", "[0,4,8]"}},
        {R"({"w":{"dtype":"F32","shape":[1],"data_offsets":[-1,4]}})", {"tensor 'w'", "data_offsets"}},
        {R"({"w":{"dtype":"F32","shape":[1],"data_offsets":"0,4"}})", {"tensor 'w'", "data_offsets"}},
        {R"({"w":{"dtype":"F32","shape":[1],"data_offsets":[0.0,4]}})", {"tensor 'w'", "data_offsets"}},
        {R"({"__metadata__": [1]})", {"__metadata__", "array"}},
        {R"({"__metadata__": {"k": 1}})", {"__metadata__", "key 'k'", "number"}},
    };
    for (const Case& c : cases) {
        SCOPED_TRACE(c.header);
        const Status s = parse_error(c.header, 64);
        EXPECT_EQ(s.code(), StatusCode::corrupt) << s.to_string();
        EXPECT_NE(s.message().find("bad.safetensors"), std::string::npos) << s.message();
        for (auto part : c.parts) EXPECT_NE(s.message().find(part), std::string::npos) << s.message();
    }
    // Unknown fields of an entry are ignored, as the reference does; a null __metadata__ is none.
    EXPECT_TRUE(parse_safetensors_header(
                    raw_safetensors(R"({"__metadata__":null,"w":{"dtype":"F32","shape":[1],"data_offsets":[0,4],"x":1}})", 4),
                    "ok")
                    .has_value());
}

TEST(SafetensorsHostile, ShapesAndSizes) {
    expect_error(parse_error(R"({"w":{"dtype":"F32","shape":[2,-3],"data_offsets":[0,4]}})", 64), StatusCode::corrupt,
                 {"tensor 'w'", "dim 1 = -3", "negative"});
    expect_error(parse_error(R"({"w":{"dtype":"F32","shape":[18446744073709551615],"data_offsets":[0,4]}})", 64),
                 StatusCode::corrupt, {"tensor 'w'", "does not fit in int64"});
    // 2^32 · 2^32 elements: the product overflows int64.
    expect_error(parse_error(R"({"w":{"dtype":"U8","shape":[4294967296,4294967296],"data_offsets":[0,4]}})", 64),
                 StatusCode::corrupt, {"tensor 'w'", "[4294967296, 4294967296]", "int64"});
    // 2^61 · 2 elements fit int64, but 8 bytes each overflow a 64-bit byte count.
    expect_error(parse_error(R"({"w":{"dtype":"F64","shape":[2305843009213693952,2],"data_offsets":[0,4]}})", 64),
                 StatusCode::corrupt, {"tensor 'w'", "overflows a byte count"});
    expect_error(parse_error(R"({"w":{"dtype":"F32","shape":[2,3],"data_offsets":[0,20]}})", 64), StatusCode::corrupt,
                 {"tensor 'w'", "hold 20 bytes", "[2, 3] of F32 needs 24"});
    expect_error(parse_error(R"({"w":{"dtype":"F32","shape":[2],"data_offsets":[8,0]}})", 64), StatusCode::corrupt,
                 {"tensor 'w'", "[8, 0]", "end before they begin"});
    expect_error(parse_error(R"({"w":{"dtype":"F32","shape":[2],"data_offsets":[60,68]}})", 64), StatusCode::corrupt,
                 {"tensor 'w'", "[60, 68]", "data section of 64 bytes"});
    expect_error(parse_error(R"({"w":{"dtype":"F32","shape":[2],"data_offsets":[18446744073709551608,0]}})", 64),
                 StatusCode::corrupt, {"tensor 'w'"});
}

TEST(SafetensorsHostile, Overlap) {
    expect_error(parse_error(R"({"a":{"dtype":"F32","shape":[4],"data_offsets":[0,16]},)"
                             R"("b":{"dtype":"F32","shape":[2],"data_offsets":[12,20]}})",
                             64),
                 StatusCode::corrupt, {"bad.safetensors", "'a'", "'b'", "overlap"});
    // Same range twice.
    expect_error(parse_error(R"({"a":{"dtype":"U8","shape":[4],"data_offsets":[8,12]},)"
                             R"("b":{"dtype":"U8","shape":[4],"data_offsets":[8,12]}})",
                             64),
                 StatusCode::corrupt, {"overlap"});
    // One range inside another, listed in the other order.
    expect_error(parse_error(R"({"z":{"dtype":"U8","shape":[32],"data_offsets":[0,32]},)"
                             R"("a":{"dtype":"U8","shape":[2],"data_offsets":[4,6]}})",
                             64),
                 StatusCode::corrupt, {"overlap"});
    // Adjacent ranges, gaps and empty tensors are fine.
    auto ok = parse_safetensors_header(raw_safetensors(R"({"a":{"dtype":"U8","shape":[4],"data_offsets":[0,4]},)"
                                                       R"("b":{"dtype":"U8","shape":[4],"data_offsets":[4,8]},)"
                                                       R"("c":{"dtype":"U8","shape":[4],"data_offsets":[20,24]},)"
                                                       R"("e":{"dtype":"F32","shape":[0,3],"data_offsets":[2,2]}})",
                                                       32),
                                       "ok");
    ASSERT_TRUE(ok.has_value()) << ok.status().to_string();
    EXPECT_EQ(ok->tensors.size(), 4u);
}

TEST(SafetensorsHostile, Duplicates) {
    expect_error(parse_error(R"({"w":{"dtype":"U8","shape":[1],"data_offsets":[0,1]},)"
                             R"("w":{"dtype":"U8","shape":[1],"data_offsets":[1,2]}})",
                             8),
                 StatusCode::corrupt, {"bad.safetensors", "duplicate key 'w'"});
    expect_error(parse_error(R"({"w":{"dtype":"U8","dtype":"F32","shape":[1],"data_offsets":[0,1]}})", 8),
                 StatusCode::corrupt, {"duplicate key 'dtype'", "'w'"});
    expect_error(parse_error(R"({"__metadata__":{"k":"a","k":"b"}})", 0), StatusCode::corrupt,
                 {"duplicate key 'k'", "__metadata__"});
}

TEST(SafetensorsHostile, UnknownAndOpaqueDTypes) {
    expect_error(parse_error(R"({"w":{"dtype":"Q4_K","shape":[2],"data_offsets":[0,2]}})", 8), StatusCode::unsupported,
                 {"bad.safetensors", "tensor 'w'", "unknown dtype 'Q4_K'"});
    // F4: two elements per byte; the size follows the bit width.
    auto ok = parse_safetensors_header(raw_safetensors(R"({"e":{"dtype":"F4","shape":[4,6],"data_offsets":[0,12]},)"
                                                       R"("w":{"dtype":"BF16","shape":[2],"data_offsets":[12,16]}})",
                                                       16),
                                       "ok");
    ASSERT_TRUE(ok.has_value()) << ok.status().to_string();
    const auto* e = ok->find("e");
    ASSERT_NE(e, nullptr);
    EXPECT_TRUE(e->is_opaque());
    EXPECT_EQ(e->dtype_string, "F4");
    EXPECT_EQ(e->nbytes(), 12u);
    const auto bytes = raw_safetensors(R"({"e":{"dtype":"F4","shape":[4,6],"data_offsets":[0,12]}})", 12);
    auto h = parse_safetensors_header(bytes, "ok");
    ASSERT_TRUE(h.has_value());
    expect_error(read_tensor(safetensors_tensor_view(*h, h->tensors[0], bytes, "x.safetensors")).status(),
                 StatusCode::unsupported, {"tensor e", "x.safetensors", "F4"});
    expect_error(parse_error(R"({"e":{"dtype":"F4","shape":[3],"data_offsets":[0,2]}})", 8), StatusCode::corrupt,
                 {"tensor 'e'", "whole number of bytes"});
    expect_error(parse_error(R"({"e":{"dtype":"F6_E2M3","shape":[4],"data_offsets":[0,4]}})", 8), StatusCode::corrupt,
                 {"tensor 'e'", "needs 3"});
}

TEST(SafetensorsFile, OpenErrorsNameTheFile) {
    TempDir dir;
    expect_error(SafetensorsFile::open(dir / "nope.safetensors").status(), StatusCode::not_found, {"nope.safetensors"});
    test::write_bytes(dir / "empty.safetensors", {});
    expect_error(SafetensorsFile::open(dir / "empty.safetensors").status(), StatusCode::corrupt,
                 {"empty.safetensors", "too short"});
    test::write_bytes(dir / "trunc.safetensors",
                      raw_safetensors(R"({"w":{"dtype":"F32","shape":[4],"data_offsets":[0,16]}})", 3));
    expect_error(SafetensorsFile::open(dir / "trunc.safetensors").status(), StatusCode::corrupt,
                 {"trunc.safetensors", "tensor 'w'"});
    expect_error(SafetensorsFile::open(dir.path()).status(), StatusCode::invalid_argument, {"not a regular file"});
    // A FIFO must be refused, not waited on.
    ASSERT_EQ(::mkfifo((dir / "fifo.safetensors").c_str(), 0600), 0);
    expect_error(SafetensorsFile::open(dir / "fifo.safetensors").status(), StatusCode::invalid_argument,
                 {"fifo.safetensors", "not a regular file"});
}

// ---- writer ----------------------------------------------------------------------------------------

TEST(SafetensorsWriter, RejectsBadInput) {
    const std::vector<uint8_t> four(4), eight(8);
    const SafetensorsWriteEntry dup[] = {{"a", DType::f32, {1}, four}, {"a", DType::f32, {1}, four}};
    expect_error(serialize_safetensors(dup).status(), StatusCode::invalid_argument, {"'a' given twice"});
    const SafetensorsWriteEntry size[] = {{"a", DType::f32, {1}, eight}};
    expect_error(serialize_safetensors(size).status(), StatusCode::invalid_argument, {"'a'", "8 bytes", "needs 4"});
    const SafetensorsWriteEntry meta[] = {{"__metadata__", DType::f32, {1}, four}};
    expect_error(serialize_safetensors(meta).status(), StatusCode::invalid_argument, {"reserved"});
    const SafetensorsWriteEntry neg[] = {{"a", DType::f32, {-1}, four}};
    expect_error(serialize_safetensors(neg).status(), StatusCode::invalid_argument, {"'a'", "negative"});
    const SafetensorsWriteEntry utf8[] = {{"a\xff", DType::f32, {1}, four}};
    expect_error(serialize_safetensors(utf8).status(), StatusCode::invalid_argument, {"UTF-8"});
}

TEST(SafetensorsWriter, AtomicReplaceLeavesNoTemporaries) {
    TempDir dir;
    const std::vector<float> v1{1, 2}, v2{3, 4, 5};
    const auto b1 = to_bytes(v1), b2 = to_bytes(v2);
    const SafetensorsWriteEntry e1{"x", DType::f32, {2}, b1}, e2{"x", DType::f32, {3}, b2};
    const auto path = dir / "w.safetensors";
    ASSERT_TRUE(write_safetensors(path, std::span(&e1, 1)).is_ok());
    ASSERT_TRUE(write_safetensors(path, std::span(&e2, 1)).is_ok());
    auto f = SafetensorsFile::open(path);
    ASSERT_TRUE(f.has_value());
    auto t = read_tensor(*(*f)->find("x"));
    ASSERT_TRUE(t.has_value());
    EXPECT_EQ(t->shape(), (Shape{3}));
    EXPECT_EQ(t->as<float>()[2], 5.0f);
    size_t n = 0;
    for (const auto& entry : std::filesystem::directory_iterator(dir.path())) {
        (void)entry;
        ++n;
    }
    EXPECT_EQ(n, 1u);
    // A failed write (no such directory) leaves nothing behind and says why.
    expect_error(write_safetensors(dir / "no/such/dir/w.safetensors", std::span(&e1, 1)), StatusCode::io_error,
                 {"w.safetensors"});
    // A failed serialization writes nothing at all.
    const SafetensorsWriteEntry bad{"y", DType::f32, {5}, b1};
    EXPECT_FALSE(write_safetensors(dir / "bad.safetensors", std::span(&bad, 1)).is_ok());
    EXPECT_FALSE(std::filesystem::exists(dir / "bad.safetensors"));
}

}  // namespace
}  // namespace sieve
