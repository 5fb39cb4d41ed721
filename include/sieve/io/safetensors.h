// The safetensors format: parse a header (hostile input), view tensors inside a mapped file,
// convert them to f32/bf16, and write files.
//
// Layout (huggingface/safetensors): 8-byte little-endian header length N, N bytes of JSON, then
// the data section. The JSON is an object: tensor name → {"dtype", "shape", "data_offsets":
// [begin, end]} (offsets relative to the data section), plus an optional "__metadata__" object of
// string → string.
//
// What the parser accepts (decisions, each checked and reported with the file and tensor named):
// - N ≤ kSafetensorsMaxHeaderBytes and 8 + N ≤ file size; the JSON must be an object, with no
//   duplicate key at any level (nlohmann keeps one of two equal keys silently, so a SAX pass
//   detects them first); every field has the documented type; unknown fields of a tensor entry
//   are ignored, as the reference does.
// - Shapes: integers ≥ 0 whose product fits in int64; data_offsets: two unsigned integers,
//   begin ≤ end ≤ data section size, end − begin == numel · element size (overflow-checked).
// - No two non-empty tensors overlap. Gaps between tensors and unused bytes at the end are
//   allowed (the reference rejects them; they are harmless for reading and some writers pad).
// - dtypes: every DType (core/dtype.h). Safetensors dtypes that sieve has no DType for (the
//   sub-byte floats F4, F6_E2M3, F6_E3M2 and complex C64, see kSafetensorsOpaqueDTypes) are kept
//   as *opaque* tensors: their byte size is checked from the bit width and `inspect` can list
//   them, but they cannot be converted. Any other dtype string is an `unsupported` error naming
//   the tensor and the string. (DeepSeek-V4's packed FP4 experts are stored as I8 with F8_E8M0
//   scales, so they parse as ordinary I8 tensors; no real checkpoint of the three families needs
//   the opaque path, it exists so that a newer writer does not make the attention tensors of a
//   file unreadable.)
#pragma once

#include <cstdint>
#include <filesystem>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "sieve/core/dtype.h"
#include "sieve/core/status.h"
#include "sieve/core/tensor.h"
#include "sieve/io/mapped_file.h"

namespace sieve {

// The reference implementation refuses headers above 100,000,000 bytes (MAX_HEADER_SIZE).
inline constexpr uint64_t kSafetensorsMaxHeaderBytes = 100'000'000;

// Safetensors dtypes without a sieve DType, with their element size in bits.
struct SafetensorsOpaqueDType {
    std::string_view name;
    int bits;
};
inline constexpr SafetensorsOpaqueDType kSafetensorsOpaqueDTypes[] = {
    {"F4", 4},       // float4 e2m1 (safetensors ≥ 0.6)
    {"F6_E2M3", 6},  // float6 (safetensors ≥ 0.6)
    {"F6_E3M2", 6},
    {"C64", 64},     // complex64
};

// One tensor entry of a header.
struct SafetensorsTensorInfo {
    std::string name;
    std::optional<DType> dtype;  // nullopt: an opaque dtype (kSafetensorsOpaqueDTypes)
    std::string dtype_string;    // as spelled in the header: "BF16", "F4", ...
    Shape shape;
    uint64_t data_begin = 0;  // byte offsets into the data section
    uint64_t data_end = 0;

    bool is_opaque() const { return !dtype.has_value(); }
    uint64_t nbytes() const { return data_end - data_begin; }
    int64_t numel() const { return shape_numel(shape).value_or(0); }  // validated by the parser
};

struct SafetensorsHeader {
    std::vector<SafetensorsTensorInfo> tensors;    // sorted by name
    std::map<std::string, std::string> metadata;   // "__metadata__"
    uint64_t header_bytes = 0;                     // N
    uint64_t data_offset = 0;                      // 8 + N: where the data section starts
    uint64_t data_bytes = 0;                       // file size − 8 − N

    const SafetensorsTensorInfo* find(std::string_view name) const;
};

// Parses and validates the header of a complete file held in memory (the fuzzer's entry
// point). `file_label` names the file in error messages. Never reads outside `file_bytes`.
Expected<SafetensorsHeader> parse_safetensors_header(std::span<const uint8_t> file_bytes,
                                                     std::string_view file_label = "<memory>");

// A tensor's bytes inside a file's mapping (or buffer): valid while that mapping lives. The
// bytes are not necessarily aligned to the element size.
struct SafetensorsTensorView {
    std::string_view name;
    std::string_view file;          // file name, for messages
    std::optional<DType> dtype;     // nullopt: opaque
    std::string_view dtype_string;
    std::span<const int64_t> shape;
    std::span<const uint8_t> bytes;  // numel · element size bytes

