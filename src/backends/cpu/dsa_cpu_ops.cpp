#include "backends/cpu/dsa_cpu_ops.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstring>
#include <limits>

#include "backends/cpu/parallel.h"
#include "core/assert.h"
#include "sieve/ops/op_common.h"

namespace sieve::cpu {

namespace {

inline float load_elem(const void* base, DType t, int64_t i) {
    return t == DType::bf16 ? bf16_to_f32(static_cast<const uint16_t*>(base)[i]) : static_cast<const float*>(base)[i];
}

// Slots of a parallel loop's chunks: each chunk (≤ one per thread) claims one workspace slot.
struct WorkspaceSlots {
    char* base;
    size_t slot_bytes;
    int64_t n_slots;
    std::atomic<int64_t> next{0};
    float* claim() {
        const int64_t s = next.fetch_add(1);
        SIEVE_ASSERT(s < n_slots, "dsa cpu op: more chunks than workspace slots");
        return reinterpret_cast<float*>(base + static_cast<size_t>(s) * slot_bytes);
    }
};

}  // namespace

const DsaCpuKernels& dsa_kernels_for(Isa isa) {
    switch (isa) {
        case Isa::scalar: return kDsaCpuKernelsScalar;
        case Isa::avx2: return kDsaCpuKernelsAvx2;
        case Isa::avx512: return kDsaCpuKernelsAvx512;
        case Isa::avx512_bf16: return kDsaCpuKernelsAvx512Bf16;
        case Isa::amx_bf16: return kDsaCpuKernelsAmxBf16;
    }
    return kDsaCpuKernelsScalar;
}

Status dsa_output_gate(const DsaCpuContext& c, const DsaOutputGateParams& p) {
    SIEVE_RETURN_IF_ERROR(validate_and_check_indices(p));
    const bool elementwise = p.mode == DsaGateMode::elementwise;
    parallel_chunks(*c.pool, p.n_tokens, min_chunk_for(8 * p.n_heads * p.head_dim), [&](int64_t b, int64_t e) {
        for (int64_t t = b; t < e; ++t)
            for (int64_t h = 0; h < p.n_heads; ++h)
                for (int64_t i = 0; i < p.head_dim; ++i) {
                    const float g = load_elem(p.gate, p.gate_type, t * p.gate_row_stride + (elementwise ? h * p.head_dim + i : h));
                    const float x = load_elem(p.x, p.x_type, t * p.x_token_stride + h * p.x_head_stride + i);
                    const float y = x * (1.0f / (1.0f + std::exp(-g)));
                    const int64_t o = t * p.y_token_stride + h * p.y_head_stride + i;
                    if (p.y_type == DType::bf16)
                        static_cast<uint16_t*>(p.y)[o] = f32_to_bf16(y);
                    else
                        static_cast<float*>(p.y)[o] = y;
                }
    });
    return Status::ok();
}

namespace {
int64_t head_proj_units(const MlaHeadProjParams& p) {
    return p.n_heads * ((p.n_tokens + kHeadProjTokens - 1) / kHeadProjTokens);
}
size_t head_proj_slot_bytes(const MlaHeadProjParams& p) {
    return workspace_round_up(static_cast<size_t>(SIEVE_HEAD_PROJ_SCRATCH_FLOATS(p.in_features)) * 4);
}
}  // namespace

size_t dsa_mla_head_proj_workspace_size(const DsaCpuContext& c, const MlaHeadProjParams& p) {
    if (p.n_tokens <= 0 || p.n_heads <= 0 || p.in_features <= 0) return 0;
    return static_cast<size_t>(std::min<int64_t>(c.pool->size(), head_proj_units(p))) * head_proj_slot_bytes(p);
}

Status dsa_mla_head_proj(const DsaCpuContext& c, const MlaHeadProjParams& p, Workspace ws) {
    SIEVE_RETURN_IF_ERROR(validate_and_check_indices(p));
    SIEVE_RETURN_IF_ERROR(check_workspace("cpu mla_head_proj", ws, dsa_mla_head_proj_workspace_size(c, p)));
    if (p.n_tokens == 0) return Status::ok();
    const int64_t blocks = (p.n_tokens + kHeadProjTokens - 1) / kHeadProjTokens;
    const int64_t units = head_proj_units(p);
    WorkspaceSlots slots{static_cast<char*>(ws.data), head_proj_slot_bytes(p), std::min<int64_t>(c.pool->size(), units)};
    const DsaCpuKernels& k = *c.kernels;
    // Units: (head, token block), heads outermost so that a chunk keeps one head's weights hot.
    parallel_chunks(*c.pool, units, 1, [&](int64_t b, int64_t e) {
        float* scratch = slots.claim();
        for (int64_t u = b; u < e; ++u) {
            const int64_t h = u / blocks, t0 = (u % blocks) * kHeadProjTokens;
            k.head_proj_tokens(p, h, t0, std::min(p.n_tokens, t0 + kHeadProjTokens), scratch);
        }
    });
    return Status::ok();
}

}  // namespace sieve::cpu
