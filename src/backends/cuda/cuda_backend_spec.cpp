// Parsing "cuda" / "cuda:<N>" (cuda_backend.h); the backend itself exists only in a CUDA build.
#include <charconv>

#include "backends/cuda/cuda_backend.h"

namespace sieve {

#ifdef SIEVE_HAS_CUDA
Expected<std::unique_ptr<Backend>> make_cuda_backend(int device);  // cuda_backend.cpp
std::vector<std::string> cuda_device_variants();                    // cuda_backend.cpp
#endif

Expected<std::unique_ptr<Backend>> make_cuda_backend_from_spec(std::string_view spec) {
    constexpr std::string_view prefix = "cuda";
    int device = 0;
    if (spec != prefix) {
        const std::string_view index = spec.starts_with("cuda:") ? spec.substr(prefix.size() + 1) : std::string_view{};
        const auto [end, ec] = std::from_chars(index.data(), index.data() + index.size(), device);
        if (index.empty() || ec != std::errc{} || end != index.data() + index.size() || device < 0)
            return invalid_argument_error("unknown backend '{}' (expected {})", spec, kCudaBackendSpecs);
    }
#ifdef SIEVE_HAS_CUDA
    return make_cuda_backend(device);
#else
    return unsupported_error("backend '{}': this build of sieve has no CUDA backend (configure with a CUDA compiler "
                             "and SIEVE_WITH_CUDA=ON or AUTO)", spec);
#endif
}

std::vector<std::string> cuda_backend_variants() {
#ifdef SIEVE_HAS_CUDA
    return cuda_device_variants();
#else
    return {};
#endif
}

}  // namespace sieve
