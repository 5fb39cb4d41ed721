// The cpu backend's spec strings ("cpu", "cpu:<isa>", "cpu:<isa>:<gemm>", "cpu:<gemm>") and the
// variants this machine can run, for the backend registry (backends/backend.cpp).
#include <vector>

#include "backends/cpu/cpu_backend.h"

namespace sieve {

Expected<CpuBackendOptions> cpu_backend_options_from_spec(std::string_view spec) {
    std::vector<std::string_view> parts;
    for (size_t start = 0;;) {
        const size_t colon = spec.find(':', start);
        parts.push_back(spec.substr(start, colon == std::string_view::npos ? std::string_view::npos : colon - start));
        if (colon == std::string_view::npos) break;
        start = colon + 1;
    }
    if (parts.empty() || parts[0] != "cpu" || parts.size() > 3)
        return invalid_argument_error("unknown backend '{}' ({})", spec, kCpuBackendSpecs);
    CpuBackendOptions options = cpu_backend_default_options();
    bool isa_set = false, gemm_set = false;
    for (size_t i = 1; i < parts.size(); ++i) {
        const std::string_view part = parts[i];
        if (auto isa = isa_from_name(part); isa && !isa_set && !gemm_set) {
            options.isa = *isa;
            isa_set = true;
        } else if ((part == "auto" || part == "dnnl" || part == "nodnnl") && !gemm_set) {
            options.gemm = part == "auto" ? CpuGemm::automatic : part == "dnnl" ? CpuGemm::dnnl : CpuGemm::own;
            gemm_set = true;
        } else {
            return invalid_argument_error("backend '{}': unexpected '{}' ({})", spec, part, kCpuBackendSpecs);
        }
    }
    // Without oneDNN the default GEMM is nodnnl; an explicit ISA below active_isa() with the
    // automatic default cannot use oneDNN either, so it means nodnnl.
    if (!gemm_set && options.isa != active_isa()) options.gemm = CpuGemm::own;
    return options;
}

Expected<std::unique_ptr<Backend>> make_cpu_backend_from_spec(std::string_view spec) {
    SIEVE_ASSIGN_OR_RETURN(const CpuBackendOptions options, cpu_backend_options_from_spec(spec));
    return make_cpu_backend(options);
}

std::vector<std::string> cpu_backend_variants() {
    std::vector<std::string> out;
    for (Isa isa : supported_isas()) out.push_back(fmt::format("cpu:{}:nodnnl", isa_name(isa)));
    if (cpu_backend_has_dnnl()) {
        out.push_back(fmt::format("cpu:{}:dnnl", isa_name(active_isa())));
        out.push_back(fmt::format("cpu:{}:auto", isa_name(active_isa())));
    }
    return out;
}

}  // namespace sieve
