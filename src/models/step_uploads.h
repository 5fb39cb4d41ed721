// Step metadata a model builds on the host (positions, request lengths, packed block tables, slot
// lists) copied to its backend, so that ops only ever get device memory (DESIGN.md: a step is planned
// on the host and uploaded; ops never read host memory). Uploads of a step stay valid until reset(),
// which the model calls when the next step begins; the memory is kept and reused.
#pragma once

#include <cstddef>
#include <memory>
#include <span>
#include <string_view>
#include <vector>

#include "sieve/backends/backend.h"
#include "sieve/core/status.h"

namespace sieve {

class StepUploads {
public:
    // Forgets the previous step's uploads (their addresses become invalid); keeps the memory, merged
    // into one buffer when the last step needed several.
    void reset();
    // A device copy of `values`, kBufferAlignment-aligned; `what` names it in an out-of-memory error.
    template <typename T>
    Expected<const T*> put(Backend& backend, std::span<const T> values, std::string_view what) {
        SIEVE_ASSIGN_OR_RETURN(void* p, put_bytes(backend, values.data(), values.size_bytes(), what));
        return static_cast<const T*>(p);
    }
    size_t capacity() const;

private:
    Expected<void*> put_bytes(Backend& backend, const void* data, size_t bytes, std::string_view what);

    std::vector<std::unique_ptr<DeviceBuffer>> chunks_;
    size_t chunk_ = 0, offset_ = 0;  // where the next upload goes
    size_t used_ = 0;                // bytes this step has taken, all chunks
    size_t hint_ = 0;                // bytes the last step took over several chunks
};

}  // namespace sieve
