// The backend registry: the one place that lists every kind of backend. A new device adds its
// folder under backends/ and one line here.
#include "backends/backend.h"

#include "backends/cpu/cpu_backend.h"
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
    };
    return kinds;
}

Expected<std::unique_ptr<Backend>> make_backend(std::string_view spec) {
    const std::string_view kind = spec.substr(0, spec.find(':'));
    std::string known;
    for (const BackendKind& k : backend_kinds()) {
        if (k.name == kind) return k.make(spec);
        known += fmt::format("{}{}", known.empty() ? "" : "; ", k.specs);
    }
    return invalid_argument_error("unknown backend '{}' (expected {})", spec, known);
}

void set_compute_threads(int n) { cpu_set_compute_threads(n); }

}  // namespace sieve
