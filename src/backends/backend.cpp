// make_backend(): the one place that knows every backend's name.
#include "backends/backend.h"

#include <vector>

#include "backends/cpu/cpu_backend.h"
#include "backends/ref/ref_backend.h"

namespace sieve {

Expected<std::unique_ptr<Backend>> make_backend(std::string_view spec) {
    constexpr std::string_view usage = "expected ref, cpu, cpu:<isa>, cpu:<isa>:<gemm> or cpu:<gemm> with <isa> in "
                                       "scalar|avx2|avx512|avx512_bf16 and <gemm> in auto|dnnl|nodnnl";
    if (spec == "ref") return make_ref_backend();
    std::vector<std::string_view> parts;
    for (size_t start = 0;;) {
        const size_t colon = spec.find(':', start);
        parts.push_back(spec.substr(start, colon == std::string_view::npos ? std::string_view::npos : colon - start));
        if (colon == std::string_view::npos) break;
        start = colon + 1;
    }
    if (parts.empty() || parts[0] != "cpu" || parts.size() > 3)
        return invalid_argument_error("unknown backend '{}' ({})", spec, usage);
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
            return invalid_argument_error("backend '{}': unexpected '{}' ({})", spec, part, usage);
        }
    }
    // Without oneDNN the default GEMM is nodnnl; an explicit ISA below active_isa() with the
    // automatic default cannot use oneDNN either, so it means nodnnl.
    if (!gemm_set && options.isa != active_isa()) options.gemm = CpuGemm::own;
    return make_cpu_backend(options);
}

void set_compute_threads(int n) { cpu_set_compute_threads(n); }

}  // namespace sieve
