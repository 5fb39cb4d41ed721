#include "models/step_uploads.h"

#include <algorithm>

namespace sieve {

namespace {
constexpr size_t kFirstChunkBytes = size_t{64} << 10;
size_t aligned(size_t bytes) { return (bytes + kBufferAlignment - 1) / kBufferAlignment * kBufferAlignment; }
}  // namespace

void StepUploads::reset() {
    if (chunks_.size() > 1) {
        chunks_.clear();  // put_bytes allocates one chunk for what this step took
        hint_ = used_;
    }
    chunk_ = offset_ = 0;
    used_ = 0;
}

size_t StepUploads::capacity() const {
    size_t bytes = 0;
    for (const auto& c : chunks_) bytes += c->bytes();
    return bytes;
}

Expected<void*> StepUploads::put_bytes(Backend& backend, const void* data, size_t bytes, std::string_view what) {
    const size_t need = aligned(std::max<size_t>(bytes, 1));
    while (chunk_ < chunks_.size() && offset_ + need > chunks_[chunk_]->bytes()) {
        ++chunk_;
        offset_ = 0;
    }
    if (chunk_ == chunks_.size()) {
        // Room for this upload and at least what the step took so far again: a step needs few chunks.
        const size_t size = std::max({need, kFirstChunkBytes, 2 * used_, hint_});
        SIEVE_ASSIGN_OR_RETURN(auto chunk, backend.buffer_alloc(size, BufferUsage::step, what));
        chunks_.push_back(std::move(chunk));
        offset_ = 0;
    }
    DeviceBuffer& c = *chunks_[chunk_];
    SIEVE_RETURN_IF_ERROR(backend.buffer_upload(c, offset_, data, bytes));
    void* p = c.as<uint8_t>() + offset_;
    offset_ += need;
    used_ += need;
    return p;
}

}  // namespace sieve
