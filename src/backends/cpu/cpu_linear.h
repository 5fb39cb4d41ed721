// The cpu backend's linear: weight packing (prepare), per-shape plans and the run, over the own
// panel kernels (kernels.h) and oneDNN (dnnl_gemm.h). Internal to backends/cpu.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "sieve/backends/backend.h"
#include "backends/cpu/cpu_backend.h"
#include "backends/cpu/kernels.h"
#include "sieve/core/tensor.h"

namespace sieve::cpu {

struct DnnlPackedWeights;

class CpuPreparedLinear final : public PreparedLinear {
public:
    CpuPreparedLinear(const LinearWeights& w) : PreparedLinear(w.out_features, w.in_features, w.math, w.weight_type) {}
    ~CpuPreparedLinear() override;
    CpuPreparedLinear(const CpuPreparedLinear&) = delete;
    CpuPreparedLinear& operator=(const CpuPreparedLinear&) = delete;
    size_t bytes() const override;
    // Adds bytes() to the process-wide count of live packs (cpu_prepared_linear_bytes); once, when packed.
    void count_live_bytes();
    std::string describe() const override;

    // own kernels (empty panels when this pack was not made)
    bool has_own = false;
    PanelFormat format = PanelFormat::f32;
    Tensor panels;                // [n_panels · panel_bytes] bytes
    int64_t panel_bytes = 0, n_panels = 0;
    std::vector<float> fp8_scale;  // [ceil(N/128), ceil(K/128)] block_scale
    std::vector<float> bias;      // [N] or empty
    std::string own_note;         // why this panel format (numerics choices, fallbacks)
    // oneDNN (null when not made)
    std::shared_ptr<const DnnlPackedWeights> dnnl;
    std::string dnnl_note;        // why the automatic policy has no oneDNN pack, if it has none

private:
    size_t counted_bytes_ = 0;
};

struct CpuLinearContext {
    const CpuKernels* kernels;
    Isa isa;
    const CpuBackendOptions* options;
    ThreadPool* pool;
};

Expected<std::unique_ptr<PreparedLinear>> cpu_linear_prepare(const CpuLinearContext& c, const LinearWeights& w);
// Bytes of every live cpu pack in the process (own panels + oneDNN packs).
size_t cpu_live_pack_bytes();
Expected<LinearPlan> cpu_linear_plan(const CpuLinearContext& c, const CpuPreparedLinear& w, const LinearParams& shape);
Status cpu_linear_run(const CpuLinearContext& c, const CpuPreparedLinear& w, const LinearPlan& plan,
                      const LinearParams& p, Workspace ws);

}  // namespace sieve::cpu
