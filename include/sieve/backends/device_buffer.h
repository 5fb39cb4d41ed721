// Memory a backend owns (DESIGN.md "Layers of the code": a backend owns its device). Caches,
// workspaces, weights and a step's tables live in DeviceBuffers; host code moves bytes in and out
// only through the owning backend's buffer_upload / buffer_download / buffer_copy / buffer_fill
// (backends/backend.h), as ggml's set_tensor / get_tensor do.
//
// A buffer's address is a *device* address: op params take it (and addresses inside it), but host
// code may dereference it only when the device says host_accessible (the CPU and ref backends:
// their buffers are plain host memory, so they lose nothing by this indirection).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>

namespace sieve {

// What a buffer holds; a device may place or account the kinds differently (`sieve run` reports them).
enum class BufferUsage : uint8_t {
    weights,    // read-only after load: norms, sinks, RoPE tables, head weights
    cache,      // the paged KV / index / state caches
    workspace,  // op scratch and a step's activations
    step,       // a step's metadata: positions, block tables, slot lists
};
std::string_view buffer_usage_name(BufferUsage usage);

// The memory space buffers live in. Backends that share one (every host backend) may use each
// other's buffers; a buffer given to a backend of another device is invalid_argument.
struct Device {
    std::string_view name;      // "host", ...
    bool host_accessible;       // host code may read and write the buffers' bytes directly
};

// Buffers start zeroed and 64-byte aligned (kBufferAlignment), so that a kernel reading an unwritten
// cache slot sees zeros, not stale data, and every sub-buffer carved at a 64-byte offset stays aligned.
inline constexpr size_t kBufferAlignment = 64;

class DeviceBuffer {
public:
    virtual ~DeviceBuffer() = default;
    DeviceBuffer(const DeviceBuffer&) = delete;
    DeviceBuffer& operator=(const DeviceBuffer&) = delete;

    // The device address of byte 0 (nullptr only for a buffer of 0 bytes).
    void* data() const { return data_; }
    template <typename T>
    T* as() const {
        return static_cast<T*>(data_);
    }
    size_t bytes() const { return bytes_; }
    BufferUsage usage() const { return usage_; }
    const Device& device() const { return *device_; }

protected:
    DeviceBuffer(void* data, size_t bytes, BufferUsage usage, const Device& device)
        : data_(data), bytes_(bytes), usage_(usage), device_(&device) {}

private:
    void* data_;
    size_t bytes_;
    BufferUsage usage_;
    const Device* device_;
};

}  // namespace sieve
