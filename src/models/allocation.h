// Allocation failures of a model as Status, never as an exception escaping load or forward: the host
// vectors a step uses as scratch grow through scratch_resize, whose failure is an out_of_memory naming
// the bytes and the buffer; no_bad_alloc is the boundary of a whole call, for the allocations no sizing
// names (containers of bookkeeping), so a step or a config too large for the machine is an error of that
// call.
#pragma once

#include <cstddef>
#include <cstdint>
#include <new>
#include <stdexcept>
#include <string_view>
#include <vector>

#include "sieve/core/status.h"

namespace sieve {

// v.resize(n): out_of_memory (with n · sizeof(T) bytes and `what`) instead of throwing.
template <typename T>
Status scratch_resize(std::vector<T>& v, int64_t n, std::string_view what) {
    if (n < 0) return internal_error("{}: negative size {}", what, n);
    const auto count = static_cast<uint64_t>(n);
    try {
        if (count > v.max_size()) throw std::length_error("vector");
        v.resize(static_cast<size_t>(count));
    } catch (const std::bad_alloc&) {
        return out_of_memory_error("cannot allocate {} bytes for {}", count * sizeof(T), what);
    } catch (const std::length_error&) {
        return out_of_memory_error("cannot allocate {} × {} bytes for {}", count, sizeof(T), what);
    }
    return Status::ok();
}

// f() (returning Status or Expected<T>), with a std::bad_alloc it throws turned into out_of_memory
// "<where()>: out of memory (...)"; where() names the call and runs only on failure.
template <typename F, typename Where>
auto no_bad_alloc(F&& f, Where&& where) -> decltype(f()) {
    try {
        return f();
    } catch (const std::bad_alloc&) {
        return out_of_memory_error("{}: out of memory (an allocation of unstated size failed)", where());
    }
}

}  // namespace sieve
