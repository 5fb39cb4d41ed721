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

}  // namespace sieve
