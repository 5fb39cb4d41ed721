// Host memory as a backend's device: what the ref and cpu backends (and any backend whose kernels
// run on the host) inherit. Buffers are aligned, zeroed heap blocks; transfers are memcpy, and the
// stream is the calling thread (every op has finished when it returns), so synchronize() has
// nothing to wait for.
#pragma once

#include "sieve/backends/backend.h"

namespace sieve {

// The one host device: every HostMemoryBackend shares it, so their buffers are interchangeable.
const Device& host_device();

// Aligned, zeroed host memory of host_device(); also for backends that keep host-side staging.
Expected<std::unique_ptr<DeviceBuffer>> host_buffer_alloc(size_t bytes, BufferUsage usage, std::string_view what);
// A buffer of host_device() over the caller's host memory (Backend::buffer_wrap): checked for alignment,
// never freed.
Expected<std::unique_ptr<DeviceBuffer>> host_buffer_wrap(void* data, size_t bytes, BufferUsage usage, std::string_view what);

class HostMemoryBackend : public Backend {
public:
    const Device& device() const override { return host_device(); }
    Expected<std::unique_ptr<DeviceBuffer>> buffer_alloc(size_t bytes, BufferUsage usage,
                                                         std::string_view what) override {
        return host_buffer_alloc(bytes, usage, what);
    }
    Expected<std::unique_ptr<DeviceBuffer>> buffer_wrap(void* data, size_t bytes, BufferUsage usage,
                                                        std::string_view what) override {
        return host_buffer_wrap(data, bytes, usage, what);
    }
    Status synchronize() override { return Status::ok(); }

protected:
    Status transfer_bytes(Transfer kind, void* dst, const void* src, size_t n) override;
    Status fill_bytes(void* dst, uint8_t value, size_t n) override;
};

}  // namespace sieve
