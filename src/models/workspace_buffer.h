// Scratch memory of a model on its backend: a buffer that grows to the largest step so far and keeps
// its memory between steps (op runs allocate nothing themselves, backends/backend.h). The one kind
// of model scratch: op workspaces, activations and a step's carved sub-buffers all come from it.
// WorkspaceCarver cuts one reservation into a step's named sub-buffers.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string_view>

#include "sieve/backends/backend.h"
#include "sieve/core/status.h"

namespace sieve {

class WorkspaceBuffer {
public:
    // At least `bytes` bytes (kBufferAlignment-aligned) of `backend`'s memory; the contents are lost
    // when it grows. out_of_memory_error naming `what` when the backend has no room.
    Expected<void*> reserve(Backend& backend, size_t bytes, std::string_view what);
    // reserve() as an op's Workspace; {nullptr, 0} for 0 bytes.
    Expected<Workspace> workspace(Backend& backend, size_t bytes, std::string_view what);
    size_t capacity() const { return buffer_ ? buffer_->bytes() : 0; }
    // The reserved memory (device addresses), nullptr before the first reserve().
    void* data() const { return buffer_ ? buffer_->data() : nullptr; }
    // n bytes at device address `at` (inside this buffer) to the host, or from the host: the sanctioned
    // readback of a result (e.g. a selection an observer looks at).
    Status download(Backend& backend, const void* at, void* dst, size_t n) const;
    Status upload(Backend& backend, void* at, const void* src, size_t n);

private:
    std::unique_ptr<DeviceBuffer> buffer_;
};

// Typed sub-buffers of one scratch reservation, counted first and carved second (DESIGN.md: one arena per
// step, sized by a counting pass; FlashInfer's AlignedAllocator): a carver over base == nullptr only sums
// the sizes (its pointers are null), one over the reserved base hands out the pointers of the same
// sequence of take() calls. Every sub-buffer starts kWorkspaceAlignment-aligned.
struct WorkspaceCarver {
    uint8_t* base = nullptr;
    size_t offset = 0;  // bytes taken so far: after the counting pass, the bytes to reserve

    template <typename T>
    T* take(size_t count) {
        T* p = base ? reinterpret_cast<T*>(base + offset) : nullptr;
        offset += workspace_round_up(count * sizeof(T));
        return p;
    }
    void* take_bytes(size_t bytes) { return take<uint8_t>(bytes); }
    // An op's workspace of `bytes` ({nullptr, bytes} while counting).
    Workspace take_workspace(size_t bytes) { return Workspace{take_bytes(bytes), bytes}; }
};

}  // namespace sieve
