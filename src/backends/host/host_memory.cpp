#include "backends/host/host_memory.h"

#include <cstdint>
#include <cstdlib>
#include <cstring>

namespace sieve {

namespace {

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
    const size_t rounded = (bytes + kBufferAlignment - 1) / kBufferAlignment * kBufferAlignment;
    void* p = std::aligned_alloc(kBufferAlignment, rounded);
    if (p == nullptr)
        return out_of_memory_error("{}: cannot allocate {} bytes of {} memory", what, bytes, buffer_usage_name(usage));
    std::memset(p, 0, rounded);
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
