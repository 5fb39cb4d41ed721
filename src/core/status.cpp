#include "sieve/core/status.h"

namespace sieve {

const char* status_code_name(StatusCode code) {
    switch (code) {
        case StatusCode::ok: return "ok";
        case StatusCode::invalid_argument: return "invalid argument";
        case StatusCode::not_found: return "not found";
        case StatusCode::unsupported: return "unsupported";
        case StatusCode::io_error: return "i/o error";
        case StatusCode::corrupt: return "corrupt";
        case StatusCode::out_of_memory: return "out of memory";
        case StatusCode::internal: return "internal error";
    }
    return "unknown";
}

std::string Status::to_string() const {
    if (is_ok()) return "ok";
    return fmt::format("{}: {}", status_code_name(code_), message_);
}

Status Status::with_context(const std::string& context) const {
    if (is_ok()) return *this;
    return Status(code_, context + ": " + message_);
}

}  // namespace sieve
