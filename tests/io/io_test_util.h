// Helpers for the io tests: a self-deleting temp directory, raw file builders for hostile headers.
#pragma once

#include <gtest/gtest.h>
#include <unistd.h>

#include <atomic>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <optional>
#include <random>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "sieve/core/status.h"

namespace sieve::test {

// A fresh directory under the system temp dir, removed with everything in it on destruction.
class TempDir {
public:
    TempDir() {
        static std::atomic<int> counter{0};
        std::random_device rd;
        path_ = std::filesystem::temp_directory_path() /
                ("sieve_io_test_" + std::to_string(::getpid()) + "_" + std::to_string(counter++) + "_" +
                 std::to_string(rd()));
        std::filesystem::create_directories(path_);
    }
    ~TempDir() {
        std::error_code ec;
        std::filesystem::remove_all(path_, ec);
    }
    TempDir(const TempDir&) = delete;
    TempDir& operator=(const TempDir&) = delete;
    const std::filesystem::path& path() const { return path_; }
    std::filesystem::path operator/(std::string_view name) const { return path_ / name; }

private:
    std::filesystem::path path_;
};

// 8-byte little-endian length + the header text + `data_bytes` bytes of data (0, 1, 2, ...).
// `length_override` replaces the length field (for lying headers).
inline std::vector<uint8_t> raw_safetensors(std::string_view header, size_t data_bytes,
                                            std::optional<uint64_t> length_override = std::nullopt) {
    const uint64_t n = length_override.value_or(header.size());
    std::vector<uint8_t> out;
    for (int i = 0; i < 8; ++i) out.push_back(static_cast<uint8_t>(n >> (8 * i)));
    out.insert(out.end(), header.begin(), header.end());
    for (size_t i = 0; i < data_bytes; ++i) out.push_back(static_cast<uint8_t>(i));
    return out;
}

inline void write_bytes(const std::filesystem::path& path, std::span<const uint8_t> bytes) {
    std::ofstream f(path, std::ios::binary | std::ios::trunc);
    f.write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
    ASSERT_TRUE(f.good()) << path;
}

inline void write_text(const std::filesystem::path& path, std::string_view text) {
    write_bytes(path, std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(text.data()), text.size()));
}

template <typename T>
std::vector<uint8_t> to_bytes(const std::vector<T>& values) {
    std::vector<uint8_t> out(values.size() * sizeof(T));
    if (!out.empty()) std::memcpy(out.data(), values.data(), out.size());
    return out;
}

// EXPECT that `status` has `code` and that its message contains every one of `parts`.
inline void expect_error(const Status& status, StatusCode code, std::initializer_list<std::string_view> parts) {
    EXPECT_EQ(status.code(), code) << status.to_string();
    for (std::string_view part : parts)
        EXPECT_NE(status.message().find(part), std::string::npos)
            << "message \"" << status.message() << "\" lacks \"" << part << "\"";
}

}  // namespace sieve::test
