// A read-only, whole-file memory mapping (POSIX mmap). Weights are read once from the mapping
// and converted at load time (DESIGN.md "Layers of the code"); views into it stay valid for the
// MappedFile's lifetime. A file truncated by another process while mapped can still raise
// SIGBUS on access: the mapping trusts the file not to shrink under it.
#pragma once

#include <cstdint>
#include <filesystem>
#include <span>
#include <string>
#include <vector>

#include "sieve/core/status.h"

namespace sieve {

class MappedFile {
public:
    // Maps a regular file. An empty file gives an empty span (mmap refuses length 0).
    static Expected<MappedFile> open(const std::filesystem::path& path);
    // Bytes held in memory instead of a mapping (a checkpoint built in memory, e.g. a preset's
    // random weights); `label` stands in for the path in messages.
    static MappedFile from_bytes(std::vector<uint8_t> bytes, const std::filesystem::path& label);

    MappedFile() = default;
    MappedFile(MappedFile&& other) noexcept;
    MappedFile& operator=(MappedFile&& other) noexcept;
    MappedFile(const MappedFile&) = delete;
    MappedFile& operator=(const MappedFile&) = delete;
    ~MappedFile();

    std::span<const uint8_t> bytes() const { return {data_, size_}; }
    size_t size() const { return size_; }
    const std::filesystem::path& path() const { return path_; }

private:
    void reset();

    const uint8_t* data_ = nullptr;
    size_t size_ = 0;
    bool mapped_ = false;
    std::filesystem::path path_;
    std::vector<uint8_t> owned_;  // from_bytes: the bytes themselves (data_ points into them)
};

}  // namespace sieve
