// measure_gpu_ceilings in a build without CUDA (gpu_ceilings.h).
#include "gpu_ceilings.h"

namespace sieve::bench {

Expected<std::vector<Ceiling>> measure_gpu_ceilings(int device, bool) {
    return unsupported_error("GPU ceilings of cuda:{}: this build has no CUDA (SIEVE_WITH_CUDA)", device);
}

}  // namespace sieve::bench
