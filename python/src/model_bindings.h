// The binding of sieve.AttentionModel (model.cpp).
#pragma once

#include <nanobind/nanobind.h>

namespace sieve::python {

void bind_model(nanobind::module_& m);

}  // namespace sieve::python
