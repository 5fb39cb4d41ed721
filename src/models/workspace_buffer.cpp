#include "models/workspace_buffer.h"

namespace sieve {

Expected<void*> WorkspaceBuffer::reserve(Backend& backend, size_t bytes, std::string_view what) {
    // At least one aligned block, so that the data pointer is never null.
    const size_t wanted = std::max(workspace_round_up(bytes), kWorkspaceAlignment);
    if (capacity() < wanted) {
        buffer_.reset();  // the old memory goes back before the larger block is asked for
        SIEVE_ASSIGN_OR_RETURN(buffer_, backend.buffer_alloc(wanted, BufferUsage::workspace, what));
    }
    return buffer_->data();
}

Expected<Workspace> WorkspaceBuffer::workspace(Backend& backend, size_t bytes, std::string_view what) {
    if (bytes == 0) return Workspace{};
    SIEVE_ASSIGN_OR_RETURN(void* data, reserve(backend, bytes, what));
    return Workspace{data, bytes};
}

namespace {
Expected<size_t> offset_in(const DeviceBuffer* buffer, const void* at, size_t n) {
    const auto* base = buffer ? buffer->as<const uint8_t>() : nullptr;
    const auto* p = static_cast<const uint8_t*>(at);
    if (base == nullptr || p < base || p + n > base + buffer->bytes())
        return internal_error("{} bytes at {} are not inside the workspace buffer", n, at);
    return static_cast<size_t>(p - base);
}
}  // namespace

Status WorkspaceBuffer::download(Backend& backend, const void* at, void* dst, size_t n) const {
    SIEVE_ASSIGN_OR_RETURN(const size_t offset, offset_in(buffer_.get(), at, n));
    return backend.buffer_download(*buffer_, offset, dst, n);
}

Status WorkspaceBuffer::upload(Backend& backend, void* at, const void* src, size_t n) {
    SIEVE_ASSIGN_OR_RETURN(const size_t offset, offset_in(buffer_.get(), at, n));
    return backend.buffer_upload(*buffer_, offset, src, n);
}

}  // namespace sieve
