// The reference backend: plain scalar implementations of every op, written to be obviously
// correct rather than fast (the oracle of the conformance tests, tests/ops/). Reductions accumulate
// in double, so the oracle sits within one fp32 rounding of the exact result of its fp32 inputs.
// Unlike the cpu backend, ref may allocate temporaries during a call.
#pragma once

#include <memory>

#include "sieve/backends/backend.h"

namespace sieve {

std::unique_ptr<Backend> make_ref_backend();

}  // namespace sieve
