// A checkpoint: one or several .safetensors files seen as one name → tensor map.
//
// `Checkpoint::open(path)` accepts
//   - a .safetensors file;
//   - a directory holding model.safetensors.index.json (transformers' sharded layout): its
//     "weight_map" (tensor name → shard file name) names the shards, which are opened and checked:
//     every tensor of the index is in the shard it names. Shard names must be plain file names in
//     the same directory (no '/', no "..": the index is untrusted input);
//   - otherwise a directory holding model.safetensors;
//   - otherwise a directory: every *.safetensors file in it.
// Across the files of a checkpoint no tensor name may appear twice. Tensors that a shard holds
// but the index does not list are kept (transformers reads every tensor of the shards it opens).
#pragma once

#include <filesystem>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "sieve/core/status.h"
#include "sieve/io/safetensors.h"

namespace sieve {

inline constexpr std::string_view kSafetensorsIndexFileName = "model.safetensors.index.json";
inline constexpr std::string_view kSafetensorsSingleFileName = "model.safetensors";

// The weight_map of an index file held in memory: (tensor name, shard file name) pairs, sorted by
// tensor name. Checks JSON validity, types, duplicate tensor names and shard file names.
Expected<std::vector<std::pair<std::string, std::string>>> parse_safetensors_index(
    std::span<const uint8_t> bytes, std::string_view file_label = "<memory>");

class Checkpoint {
public:
    static Expected<std::unique_ptr<Checkpoint>> open(const std::filesystem::path& path);
    // A checkpoint of files already open (e.g. built in memory); `label` names it in messages.
    static Expected<std::unique_ptr<Checkpoint>> from_files(const std::filesystem::path& label,
                                                             std::vector<std::unique_ptr<SafetensorsFile>> files);

    Checkpoint(const Checkpoint&) = delete;
    Checkpoint& operator=(const Checkpoint&) = delete;

    const std::filesystem::path& path() const { return path_; }
    std::span<const std::unique_ptr<SafetensorsFile>> files() const { return files_; }
    size_t size() const { return entries_.size(); }  // number of tensors

    bool contains(std::string_view name) const { return entries_.count(name) != 0; }
    std::optional<SafetensorsTensorView> find(std::string_view name) const;
    Expected<SafetensorsTensorView> tensor(std::string_view name) const;  // not_found if absent
    std::vector<std::string_view> tensor_names() const;                  // sorted

private:
    Checkpoint() = default;
    Status add_file(std::unique_ptr<SafetensorsFile> file);

    struct Entry {
        const SafetensorsFile* file;
        const SafetensorsTensorInfo* info;
    };
    std::filesystem::path path_;
    std::vector<std::unique_ptr<SafetensorsFile>> files_;
    std::map<std::string_view, Entry, std::less<>> entries_;  // keys point into files_' headers
};

}  // namespace sieve
