#include "sieve/io/mapped_file.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <utility>

namespace sieve {

Expected<MappedFile> MappedFile::open(const std::filesystem::path& path) {
    // O_NONBLOCK: opening a FIFO (a hostile shard name) must not wait for a writer; it has no
    // effect on regular files, and anything else is refused after fstat.
    const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
    if (fd < 0) {
        const int err = errno;
        if (err == ENOENT) return not_found_error("file {}: does not exist", path.string());
        return io_error("file {}: cannot open: {}", path.string(), std::strerror(err));
    }
    struct stat st {};
    if (::fstat(fd, &st) != 0) {
        const int err = errno;
        ::close(fd);
        return io_error("file {}: cannot stat: {}", path.string(), std::strerror(err));
    }
    if (!S_ISREG(st.st_mode)) {
        ::close(fd);
        return invalid_argument_error("file {}: not a regular file", path.string());
    }
    MappedFile file;
    file.path_ = path;
    file.size_ = static_cast<size_t>(st.st_size);
    if (file.size_ > 0) {
        void* p = ::mmap(nullptr, file.size_, PROT_READ, MAP_PRIVATE, fd, 0);
        if (p == MAP_FAILED) {
            const int err = errno;
            ::close(fd);
            return io_error("file {}: cannot mmap {} bytes: {}", path.string(), file.size_, std::strerror(err));
        }
        file.data_ = static_cast<const uint8_t*>(p);
        file.mapped_ = true;
    }
    ::close(fd);  // the mapping keeps its own reference to the file
    return file;
}

MappedFile::MappedFile(MappedFile&& other) noexcept
    : data_(std::exchange(other.data_, nullptr)),
      size_(std::exchange(other.size_, 0)),
      mapped_(std::exchange(other.mapped_, false)),
      path_(std::move(other.path_)),
      owned_(std::move(other.owned_)) {}

MappedFile& MappedFile::operator=(MappedFile&& other) noexcept {
    if (this != &other) {
        reset();
        data_ = std::exchange(other.data_, nullptr);
        size_ = std::exchange(other.size_, 0);
        mapped_ = std::exchange(other.mapped_, false);
        path_ = std::move(other.path_);
        owned_ = std::move(other.owned_);
    }
    return *this;
}

MappedFile MappedFile::from_bytes(std::vector<uint8_t> bytes, const std::filesystem::path& label) {
    MappedFile f;
    f.owned_ = std::move(bytes);
    f.data_ = f.owned_.data();  // a moved vector keeps its buffer, so data_ stays valid across moves
    f.size_ = f.owned_.size();
    f.path_ = label;
    return f;
}

MappedFile::~MappedFile() { reset(); }

void MappedFile::reset() {
    if (mapped_) ::munmap(const_cast<uint8_t*>(data_), size_);
    data_ = nullptr;
    size_ = 0;
    mapped_ = false;
    owned_.clear();
    owned_.shrink_to_fit();
}

}  // namespace sieve
