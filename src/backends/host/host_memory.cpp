#include "backends/host/host_memory.h"

#include <cstdint>
#include <cstdlib>
#include <cstring>

#if defined(__linux__)
#include <sys/mman.h>
#endif

namespace sieve {

namespace {

// Buffers of at least this many bytes (KV caches, weights, large workspaces) are placed on 2 MiB pages where
// Linux allows it (transparent huge pages, asked per buffer by madvise, which is all the common "madvise"
// setting gives): sparse attention and the indexer read rows scattered over whole caches, and with 4 KiB
// pages nearly every row costs a TLB miss (here, V4 sparse attention at batch 16: about 15 % of its time).
// The size is rounded up to whole huge pages, at most 2 MiB more per such buffer.
constexpr size_t kHugePage = size_t{2} << 20;

void advise_huge_pages([[maybe_unused]] void* p, [[maybe_unused]] size_t bytes) {
#if defined(__linux__) && defined(MADV_HUGEPAGE)
    madvise(p, bytes, MADV_HUGEPAGE);  // advice only: without THP the buffer keeps 4 KiB pages
#endif
}

class HostBuffer final : public DeviceBuffer {
public:
    HostBuffer(void* data, size_t bytes, BufferUsage usage, bool owned = true)
        : DeviceBuffer(data, bytes, usage, host_device()), owned_(owned) {}
    ~HostBuffer() override {
        if (owned_) std::free(data());
    }

private:
    bool owned_;
};

}  // namespace

const Device& host_device() {
    static const Device device{"host", /*host_accessible=*/true};
    return device;
}

Expected<std::unique_ptr<DeviceBuffer>> host_buffer_alloc(size_t bytes, BufferUsage usage, std::string_view what) {
    if (bytes == 0) return std::unique_ptr<DeviceBuffer>(new HostBuffer(nullptr, 0, usage));
    // aligned_alloc needs a multiple of the alignment.
    if (bytes > SIZE_MAX - kBufferAlignment)
        return out_of_memory_error("{}: {} bytes of {} memory cannot be allocated", what, bytes,
                                   buffer_usage_name(usage));
    const size_t align = bytes >= kHugePage && bytes <= SIZE_MAX - kHugePage ? kHugePage : kBufferAlignment;
    const size_t rounded = (bytes + align - 1) / align * align;
    void* p = std::aligned_alloc(align, rounded);
    if (p == nullptr)
        return out_of_memory_error("{}: cannot allocate {} bytes of {} memory", what, bytes, buffer_usage_name(usage));
    if (align == kHugePage) advise_huge_pages(p, rounded);
    std::memset(p, 0, rounded);  // first touch after the advice: the pages come in huge
    return std::unique_ptr<DeviceBuffer>(new HostBuffer(p, bytes, usage));
}

Expected<std::unique_ptr<DeviceBuffer>> host_buffer_wrap(void* data, size_t bytes, BufferUsage usage, std::string_view what) {
    if (bytes > 0 && (data == nullptr || reinterpret_cast<uintptr_t>(data) % kBufferAlignment != 0))
        return invalid_argument_error("{}: {} bytes of {} memory at {}: not {}-byte aligned", what, bytes,
                                      buffer_usage_name(usage), data, kBufferAlignment);
    return std::unique_ptr<DeviceBuffer>(new HostBuffer(bytes > 0 ? data : nullptr, bytes, usage, /*owned=*/false));
}

Status HostMemoryBackend::transfer_bytes(Transfer, void* dst, const void* src, size_t n) {
    std::memcpy(dst, src, n);
    return Status::ok();
}
Status HostMemoryBackend::fill_bytes(void* dst, uint8_t value, size_t n) {
    std::memset(dst, value, n);
    return Status::ok();
}

}  // namespace sieve
