// The backend registry: the one place that lists every kind of backend. A new device adds its
// folder under backends/ and one line here.
#include "sieve/backends/backend.h"

#include "backends/cpu/cpu_backend.h"
#include "backends/cuda/cuda_backend.h"
#include "backends/host_copy/host_copy_backend.h"
#include "backends/ref/ref_backend.h"

namespace sieve {

namespace {

Expected<std::unique_ptr<Backend>> make_ref_backend_from_spec(std::string_view spec) {
    if (spec != "ref") return invalid_argument_error("unknown backend '{}' (the reference backend is 'ref')", spec);
    return make_ref_backend();
}

std::vector<std::string> ref_backend_variants() { return {"ref"}; }

}  // namespace

std::span<const BackendKind> backend_kinds() {
    static const BackendKind kinds[] = {
        {"ref", "ref", make_ref_backend_from_spec, ref_backend_variants},
        {"cpu", kCpuBackendSpecs, make_cpu_backend_from_spec, cpu_backend_variants},
        {"host-copy", kHostCopyBackendSpecs, make_host_copy_backend_from_spec, host_copy_backend_variants},
        {"cuda", kCudaBackendSpecs, make_cuda_backend_from_spec, cuda_backend_variants},
    };
    return kinds;
}

std::string backend_specs_help() {
    std::string out;
    for (const BackendKind& k : backend_kinds()) out += fmt::format("{}{}", out.empty() ? "" : "; ", k.specs);
    return out;
}

Expected<std::unique_ptr<Backend>> make_backend(std::string_view spec) {
    // The kind is the first part; host-copy's own name has no colon, so "host-copy:cpu" finds it.
    const std::string_view kind = spec.substr(0, spec.find(':'));
    for (const BackendKind& k : backend_kinds())
        if (k.name == kind) return k.make(spec);
    return invalid_argument_error("unknown backend '{}' (expected {})", spec, backend_specs_help());
}

}  // namespace sieve
