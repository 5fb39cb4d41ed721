#include "sieve/io/safetensors.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstring>
#include <exception>
#include <limits>
#include <new>
#include <numeric>

#include "core/assert.h"
#include "core/thread_pool.h"
#include "io/json_strict.h"

namespace sieve {
namespace {

using json = nlohmann::json;

constexpr std::string_view kMetadataKey = "__metadata__";

uint64_t load_u64_le(const uint8_t* p) {
    uint64_t v = 0;
    for (int i = 7; i >= 0; --i) v = (v << 8) | p[i];
    return v;
}

// Element size in bits of a header dtype string; 0 if the string is unknown.
struct ResolvedDType {
    std::optional<DType> dtype;
    uint64_t bits = 0;
};
ResolvedDType resolve_dtype(std::string_view s) {
    if (const auto t = dtype_from_safetensors_name(s)) return {*t, dtype_size(*t) * 8};
    for (const auto& o : kSafetensorsOpaqueDTypes)
        if (o.name == s) return {std::nullopt, static_cast<uint64_t>(o.bits)};
    return {};
}

std::string json_to_short_string(const json& v) {
    std::string s = v.dump(-1, ' ', false, json::error_handler_t::replace);
    if (s.size() > 64) s = s.substr(0, 61) + "...";
    return s;
}

Expected<Shape> parse_shape(const json& v, std::string_view file, const std::string& name) {
    if (!v.is_array())
        return corrupt_error("file {}: tensor '{}': \"shape\" is a JSON {}, expected an array", file, name,
                             json_type_name(v));
    Shape shape;
    shape.reserve(v.size());
    for (size_t i = 0; i < v.size(); ++i) {
        const json& d = v[i];
        if (d.is_number_unsigned()) {
            const uint64_t u = d.get<uint64_t>();
            if (u > static_cast<uint64_t>(std::numeric_limits<int64_t>::max()))
                return corrupt_error("file {}: tensor '{}': shape dim {} = {} does not fit in int64", file, name, i,
                                     u);
            shape.push_back(static_cast<int64_t>(u));
        } else if (d.is_number_integer()) {  // signed and not unsigned: negative
            return corrupt_error("file {}: tensor '{}': shape dim {} = {} is negative", file, name, i,
                                 d.get<int64_t>());
        } else {
            return corrupt_error("file {}: tensor '{}': shape dim {} is {}, expected a non-negative integer", file,
                                 name, i, json_to_short_string(d));
        }
    }
    return shape;
}

Expected<SafetensorsTensorInfo> parse_tensor_entry(const std::string& name, const json& entry, uint64_t data_bytes,
                                                   std::string_view file) {
    if (!entry.is_object())
        return corrupt_error("file {}: tensor '{}': entry is a JSON {}, expected an object", file, name,
                             json_type_name(entry));
    SafetensorsTensorInfo info;
    info.name = name;

    const auto dtype_it = entry.find("dtype");
    if (dtype_it == entry.end()) return corrupt_error("file {}: tensor '{}': no \"dtype\" field", file, name);
    if (!dtype_it->is_string())
        return corrupt_error("file {}: tensor '{}': \"dtype\" is a JSON {}, expected a string", file, name,
                             json_type_name(*dtype_it));
    info.dtype_string = dtype_it->get<std::string>();
    const ResolvedDType resolved = resolve_dtype(info.dtype_string);
    if (resolved.bits == 0)
        return unsupported_error("file {}: tensor '{}': unknown dtype '{}'", file, name, info.dtype_string);
    info.dtype = resolved.dtype;

    const auto shape_it = entry.find("shape");
    if (shape_it == entry.end()) return corrupt_error("file {}: tensor '{}': no \"shape\" field", file, name);
    SIEVE_ASSIGN_OR_RETURN(info.shape, parse_shape(*shape_it, file, name));

    const auto off_it = entry.find("data_offsets");
    if (off_it == entry.end()) return corrupt_error("file {}: tensor '{}': no \"data_offsets\" field", file, name);
    const json& off = *off_it;
    if (!off.is_array() || off.size() != 2 || !off[0].is_number_unsigned() || !off[1].is_number_unsigned())
        return corrupt_error("file {}: tensor '{}': \"data_offsets\" is {}, expected [begin, end] of two "
                             "non-negative integers",
                             file, name, json_to_short_string(off));
    info.data_begin = off[0].get<uint64_t>();
    info.data_end = off[1].get<uint64_t>();
    if (info.data_begin > info.data_end)
        return corrupt_error("file {}: tensor '{}': data_offsets [{}, {}] end before they begin", file, name,
                             info.data_begin, info.data_end);
    if (info.data_end > data_bytes)
        return corrupt_error("file {}: tensor '{}': data_offsets [{}, {}] exceed the data section of {} bytes",
                             file, name, info.data_begin, info.data_end, data_bytes);

    const auto numel = shape_numel(info.shape);
    if (!numel)
        return corrupt_error("file {}: tensor '{}': shape {} has more elements than int64 can count", file, name,
                             shape_to_string(info.shape));
    uint64_t bits = 0;
    if (__builtin_mul_overflow(static_cast<uint64_t>(*numel), resolved.bits, &bits))
        return corrupt_error("file {}: tensor '{}': shape {} of {} overflows a byte count", file, name,
                             shape_to_string(info.shape), info.dtype_string);
    if (bits % 8 != 0)
        return corrupt_error("file {}: tensor '{}': shape {} of {} is not a whole number of bytes", file, name,
                             shape_to_string(info.shape), info.dtype_string);
    if (bits / 8 != info.nbytes())
        return corrupt_error("file {}: tensor '{}': data_offsets [{}, {}] hold {} bytes, shape {} of {} needs {}",
                             file, name, info.data_begin, info.data_end, info.nbytes(),
                             shape_to_string(info.shape), info.dtype_string, bits / 8);
    return info;
}

// No two non-empty tensors share a byte. Empty tensors occupy nothing and may sit anywhere.
Status check_no_overlap(const std::vector<SafetensorsTensorInfo>& tensors, std::string_view file) {
    std::vector<const SafetensorsTensorInfo*> order;
    order.reserve(tensors.size());
    for (const auto& t : tensors)
        if (t.nbytes() > 0) order.push_back(&t);
    std::sort(order.begin(), order.end(), [](const auto* a, const auto* b) {
        return a->data_begin != b->data_begin ? a->data_begin < b->data_begin : a->data_end < b->data_end;
    });
    for (size_t i = 1; i < order.size(); ++i) {
        const auto* a = order[i - 1];
        const auto* b = order[i];
        if (b->data_begin < a->data_end)
            return corrupt_error("file {}: tensors '{}' (data_offsets [{}, {}]) and '{}' ([{}, {}]) overlap", file,
                                 a->name, a->data_begin, a->data_end, b->name, b->data_begin, b->data_end);
    }
    return Status::ok();
}

}  // namespace

const SafetensorsTensorInfo* SafetensorsHeader::find(std::string_view name) const {
    const auto it = std::lower_bound(tensors.begin(), tensors.end(), name,
                                     [](const SafetensorsTensorInfo& t, std::string_view n) { return t.name < n; });
    if (it == tensors.end() || it->name != name) return nullptr;
    return &*it;
}

Expected<SafetensorsHeader> parse_safetensors_header(std::span<const uint8_t> file_bytes, std::string_view file) {
    if (file_bytes.size() < 8)
        return corrupt_error("file {}: {} bytes, too short for the 8-byte header length", file, file_bytes.size());
    SafetensorsHeader header;
    header.header_bytes = load_u64_le(file_bytes.data());
    const uint64_t available = file_bytes.size() - 8;
    if (header.header_bytes > kSafetensorsMaxHeaderBytes)
        return corrupt_error("file {}: header length {} exceeds the limit of {} bytes", file, header.header_bytes,
                             kSafetensorsMaxHeaderBytes);
    if (header.header_bytes > available)
        return corrupt_error("file {}: header length {} exceeds the {} bytes that follow the length field "
                             "(truncated file?)",
                             file, header.header_bytes, available);
    header.data_offset = 8 + header.header_bytes;
    header.data_bytes = available - header.header_bytes;

    const std::string_view text(reinterpret_cast<const char*>(file_bytes.data() + 8), header.header_bytes);
    json root;
    SIEVE_RETURN_IF_ERROR(json_parse_strict(text, fmt::format("file {}: header", file), root));
    if (!root.is_object())
        return corrupt_error("file {}: header is a JSON {}, expected an object", file, json_type_name(root));

    try {
        header.tensors.reserve(root.size());
        for (auto it = root.begin(); it != root.end(); ++it) {  // std::map order: sorted by name
            const std::string& key = it.key();
            const json& value = it.value();
            if (key == kMetadataKey) {
                if (value.is_null()) continue;
                if (!value.is_object())
                    return corrupt_error("file {}: \"__metadata__\" is a JSON {}, expected an object of strings",
                                         file, json_type_name(value));
                for (auto m = value.begin(); m != value.end(); ++m) {
                    if (!m.value().is_string())
                        return corrupt_error("file {}: \"__metadata__\" key '{}' is a JSON {}, expected a string",
                                             file, m.key(), json_type_name(m.value()));
                    header.metadata.emplace(m.key(), m.value().get<std::string>());
                }
                continue;
            }
            SIEVE_ASSIGN_OR_RETURN(auto info, parse_tensor_entry(key, value, header.data_bytes, file));
            header.tensors.push_back(std::move(info));
        }
    } catch (const std::bad_alloc&) {
        return out_of_memory_error("file {}: out of memory while reading the header", file);
    }
    SIEVE_RETURN_IF_ERROR(check_no_overlap(header.tensors, file));
    return header;
}

SafetensorsTensorView safetensors_tensor_view(const SafetensorsHeader& header, const SafetensorsTensorInfo& info,
                                              std::span<const uint8_t> file_bytes, std::string_view file_label) {
    SIEVE_ASSERT(header.data_offset + info.data_end <= file_bytes.size(), "tensor view outside the file");
    SafetensorsTensorView v;
    v.name = info.name;
    v.file = file_label;
    v.dtype = info.dtype;
    v.dtype_string = info.dtype_string;
    v.shape = info.shape;
    v.bytes = file_bytes.subspan(header.data_offset + info.data_begin, info.nbytes());
    return v;
}

// ---- SafetensorsFile ---------------------------------------------------------------------------

Expected<std::unique_ptr<SafetensorsFile>> SafetensorsFile::open(const std::filesystem::path& path) {
    SIEVE_ASSIGN_OR_RETURN(MappedFile map, MappedFile::open(path));
    SIEVE_ASSIGN_OR_RETURN(SafetensorsHeader header, parse_safetensors_header(map.bytes(), path.string()));
    std::unique_ptr<SafetensorsFile> file(new SafetensorsFile());
    file->map_ = std::move(map);
    file->header_ = std::move(header);
    file->file_name_ = path.filename().string();
    return file;
}

Expected<std::unique_ptr<SafetensorsFile>> SafetensorsFile::from_bytes(std::vector<uint8_t> bytes,
                                                                       const std::string& name) {
    MappedFile map = MappedFile::from_bytes(std::move(bytes), name);
    SIEVE_ASSIGN_OR_RETURN(SafetensorsHeader header, parse_safetensors_header(map.bytes(), name));
    std::unique_ptr<SafetensorsFile> file(new SafetensorsFile());
    file->map_ = std::move(map);
    file->header_ = std::move(header);
    file->file_name_ = name;
    return file;
}

SafetensorsTensorView SafetensorsFile::view(const SafetensorsTensorInfo& info) const {
    return safetensors_tensor_view(header_, info, map_.bytes(), file_name_);
}

std::optional<SafetensorsTensorView> SafetensorsFile::find(std::string_view name) const {
    const SafetensorsTensorInfo* info = header_.find(name);
    if (!info) return std::nullopt;
    return view(*info);
}

Expected<SafetensorsTensorView> SafetensorsFile::tensor(std::string_view name) const {
    if (auto v = find(name)) return *v;
    return not_found_error("file {}: no tensor '{}'", path().string(), name);
}

// ---- conversion ----------------------------------------------------------------------------------

namespace {

template <typename T>
T load(const uint8_t* p) {
    T v;
    std::memcpy(&v, p, sizeof(T));
    return v;
}

template <typename T, typename F>
void decode_loop(const uint8_t* src, int64_t n, float* dst, F&& f) {
    for (int64_t i = 0; i < n; ++i) dst[i] = f(load<T>(src + i * static_cast<int64_t>(sizeof(T))));
}

}  // namespace

void decode_to_f32(DType dtype, const uint8_t* src, int64_t n, float* dst) {
    if (n <= 0) return;
    switch (dtype) {
        case DType::f64: decode_loop<double>(src, n, dst, [](double v) { return static_cast<float>(v); }); return;
        case DType::f32: std::memcpy(dst, src, static_cast<size_t>(n) * 4); return;
        case DType::f16: decode_loop<uint16_t>(src, n, dst, f16_to_f32); return;
        case DType::bf16: decode_loop<uint16_t>(src, n, dst, bf16_to_f32); return;
        case DType::f8_e4m3: decode_loop<uint8_t>(src, n, dst, fp8_e4m3_to_f32); return;
        case DType::f8_e5m2: decode_loop<uint8_t>(src, n, dst, fp8_e5m2_to_f32); return;
        case DType::f8_e8m0: decode_loop<uint8_t>(src, n, dst, ue8m0_to_f32); return;
        case DType::i64: decode_loop<int64_t>(src, n, dst, [](int64_t v) { return static_cast<float>(v); }); return;
        case DType::i32: decode_loop<int32_t>(src, n, dst, [](int32_t v) { return static_cast<float>(v); }); return;
        case DType::i16: decode_loop<int16_t>(src, n, dst, [](int16_t v) { return static_cast<float>(v); }); return;
        case DType::i8: decode_loop<int8_t>(src, n, dst, [](int8_t v) { return static_cast<float>(v); }); return;
        case DType::u64: decode_loop<uint64_t>(src, n, dst, [](uint64_t v) { return static_cast<float>(v); }); return;
        case DType::u32: decode_loop<uint32_t>(src, n, dst, [](uint32_t v) { return static_cast<float>(v); }); return;
        case DType::u16: decode_loop<uint16_t>(src, n, dst, [](uint16_t v) { return static_cast<float>(v); }); return;
        case DType::u8: decode_loop<uint8_t>(src, n, dst, [](uint8_t v) { return static_cast<float>(v); }); return;
        case DType::boolean: decode_loop<uint8_t>(src, n, dst, [](uint8_t v) { return v ? 1.0f : 0.0f; }); return;
    }
    SIEVE_ASSERT(false, "decode_to_f32: unknown dtype");
}

Expected<Tensor> read_tensor(const SafetensorsTensorView& t, DType out) {
    if (t.is_opaque())
        return unsupported_error("tensor {} (in {}): dtype {} cannot be converted", t.name, t.file, t.dtype_string);
    const DType src = *t.dtype;
    if (out != DType::f32 && out != DType::bf16 && out != src)
        return invalid_argument_error("tensor {} (in {}): cannot read {} as {} (f32, bf16 or {} only)", t.name, t.file,
                                      dtype_name(src), dtype_name(out), dtype_name(src));
    SIEVE_ASSIGN_OR_RETURN(Tensor result, Tensor::zeros(out, Shape(t.shape.begin(), t.shape.end())));
    const int64_t n = result.numel();
    SIEVE_ASSERT(static_cast<uint64_t>(n) * dtype_size(src) == t.bytes.size(), "view size disagrees with shape");
    if (out == src) {
        if (n > 0) std::memcpy(result.data(), t.bytes.data(), t.bytes.size());
        return result;
    }
    const size_t in_size = dtype_size(src);
    const uint8_t* in = t.bytes.data();
    // Chunks of at least 64 Ki elements: below that, waking the pool costs more than it saves.
    constexpr int64_t kMinChunk = int64_t{1} << 16;
    constexpr int64_t kTile = 1024;  // f32 staging for the bf16 output, on the stack
    if (out == DType::f32) {
        float* dst = result.as<float>();
        ThreadPool::global().parallel_for(
            n, [&](int64_t b, int64_t e) { decode_to_f32(src, in + b * static_cast<int64_t>(in_size), e - b, dst + b); },
            kMinChunk);
    } else {  // bf16 from a non-bf16 source
        uint16_t* dst = result.as<uint16_t>();
        ThreadPool::global().parallel_for(
            n,
            [&](int64_t b, int64_t e) {
                float tile[kTile];
                for (int64_t i = b; i < e; i += kTile) {
                    const int64_t m = std::min(kTile, e - i);
                    decode_to_f32(src, in + i * static_cast<int64_t>(in_size), m, tile);
                    for (int64_t j = 0; j < m; ++j) dst[i + j] = f32_to_bf16(tile[j]);
                }
            },
            kMinChunk);
    }
    return result;
}

// ---- writing ---------------------------------------------------------------------------------------

Expected<std::vector<uint8_t>> serialize_safetensors(std::span<const SafetensorsWriteEntry> tensors,
                                                     const std::map<std::string, std::string>& metadata) {
    std::vector<size_t> order(tensors.size());
    std::iota(order.begin(), order.end(), size_t{0});
    std::sort(order.begin(), order.end(), [&](size_t a, size_t b) {
        const size_t sa = dtype_size(tensors[a].dtype), sb = dtype_size(tensors[b].dtype);
        return sa != sb ? sa > sb : tensors[a].name < tensors[b].name;
    });
    try {
        json header = json::object();
        uint64_t offset = 0;
        for (size_t idx : order) {
            const SafetensorsWriteEntry& t = tensors[idx];
            if (t.name == kMetadataKey)
                return invalid_argument_error("write safetensors: '{}' is reserved, not a tensor name", t.name);
            if (header.contains(t.name))
                return invalid_argument_error("write safetensors: tensor name '{}' given twice", t.name);
            const auto numel = shape_numel(t.shape);
            if (!numel)
                return invalid_argument_error("write safetensors: tensor '{}': shape {} is negative or overflows",
                                              t.name, shape_to_string(t.shape));
            uint64_t nbytes = 0;
            if (__builtin_mul_overflow(static_cast<uint64_t>(*numel), dtype_size(t.dtype), &nbytes) ||
                nbytes != t.bytes.size())
                return invalid_argument_error("write safetensors: tensor '{}': {} bytes given, shape {} of {} needs {}",
                                              t.name, t.bytes.size(), shape_to_string(t.shape), dtype_name(t.dtype),
                                              nbytes);
            header[t.name] = json{{"dtype", std::string(dtype_safetensors_name(t.dtype))},
                                  {"shape", t.shape},
                                  {"data_offsets", {offset, offset + nbytes}}};
            offset += nbytes;
        }
        if (!metadata.empty()) header[std::string(kMetadataKey)] = metadata;
        // strict: a name or metadata string that is not valid UTF-8 throws type_error, caught below.
        std::string text = header.dump();
        text.append((8 - text.size() % 8) % 8, ' ');  // the data section starts 8-aligned, as the reference pads

        std::vector<uint8_t> bytes;
        bytes.reserve(8 + text.size() + offset);
        const uint64_t n = text.size();
        for (int i = 0; i < 8; ++i) bytes.push_back(static_cast<uint8_t>(n >> (8 * i)));
        bytes.insert(bytes.end(), text.begin(), text.end());
        for (size_t idx : order) bytes.insert(bytes.end(), tensors[idx].bytes.begin(), tensors[idx].bytes.end());
        return bytes;
    } catch (const std::bad_alloc&) {
        return out_of_memory_error("write safetensors: out of memory building the file");
    } catch (const json::exception& e) {
        return invalid_argument_error("write safetensors: a tensor name or metadata string is not valid UTF-8 ({})",
                                      e.what());
    }
}

Status write_file_atomically(const std::filesystem::path& path, std::span<const uint8_t> bytes) {
    static std::atomic<uint64_t> counter{0};
    const std::filesystem::path tmp =
        path.string() + fmt::format(".tmp.{}.{}", static_cast<long>(::getpid()), counter.fetch_add(1));
    const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
    if (fd < 0) return io_error("file {}: cannot create {}: {}", path.string(), tmp.string(), std::strerror(errno));
    auto fail = [&](const char* what) {
        const int err = errno;
        ::close(fd);
        ::unlink(tmp.c_str());
        return io_error("file {}: {} failed: {}", path.string(), what, std::strerror(err));
    };
    size_t done = 0;
    while (done < bytes.size()) {
        const ssize_t w = ::write(fd, bytes.data() + done, bytes.size() - done);
        if (w < 0) {
            if (errno == EINTR) continue;
            return fail("write");
        }
        done += static_cast<size_t>(w);
    }
    if (::fsync(fd) != 0) return fail("fsync");
    if (::close(fd) != 0) {
        const int err = errno;
        ::unlink(tmp.c_str());
        return io_error("file {}: close failed: {}", path.string(), std::strerror(err));
    }
    if (::rename(tmp.c_str(), path.c_str()) != 0) {
        const int err = errno;
        ::unlink(tmp.c_str());
        return io_error("file {}: rename from {} failed: {}", path.string(), tmp.string(), std::strerror(err));
    }
    return Status::ok();
}

Status write_safetensors(const std::filesystem::path& path, std::span<const SafetensorsWriteEntry> tensors,
                         const std::map<std::string, std::string>& metadata) {
    SIEVE_ASSIGN_OR_RETURN(std::vector<uint8_t> bytes, serialize_safetensors(tensors, metadata));
    return write_file_atomically(path, bytes);
}

}  // namespace sieve
