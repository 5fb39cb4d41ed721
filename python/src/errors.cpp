#include "errors.h"

#include <Python.h>

#include <array>
#include <utility>

namespace nb = nanobind;

namespace sieve::python {
namespace {

struct ErrorClass {
    StatusCode code;
    const char* name;     // in module sieve
    PyObject* builtin;    // the second base
    const char* doc;
    PyObject* type = nullptr;
};

std::array<ErrorClass, 7>& error_classes() {
    static std::array<ErrorClass, 7> classes{{
        {StatusCode::invalid_argument, "InvalidArgumentError", PyExc_ValueError,
         "A malformed argument: a shape, dtype, device or value sieve cannot take."},
        {StatusCode::not_found, "NotFoundError", PyExc_LookupError, "A file, tensor or field that does not exist."},
        {StatusCode::unsupported, "UnsupportedError", PyExc_NotImplementedError,
         "Valid input that this build, backend or processor cannot run."},
        {StatusCode::io_error, "IoError", PyExc_OSError, "The operating system refused (open, mmap, read)."},
        {StatusCode::corrupt, "CorruptError", PyExc_ValueError, "A file whose bytes contradict its own format."},
        {StatusCode::out_of_memory, "OutOfMemoryError", PyExc_MemoryError, "An allocation or a cache pool ran out."},
        {StatusCode::internal, "InternalError", PyExc_RuntimeError, "A bug in sieve: please report it."},
    }};
    return classes;
}

PyObject* sieve_error = nullptr;

}  // namespace

void register_errors(nb::module_& m) {
    sieve_error = PyErr_NewExceptionWithDoc("sieve.SieveError", "Base class of every error sieve raises.",
                                            PyExc_RuntimeError, nullptr);
    if (sieve_error == nullptr) throw nb::python_error();
    m.attr("SieveError") = nb::handle(sieve_error);
    for (ErrorClass& c : error_classes()) {
        const std::string qualified = std::string("sieve.") + c.name;
        nb::object bases = nb::make_tuple(nb::handle(sieve_error), nb::handle(c.builtin));
        c.type = PyErr_NewExceptionWithDoc(qualified.c_str(), c.doc, bases.ptr(), nullptr);
        if (c.type == nullptr) throw nb::python_error();
        m.attr(c.name) = nb::handle(c.type);
    }
    nb::register_exception_translator([](const std::exception_ptr& p, void*) {
        try {
            std::rethrow_exception(p);
        } catch (const StatusError& e) {
            PyObject* type = sieve_error;
            for (const ErrorClass& c : error_classes())
                if (c.code == e.code()) type = c.type;
            PyErr_SetString(type, e.what());
        }
    });
}

}  // namespace sieve::python
