// The backend the op bindings run on: one per process, made from the spec "cpu" on first use or
// from the one sieve.set_backend() names ("ref", "cpu:avx2", ...: sieve.backend_specs()). Every call
// into the engine from Python (ops and AttentionModel steps) holds one process-wide lock, since the
// cpu backends share one thread pool, which is not reentrant; calls run without the GIL.
#pragma once

#include <cstddef>
#include <functional>
#include <memory>
#include <mutex>
#include <string>

#include "sieve/backends/backend.h"

namespace sieve::python {

// The process-wide lock of every engine call; take it after releasing the GIL (a thread waiting for
// it must not hold the GIL).
std::unique_lock<std::mutex> lock_engine();

// Replaces the process's op backend (throws the spec's error).
void set_op_backend(const std::string& spec);
// Its canonical name ("cpu:avx512_bf16:auto").
std::string op_backend_name();

// The process's op backend, kept alive by the caller: objects that hold backend state (a prepared linear,
// ops_linear.cpp) keep the backend they were made on, even after set_op_backend replaces it.
std::shared_ptr<Backend> current_op_backend();

using OpCall = std::function<Status(Backend&, const std::function<Workspace(size_t)>& workspace)>;
// Runs `op` on the op backend with the GIL released; `workspace(bytes)` gives scratch of at least
// that many bytes, valid during the call. Throws the Status `op` returns.
void run_op(const OpCall& op);
// The same on `backend` (one current_op_backend() returned; null: the current one), under the same lock
// and scratch.
void run_op_on(const std::shared_ptr<Backend>& backend, const OpCall& op);

}  // namespace sieve::python
