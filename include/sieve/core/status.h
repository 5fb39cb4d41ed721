// Status and Expected<T>: recoverable errors that carry a message naming the values involved
// (DESIGN.md "Conventions: Errors"). Invariants use SIEVE_ASSERT (core/assert.h) instead.
#pragma once

#include <fmt/format.h>

#include <string>
#include <utility>
#include <variant>

namespace sieve {

enum class StatusCode {
    ok,
    invalid_argument,  // a caller passed something malformed (shape, dtype, flag value)
    not_found,         // a file, tensor or field does not exist
    unsupported,       // valid input that this build/backend/ISA cannot run
    io_error,          // the OS refused (open, mmap, read)
    corrupt,           // a file's bytes contradict its own format (truncated, overlapping, ...)
    out_of_memory,     // an allocation or a pool ran out
    internal,          // a bug in sieve
};

const char* status_code_name(StatusCode code);

class [[nodiscard]] Status {
public:
    Status() = default;
    Status(StatusCode code, std::string message) : code_(code), message_(std::move(message)) {}

    static Status ok() { return {}; }
    bool is_ok() const { return code_ == StatusCode::ok; }
    explicit operator bool() const { return is_ok(); }
    StatusCode code() const { return code_; }
    const std::string& message() const { return message_; }
    // "unsupported: <message>"; what the CLI prints.
    std::string to_string() const;
    // Prepends context ("file x.safetensors: " + message), keeping the code.
    Status with_context(const std::string& context) const;

private:
    StatusCode code_ = StatusCode::ok;
    std::string message_;
};

template <typename... Args>
Status make_status(StatusCode code, fmt::format_string<Args...> format, Args&&... args) {
    return Status(code, fmt::format(format, std::forward<Args>(args)...));
}
// invalid_argument_error("shape [{}] ...", n) and friends, one per code.
#define SIEVE_DEFINE_STATUS_MAKER(function, code)                               \
    template <typename... Args>                                                 \
    Status function(fmt::format_string<Args...> format, Args&&... args) {       \
        return make_status(StatusCode::code, format, std::forward<Args>(args)...); \
    }
SIEVE_DEFINE_STATUS_MAKER(invalid_argument_error, invalid_argument)
SIEVE_DEFINE_STATUS_MAKER(not_found_error, not_found)
SIEVE_DEFINE_STATUS_MAKER(unsupported_error, unsupported)
SIEVE_DEFINE_STATUS_MAKER(io_error, io_error)
SIEVE_DEFINE_STATUS_MAKER(corrupt_error, corrupt)
SIEVE_DEFINE_STATUS_MAKER(out_of_memory_error, out_of_memory)
SIEVE_DEFINE_STATUS_MAKER(internal_error, internal)
#undef SIEVE_DEFINE_STATUS_MAKER



// A value or the Status explaining why there is none.
template <typename T>
class [[nodiscard]] Expected {
public:
    Expected(T value) : state_(std::move(value)) {}  // NOLINT: implicit by design
    Expected(Status status) : state_(std::move(status)) {  // NOLINT: implicit by design
        if (std::get<Status>(state_).is_ok())
            state_ = Status(StatusCode::internal, "Expected constructed from an ok Status");
    }

    bool has_value() const { return std::holds_alternative<T>(state_); }
    explicit operator bool() const { return has_value(); }

    T& value() & { return std::get<T>(state_); }
    const T& value() const& { return std::get<T>(state_); }
    T&& value() && { return std::get<T>(std::move(state_)); }
    T& operator*() & { return value(); }
    const T& operator*() const& { return value(); }
    T* operator->() { return &value(); }
    const T* operator->() const { return &value(); }

    // The error; ok() when a value is present.
    Status status() const { return has_value() ? Status::ok() : std::get<Status>(state_); }

private:
    std::variant<T, Status> state_;
};

}  // namespace sieve

#define SIEVE_CONCAT_INNER(a, b) a##b
#define SIEVE_CONCAT(a, b) SIEVE_CONCAT_INNER(a, b)

// Returns the Status of `expr` from the enclosing function when it is not ok.
#define SIEVE_RETURN_IF_ERROR(expr)                      \
    do {                                                 \
        ::sieve::Status sieve_status_ = (expr);          \
        if (!sieve_status_.is_ok()) return sieve_status_; \
    } while (0)

// `SIEVE_ASSIGN_OR_RETURN(auto x, f());` unwraps an Expected or returns its Status.
#define SIEVE_ASSIGN_OR_RETURN(lhs, expr) \
    SIEVE_ASSIGN_OR_RETURN_IMPL(SIEVE_CONCAT(sieve_expected_, __LINE__), lhs, expr)
#define SIEVE_ASSIGN_OR_RETURN_IMPL(tmp, lhs, expr) \
    auto tmp = (expr);                              \
    if (!tmp.has_value()) return tmp.status();      \
    lhs = std::move(tmp).value()
