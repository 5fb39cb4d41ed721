// sieve._sieve: the extension module behind the Python package `sieve` (python/sieve/__init__.py).
#include <string>

#include <nanobind/nanobind.h>
#include <nanobind/stl/string.h>

#include "errors.h"
#include "model_bindings.h"
#include "op_backend.h"
#include "ops_bindings.h"
#include "sieve/backends/backend.h"
#include "sieve/version.h"

namespace nb = nanobind;

NB_MODULE(_sieve, m) {
    using namespace sieve::python;
    // Objects an engine holds until the interpreter exits (a vLLM worker's model) are not leaks.
    nb::set_leak_warnings(false);
    m.doc() = "sieve's C++ engine: sparse-attention ops and attention layers over torch tensors (DLPack)";
    register_errors(m);
    m.attr("__version__") = std::string(sieve::library_version());
    m.def("set_backend", &set_op_backend, nb::arg("spec"),
          "Runs the ops on the backend `spec` names (sieve.backend_specs() lists them).");
    m.def("backend_name", &op_backend_name, "The canonical name of the backend the ops run on.");
    m.def("backend_specs", [] { return sieve::backend_specs_help(); }, "The backend specs this build accepts.");
    nb::module_ ops = m.def_submodule("ops", "the op bindings (outputs passed in)");
    bind_row_ops(ops);
    bind_attention_ops(ops);
    bind_linear(ops);
    bind_model(m);
}
