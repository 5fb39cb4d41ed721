// sieve's Status as Python exceptions. Every class derives from sieve.SieveError and from the builtin
// a Python caller would catch for that kind of failure:
//   invalid_argument → InvalidArgumentError(ValueError)     not_found → NotFoundError(LookupError)
//   unsupported      → UnsupportedError(NotImplementedError) io_error  → IoError(OSError)
//   corrupt          → CorruptError(ValueError)             out_of_memory → OutOfMemoryError(MemoryError)
//   internal         → InternalError(RuntimeError)
// The message is sieve's, unchanged.
#pragma once

#include <exception>
#include <string>

#include <nanobind/nanobind.h>

#include "sieve/core/status.h"

namespace sieve::python {

// Thrown by the bindings; translated into the class of its code when it reaches Python.
class StatusError : public std::exception {
public:
    explicit StatusError(Status status) : status_(std::move(status)) {}
    const char* what() const noexcept override { return status_.message().c_str(); }
    StatusCode code() const { return status_.code(); }

private:
    Status status_;
};

// Throws StatusError unless ok.
inline void check(Status status) {
    if (!status.is_ok()) throw StatusError(std::move(status));
}
template <typename T>
T value_or_throw(Expected<T> e) {
    if (!e.has_value()) throw StatusError(e.status());
    return std::move(e).value();
}

// Creates the exception classes in module `m` and installs the translator.
void register_errors(nanobind::module_& m);

}  // namespace sieve::python
