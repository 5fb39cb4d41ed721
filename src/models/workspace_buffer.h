// Scratch memory of a model on its backend: a buffer that grows to the largest step so far and keeps
// its memory between steps (op runs allocate nothing themselves, backends/backend.h). The one kind
// of model scratch: op workspaces, activations and a step's carved sub-buffers all come from it.
#pragma once

#include <cstddef>
#include <memory>
#include <string_view>

#include "backends/backend.h"
#include "core/status.h"

namespace sieve {

class WorkspaceBuffer {
public:
    // At least `bytes` bytes (kBufferAlignment-aligned) of `backend`'s memory; the contents are lost
    // when it grows. out_of_memory_error naming `what` when the backend has no room.
    Expected<void*> reserve(Backend& backend, size_t bytes, std::string_view what);
    // reserve() as an op's Workspace; {nullptr, 0} for 0 bytes.
    Expected<Workspace> workspace(Backend& backend, size_t bytes, std::string_view what);
    size_t capacity() const { return buffer_ ? buffer_->bytes() : 0; }
    // n bytes at device address `at` (inside this buffer) to the host, or from the host: the sanctioned
    // readback of a result (e.g. a selection an observer looks at).
    Status download(Backend& backend, const void* at, void* dst, size_t n) const;
    Status upload(Backend& backend, void* at, const void* src, size_t n);

private:
    std::unique_ptr<DeviceBuffer> buffer_;
};

}  // namespace sieve
