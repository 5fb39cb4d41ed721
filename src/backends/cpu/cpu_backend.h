// The cpu backend: per-ISA kernels (kernels_<isa>.cpp) chosen at creation, threads from
// core/thread_pool.h, and oneDNN for large linear batches when built with SIEVE_WITH_DNNL.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "sieve/backends/backend.h"
#include "core/cpu_features.h"
#include "core/thread_pool.h"

namespace sieve {

// Which GEMM runs linear().
enum class CpuGemm : uint8_t {
    // FP8 weights: own kernels below dnnl_min_tokens tokens (decode reads the FP8 bytes, 1 B/weight),
    // oneDNN's bf16/f32 pack from there; f32/bf16 weights: own kernels only, which measured on par with
    // oneDNN at every batch size (dev/bench_ops.cpp), so no second pack is kept.
    automatic,
    dnnl,       // oneDNN for every batch and weight type
    own,        // own kernels only
};

struct CpuBackendOptions {
    Isa isa = Isa::scalar;           // ≤ active_isa()
    CpuGemm gemm = CpuGemm::own;
    int64_t dnnl_min_tokens = 32;    // automatic, FP8 weights: own kernels won up to 16 rows, tied oneDNN at 32 (dev/bench_ops.cpp, 2-core Zen 4)
    ThreadPool* pool = nullptr;      // nullptr: ThreadPool::global()
};

// The options make_backend("cpu") uses: active_isa(), automatic when oneDNN is built, else own.
CpuBackendOptions cpu_backend_default_options();
bool cpu_backend_has_dnnl();
// Caps the threads the cpu backends use from now on, the global ThreadPool's and oneDNN's (1 ≤ n ≤ the
// pool's size; 0 = all): for measuring thread scaling in one process (`sieve bench`). A CPU knob, so
// not part of the device-generic Backend interface.
void cpu_set_compute_threads(int n);
// unsupported when isa > active_isa(), or oneDNN is asked for without being built, or oneDNN is asked
// for at an ISA other than active_isa() (oneDNN's ISA is process-wide).
Expected<std::unique_ptr<Backend>> make_cpu_backend(const CpuBackendOptions& options);

// "cpu" | "cpu:<isa>" | "cpu:<isa>:<gemm>" | "cpu:<gemm>", where <isa> is scalar, avx2, avx512, avx512_bf16
// or amx_bf16 (at most active_isa(); default active_isa()) and <gemm> is
//   auto    own kernels for small batches, oneDNN above a size threshold (default when oneDNN is built)
//   dnnl    oneDNN for every linear (only at the ISA oneDNN itself uses: active_isa())
//   nodnnl  own kernels only (default when oneDNN is not built)
// An explicit ISA below active_isa() without a <gemm> means nodnnl.
inline constexpr std::string_view kCpuBackendSpecs =
    "cpu, cpu:<isa>, cpu:<isa>:<gemm> or cpu:<gemm> with <isa> in scalar|avx2|avx512|avx512_bf16|amx_bf16 and <gemm> in "
    "auto|dnnl|nodnnl";
Expected<std::unique_ptr<Backend>> make_cpu_backend_from_spec(std::string_view spec);
// The options such a spec stands for (pool: the global one), e.g. for a caller that sets its own pool.
Expected<CpuBackendOptions> cpu_backend_options_from_spec(std::string_view spec);
// Every variant this machine runs: "cpu:<isa>:nodnnl" for each supported ISA, and "cpu:<active>:dnnl",
// "cpu:<active>:auto" when oneDNN is built.
std::vector<std::string> cpu_backend_variants();

}  // namespace sieve
