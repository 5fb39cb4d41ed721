#include "backends/cpu/dsa_cpu_ops.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstring>
#include <limits>
#include <optional>

#include "backends/cpu/fused_topk.h"
#include "backends/cpu/key_tile_units.h"
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

// Indexer scores: units are (sequence, key tile) over all the query rows of the sequence, so that each key
// is converted once per step (dsa_kernels.h indexer_scores_tile); tiles shrink for short contexts so that
// a single decode row still gives every thread several units. Shared workspace before the slots: the work
// units (key_tile_units.h; a sequence with rows has ≥ 1 unit, for its −inf fill). Fused selection (p.selected): each slot also
// holds its tile's scores [n_tokens, key_tile] f32 (at tile_scores), fed to the streaming top-k of
// fused_topk.h (shared, at `fused`); no score row is written.
struct IndexerPlan {
    int64_t key_tile = 0, slots = 0;
    KeyTileUnitsPlan units;
    size_t slot_bytes = 0, shared_bytes = 0;
    size_t tile_scores = 0, fused = 0;
    FusedTopkPlan topk;
};
IndexerPlan indexer_plan(const DsaCpuContext& c, const DsaIndexerScoresParams& p) {
    IndexerPlan s;
    const int64_t threads = std::max<int64_t>(c.pool->size(), 1);
    const int64_t seqs = std::min(std::max<int64_t>(p.n_seqs, 0), std::max<int64_t>(p.n_tokens, 0));
    const int64_t cols = std::max<int64_t>(p.n_cols, 0);
    const int64_t want = (seqs * cols + 4 * threads - 1) / (4 * threads);
    s.key_tile = std::clamp<int64_t>((std::max<int64_t>(want, 1) + 63) / 64 * 64, 64, kIndexerKeyChunk);
    s.key_tile = std::min<int64_t>(s.key_tile, std::max<int64_t>((cols + 15) / 16 * 16, 16));
    const int64_t max_units = seqs * std::max<int64_t>(1, (cols + s.key_tile - 1) / s.key_tile);
    s.slots = std::min<int64_t>(threads, max_units);
    s.slot_bytes = workspace_round_up(static_cast<size_t>(SIEVE_INDEXER_SCORES_SCRATCH_FLOATS(p.n_heads, p.head_dim, s.key_tile)) * 4);
    s.units = key_tile_units_plan(p.n_tokens, p.n_seqs);
    s.shared_bytes = workspace_round_up(static_cast<size_t>(s.units.bytes));
    if (p.selected != nullptr && p.k > 0) {
        const int64_t n = std::max<int64_t>(p.n_tokens, 0);
        s.tile_scores = s.slot_bytes;
        s.slot_bytes += workspace_round_up(static_cast<size_t>(n * s.key_tile) * 4);
        s.topk = fused_topk_plan(s.slots, n, p.k, threads);
        s.fused = s.shared_bytes;
        s.shared_bytes += workspace_round_up(static_cast<size_t>(s.topk.bytes));
    }
    return s;
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

size_t dsa_indexer_scores_workspace_size(const DsaCpuContext& c, const DsaIndexerScoresParams& p) {
    if (p.n_tokens <= 0 || p.n_heads <= 0 || p.head_dim <= 0) return 0;
    const IndexerPlan s = indexer_plan(c, p);
    return s.shared_bytes + static_cast<size_t>(s.slots) * s.slot_bytes;
}

Status dsa_indexer_scores(const DsaCpuContext& c, const DsaIndexerScoresParams& p, Workspace ws) {
    SIEVE_RETURN_IF_ERROR(validate_and_check_indices(p));
    SIEVE_RETURN_IF_ERROR(check_workspace("cpu dsa_indexer_scores", ws, dsa_indexer_scores_workspace_size(c, p)));
    if (p.n_tokens == 0) return Status::ok();
    const IndexerPlan s = indexer_plan(c, p);
    const bool fused = p.selected != nullptr;
    char* shared = static_cast<char*>(ws.data);
    const KeyTileUnits work(s.units, shared, p.token_seq, p.n_keys, s.key_tile, true);  // ≥ 1 unit: the −inf fill
    const int64_t units = work.units();
    const int64_t workers = std::min<int64_t>(s.slots, units);
    WorkspaceSlots slots{shared + s.shared_bytes, s.slot_bytes, s.slots};
    std::optional<FusedTopk> topk;
    if (fused) topk.emplace(s.topk, shared + s.fused);
    std::atomic<int64_t> next_unit{0};
    const DsaCpuKernels& k = *c.kernels;
    // The tag: the last 16 floats of SIEVE_INDEXER_SCORES_SCRATCH_FLOATS (no qᵀ in the scratch yet).
    const size_t tag = static_cast<size_t>(SIEVE_INDEXER_SCORES_SCRATCH_FLOATS(p.n_heads, p.head_dim, s.key_tile) - 16) * 4;
    if (units > 0)
        parallel_chunks(*c.pool, workers, 1, [&](int64_t, int64_t) {
            float* scratch = slots.claim();
            const int64_t slot = (reinterpret_cast<char*>(scratch) - slots.base) / static_cast<int64_t>(s.slot_bytes);
            float* tile = fused ? reinterpret_cast<float*>(reinterpret_cast<char*>(scratch) + s.tile_scores) : nullptr;
            const int64_t none = -1;
            std::memcpy(reinterpret_cast<char*>(scratch) + tag, &none, 8);
            int64_t seq = 0;
            for (int64_t u = next_unit.fetch_add(1); u < units; u = next_unit.fetch_add(1)) {
                const KeyTileUnit unit = work.unit(u, seq);
                const int64_t k0 = unit.k0, k1 = unit.k1;
                const int64_t fill_end = unit.last_of_list ? p.n_cols : k1;
                k.indexer_scores_tile(p, unit.list, unit.tokens, unit.n_tokens, k0, k1, fill_end, s.key_tile, scratch,
                                      tile);
                if (!fused) continue;
                for (int64_t i = 0; i < unit.n_tokens; ++i) {
                    const int64_t t = unit.tokens[i];
                    const int64_t end = std::min<int64_t>(k1, p.n_keys[t]);
                    if (p.scores != nullptr) {  // the rows too: scores, then −inf up to the unit's fill end
                        float* row = p.scores + t * p.scores_row_stride;
                        if (end > k0) std::memcpy(row + k0, tile + i * s.key_tile, static_cast<size_t>(end - k0) * 4);
                        for (int64_t col = std::max(k0, end); col < fill_end; ++col) row[col] = -INFINITY;
                    }
                    if (end > k0) c.base->topk_stream_push(topk->stream(slot, t), tile + i * s.key_tile, end - k0, k0);
                }
            }
        });
    if (fused) topk->finish(*c.base, *c.pool, p.selected, p.selected_row_stride);
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
