#include "op_backend.h"

#include <cstdlib>
#include <memory>
#include <mutex>

#include <nanobind/nanobind.h>

#include "errors.h"

namespace nb = nanobind;

namespace sieve::python {
namespace {

struct AlignedFree {
    void operator()(void* p) const { std::free(p); }
};

struct OpBackend {
    std::shared_ptr<Backend> backend;
    std::unique_ptr<void, AlignedFree> scratch;  // grows to the largest workspace asked so far
    size_t scratch_bytes = 0;
};

OpBackend& state() {
    static OpBackend* s = new OpBackend();  // never destroyed: ops may run during interpreter shutdown
    return *s;
}

// Under the engine lock.
const std::shared_ptr<Backend>& backend_locked(OpBackend& s) {
    if (!s.backend) s.backend = value_or_throw(make_backend("cpu"));
    return s.backend;
}

std::mutex& engine_mutex() {
    static std::mutex* m = new std::mutex();  // never destroyed, as state()
    return *m;
}

}  // namespace

std::unique_lock<std::mutex> lock_engine() { return std::unique_lock<std::mutex>(engine_mutex()); }

void set_op_backend(const std::string& spec) {
    std::unique_ptr<Backend> made = value_or_throw(make_backend(spec));
    OpBackend& s = state();
    nb::gil_scoped_release release;
    auto lock = lock_engine();
    s.backend = std::move(made);
}

std::string op_backend_name() {
    OpBackend& s = state();
    nb::gil_scoped_release release;
    auto lock = lock_engine();
    return backend_locked(s)->name();
}

std::shared_ptr<Backend> current_op_backend() {
    OpBackend& s = state();
    nb::gil_scoped_release release;
    auto lock = lock_engine();
    return backend_locked(s);
}

void run_op(const OpCall& op) { run_op_on(nullptr, op); }

void run_op_on(const std::shared_ptr<Backend>& backend, const OpCall& op) {
    OpBackend& s = state();
    Status status;
    {
        nb::gil_scoped_release release;
        auto lock = lock_engine();
        const auto workspace = [&s](size_t bytes) -> Workspace {
            if (bytes > s.scratch_bytes) {
                const size_t rounded = workspace_round_up(bytes);
                void* p = std::aligned_alloc(kWorkspaceAlignment, rounded);
                if (p == nullptr) throw StatusError(out_of_memory_error("op workspace of {} bytes", rounded));
                s.scratch.reset(p);
                s.scratch_bytes = rounded;
            }
            return Workspace{s.scratch.get(), s.scratch_bytes};
        };
        status = op(backend ? *backend : *backend_locked(s), workspace);
    }
    check(std::move(status));
}

}  // namespace sieve::python
