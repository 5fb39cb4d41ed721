#include "backends/cpu/dsa_cpu_ops.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstring>
#include <limits>

#include "backends/cpu/parallel.h"
#include "core/assert.h"
#include "ops/op_common.h"

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

// Sparse MLA work units: tokens × head groups; heads are split when there are fewer tokens than threads.
struct MlaSplit {
    int64_t heads_per_unit = 1, head_groups = 1, units = 0;
};
MlaSplit mla_split(const DsaCpuContext& c, const SparseMlaAttentionParams& p) {
    MlaSplit s;
    const int64_t threads = c.pool->size();
    int64_t groups = p.n_tokens >= threads || p.n_tokens == 0 ? 1 : (threads + p.n_tokens - 1) / p.n_tokens;
    groups = std::clamp<int64_t>(groups, 1, std::max<int64_t>(p.n_heads, 1));
    s.heads_per_unit = (p.n_heads + groups - 1) / groups;
    s.head_groups = s.heads_per_unit > 0 ? (p.n_heads + s.heads_per_unit - 1) / s.heads_per_unit : 1;
    s.units = p.n_tokens * s.head_groups;
    return s;
}
size_t mla_slot_bytes(const SparseMlaAttentionParams& p, const MlaSplit& s) {
    return workspace_round_up(static_cast<size_t>(SIEVE_SPARSE_MLA_SCRATCH_FLOATS(s.heads_per_unit, p.kv_lora_rank, p.rope_dim)) * 4);
}

}  // namespace

const DsaCpuKernels& dsa_kernels_for(Isa isa) {
    switch (isa) {
        case Isa::scalar: return kDsaCpuKernelsScalar;
        case Isa::avx2: return kDsaCpuKernelsAvx2;
        case Isa::avx512: return kDsaCpuKernelsAvx512;
        case Isa::avx512_bf16: return kDsaCpuKernelsAvx512Bf16;
    }
    return kDsaCpuKernelsScalar;
}

size_t dsa_sparse_mla_attention_workspace_size(const DsaCpuContext& c, const SparseMlaAttentionParams& p) {
    if (p.n_tokens <= 0 || p.n_heads <= 0 || p.kv_lora_rank <= 0) return 0;
    const MlaSplit s = mla_split(c, p);
    return static_cast<size_t>(std::min<int64_t>(c.pool->size(), s.units)) * mla_slot_bytes(p, s);
}

Status dsa_sparse_mla_attention(const DsaCpuContext& c, const SparseMlaAttentionParams& p, Workspace ws) {
    SIEVE_RETURN_IF_ERROR(validate_and_check_indices(p));
    SIEVE_RETURN_IF_ERROR(check_workspace("cpu sparse_mla_attention", ws, dsa_sparse_mla_attention_workspace_size(c, p)));
    if (p.n_tokens == 0) return Status::ok();
    const MlaSplit s = mla_split(c, p);
    WorkspaceSlots slots{static_cast<char*>(ws.data), mla_slot_bytes(p, s), std::min<int64_t>(c.pool->size(), s.units)};
    const DsaCpuKernels& k = *c.kernels;
    parallel_chunks(*c.pool, s.units, 1, [&](int64_t b, int64_t e) {
        float* scratch = slots.claim();
        for (int64_t u = b; u < e; ++u) {
            const int64_t t = u / s.head_groups, g = u % s.head_groups;
            const int64_t h0 = g * s.heads_per_unit, h1 = std::min(p.n_heads, h0 + s.heads_per_unit);
            k.sparse_mla_heads(p, t, h0, h1, scratch);
        }
    });
    return Status::ok();
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
