#include "sieve/io/checkpoint.h"

#include <algorithm>
#include <new>
#include <set>
#include <system_error>

#include "io/json_strict.h"
#include "sieve/io/mapped_file.h"

namespace sieve {
namespace {

using json = nlohmann::json;
namespace fs = std::filesystem;

// The index is untrusted: a shard name must stay inside the checkpoint directory.
bool is_plain_file_name(std::string_view s) {
    return !s.empty() && s != "." && s != ".." && s.find('/') == std::string_view::npos &&
           s.find('\0') == std::string_view::npos;
}

}  // namespace

Expected<std::vector<std::pair<std::string, std::string>>> parse_safetensors_index(std::span<const uint8_t> bytes,
                                                                                   std::string_view file) {
    // Same cap as a safetensors header: an index is a list of names of the same order of size.
    if (bytes.size() > kSafetensorsMaxHeaderBytes)
        return corrupt_error("file {}: {} bytes, more than the limit of {} for an index", file, bytes.size(),
                             kSafetensorsMaxHeaderBytes);
    json root;
    SIEVE_RETURN_IF_ERROR(
        json_parse_strict(std::string_view(reinterpret_cast<const char*>(bytes.data()), bytes.size()), file, root));
    if (!root.is_object())
        return corrupt_error("file {}: index is a JSON {}, expected an object", file, json_type_name(root));
    const auto wm = root.find("weight_map");
    if (wm == root.end()) return corrupt_error("file {}: no \"weight_map\" field", file);
    if (!wm->is_object())
        return corrupt_error("file {}: \"weight_map\" is a JSON {}, expected an object", file, json_type_name(*wm));
    std::vector<std::pair<std::string, std::string>> out;
    try {
        out.reserve(wm->size());
        for (auto it = wm->begin(); it != wm->end(); ++it) {  // sorted by name (std::map)
            if (!it.value().is_string())
                return corrupt_error("file {}: weight_map entry for tensor '{}' is a JSON {}, expected a file name",
                                     file, it.key(), json_type_name(it.value()));
            std::string shard = it.value().get<std::string>();
            if (!is_plain_file_name(shard))
                return corrupt_error("file {}: weight_map entry for tensor '{}': shard '{}' is not a plain file name",
                                     file, it.key(), shard);
            out.emplace_back(it.key(), std::move(shard));
        }
    } catch (const std::bad_alloc&) {
        return out_of_memory_error("file {}: out of memory while reading the index", file);
    }
    return out;
}

Status Checkpoint::add_file(std::unique_ptr<SafetensorsFile> file) {
    for (const SafetensorsTensorInfo& info : file->tensors()) {
        const auto [it, inserted] = entries_.emplace(info.name, Entry{file.get(), &info});
        if (!inserted)
            return corrupt_error("checkpoint {}: tensor '{}' appears in both {} and {}", path_.string(), info.name,
                                 it->second.file->file_name(), file->file_name());
    }
    files_.push_back(std::move(file));
    return Status::ok();
}

Expected<std::unique_ptr<Checkpoint>> Checkpoint::from_files(const fs::path& label,
                                                              std::vector<std::unique_ptr<SafetensorsFile>> files) {
    std::unique_ptr<Checkpoint> ckpt(new Checkpoint());
    ckpt->path_ = label;
    for (auto& f : files) SIEVE_RETURN_IF_ERROR(ckpt->add_file(std::move(f)));
    return ckpt;
}

Expected<std::unique_ptr<Checkpoint>> Checkpoint::open(const fs::path& path) {
    std::unique_ptr<Checkpoint> ckpt(new Checkpoint());
    ckpt->path_ = path;
    std::error_code ec;
    const fs::file_status st = fs::status(path, ec);
    if (ec || !fs::exists(st)) return not_found_error("checkpoint {}: no such file or directory", path.string());

    std::vector<fs::path> shards;
    std::vector<std::pair<std::string, std::string>> index;
    const fs::path index_path = path / kSafetensorsIndexFileName;
    if (fs::is_regular_file(st)) {
        shards.push_back(path);
    } else if (!fs::is_directory(st)) {
        return invalid_argument_error("checkpoint {}: neither a file nor a directory", path.string());
    } else if (fs::exists(index_path, ec)) {
        SIEVE_ASSIGN_OR_RETURN(MappedFile index_file, MappedFile::open(index_path));
        SIEVE_ASSIGN_OR_RETURN(index, parse_safetensors_index(index_file.bytes(), index_path.string()));
        std::set<std::string> names;
        for (const auto& [tensor, shard] : index) names.insert(shard);
        for (const auto& name : names) shards.push_back(path / name);
        if (shards.empty()) return corrupt_error("file {}: \"weight_map\" is empty", index_path.string());
    } else if (fs::exists(path / kSafetensorsSingleFileName, ec)) {
        shards.push_back(path / kSafetensorsSingleFileName);
    } else {
        for (fs::directory_iterator it(path, ec), end; !ec && it != end; it.increment(ec)) {
            if (it->path().extension() == ".safetensors" && it->is_regular_file(ec)) shards.push_back(it->path());
        }
        if (ec) return io_error("checkpoint {}: cannot list the directory: {}", path.string(), ec.message());
        std::sort(shards.begin(), shards.end());
        if (shards.empty())
            return not_found_error("checkpoint {}: no {}, {} or *.safetensors file in the directory", path.string(),
                                   kSafetensorsIndexFileName, kSafetensorsSingleFileName);
    }

    for (const fs::path& shard : shards) {
        auto file = SafetensorsFile::open(shard);
        if (!file) {
            if (!index.empty())
                return file.status().with_context(fmt::format("shard named by {}", index_path.string()));
            return file.status();
        }
        SIEVE_RETURN_IF_ERROR(ckpt->add_file(std::move(file).value()));
    }
    for (const auto& [tensor, shard] : index) {
        const auto it = ckpt->entries_.find(tensor);
        if (it == ckpt->entries_.end())
            return corrupt_error("file {}: tensor '{}' is listed in shard {}, which does not hold it",
                                 index_path.string(), tensor, shard);
        if (it->second.file->file_name() != shard)
            return corrupt_error("file {}: tensor '{}' is listed in shard {}, but it is in {}", index_path.string(),
                                 tensor, shard, it->second.file->file_name());
    }
    return ckpt;
}

std::optional<SafetensorsTensorView> Checkpoint::find(std::string_view name) const {
    const auto it = entries_.find(name);
    if (it == entries_.end()) return std::nullopt;
    return it->second.file->view(*it->second.info);
}

Expected<SafetensorsTensorView> Checkpoint::tensor(std::string_view name) const {
    if (auto v = find(name)) return *v;
    return not_found_error("checkpoint {}: no tensor '{}'", path_.string(), name);
}

std::vector<std::string_view> Checkpoint::tensor_names() const {
    std::vector<std::string_view> names;
    names.reserve(entries_.size());
    for (const auto& [name, entry] : entries_) names.push_back(name);
    return names;
}

}  // namespace sieve