    bool is_opaque() const { return !dtype.has_value(); }
    int64_t numel() const { return shape_numel(shape).value_or(0); }
};

// The view of `info` (an entry of the header parsed from `file_bytes`).
SafetensorsTensorView safetensors_tensor_view(const SafetensorsHeader& header,
                                              const SafetensorsTensorInfo& info,
                                              std::span<const uint8_t> file_bytes,
                                              std::string_view file_label);

// A mapped, validated .safetensors file. Not movable: views point into it.
class SafetensorsFile {
public:
    static Expected<std::unique_ptr<SafetensorsFile>> open(const std::filesystem::path& path);
    // A file held in memory (validated like a mapped one); `name` labels it in messages.
    static Expected<std::unique_ptr<SafetensorsFile>> from_bytes(std::vector<uint8_t> bytes, const std::string& name);

    SafetensorsFile(const SafetensorsFile&) = delete;
    SafetensorsFile& operator=(const SafetensorsFile&) = delete;

    const std::filesystem::path& path() const { return map_.path(); }
    const std::string& file_name() const { return file_name_; }  // for messages
    const SafetensorsHeader& header() const { return header_; }
    std::span<const SafetensorsTensorInfo> tensors() const { return header_.tensors; }
    const std::map<std::string, std::string>& metadata() const { return header_.metadata; }

    SafetensorsTensorView view(const SafetensorsTensorInfo& info) const;
    std::optional<SafetensorsTensorView> find(std::string_view name) const;
    Expected<SafetensorsTensorView> tensor(std::string_view name) const;  // not_found if absent

private:
    SafetensorsFile() = default;

    MappedFile map_;
    SafetensorsHeader header_;
    std::string file_name_;
};

// ---- conversion ------------------------------------------------------------------------------

// Decodes n elements of `dtype` from possibly unaligned bytes to f32. Integers convert with
// float rounding (exact below 2^24), f64 rounds to nearest, bool gives 0/1, f8_e8m0 gives
// 2^(b − 127) (0xFF = NaN).
void decode_to_f32(DType dtype, const uint8_t* src, int64_t n, float* dst);  // src: [n], dst: [n]

// Copies a tensor out of its mapping as `out`: f32, bf16 (round-to-nearest-even of the f32
// value; bf16 sources are copied bit-exact), or the tensor's own dtype (a byte copy). The result
// has the tensor's shape. Opaque tensors give `unsupported`. Large tensors are converted on
// ThreadPool::global(), which is not reentrant: do not call this from inside a parallel_for of
// that pool or from two threads at once.
Expected<Tensor> read_tensor(const SafetensorsTensorView& t, DType out = DType::f32);

// ---- writing ---------------------------------------------------------------------------------

struct SafetensorsWriteEntry {
    std::string name;
    DType dtype = DType::f32;
    Shape shape;
    std::span<const uint8_t> bytes;  // [numel · dtype_size(dtype)], row-major
};

// The bytes of a safetensors file. As the reference writer: data ordered by element size
// (largest first) then name, so every tensor starts aligned to its element size; the header
// padded with spaces so that the data section starts at a multiple of 8.
Expected<std::vector<uint8_t>> serialize_safetensors(std::span<const SafetensorsWriteEntry> tensors,
                                                     const std::map<std::string, std::string>& metadata = {});

// Writes `path` through a temporary file in the same directory and a rename, so that a failure
// leaves no half-written file behind. The file is built in memory first (fixtures and tools write
// small files).
Status write_safetensors(const std::filesystem::path& path, std::span<const SafetensorsWriteEntry> tensors,
                         const std::map<std::string, std::string>& metadata = {});

// Writes `bytes` to `path` atomically (temporary file, fsync, rename). Used by the writer; also
// for small side files (an index.json) that must appear whole or not at all.
Status write_file_atomically(const std::filesystem::path& path, std::span<const uint8_t> bytes);

}  // namespace sieve
