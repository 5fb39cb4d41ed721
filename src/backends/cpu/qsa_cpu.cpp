#include "backends/cpu/qsa_cpu.h"

#include <algorithm>
#include <atomic>
#include <cstring>

#include "backends/cpu/parallel.h"
#include "backends/cpu/qsa_kernels.h"
#include "core/assert.h"
#include "sieve/ops/op_common.h"

namespace sieve::cpu {

const QsaKernels& qsa_kernels_for(Isa isa) {
    switch (isa) {
        case Isa::scalar: return kQsaKernelsScalar;
        case Isa::avx2: return kQsaKernelsAvx2;
        case Isa::avx512: return kQsaKernelsAvx512;
        case Isa::avx512_bf16: return kQsaKernelsAvx512Bf16;
        case Isa::amx_bf16: return kQsaKernelsAmxBf16;
    }
    return kQsaKernelsScalar;
}

Status qsa_pool_run(const QsaKernels& k, ThreadPool& pool, const QsaPoolParams& p) {
    SIEVE_RETURN_IF_ERROR(validate_and_check_indices(p));
    parallel_chunks(pool, p.n_groups, min_chunk_for(p.ratio * p.head_dim),
                    [&](int64_t b, int64_t e) { k.pool_groups(p, b, e); });
    return Status::ok();
}

Status qsa_expand_run(ThreadPool& pool, const QsaExpandParams& p) {
    SIEVE_RETURN_IF_ERROR(validate_and_check_indices(p));
    const int64_t r = p.ratio;
    parallel_chunks(pool, p.n_tokens, min_chunk_for(p.out_width), [&](int64_t b, int64_t e) {
        for (int64_t t = b; t < e; ++t) {
            const int64_t pos = p.positions[t], len = p.seq_lens[t];
            const int64_t visible = std::min((pos + 1) / r, len / r);
            int32_t* out = p.out + t * p.out_row_stride;
            int64_t c = 0;
            auto put = [&](int64_t v) {  // values outside [0, L) become −1 (§4.6)
                if (v >= 0 && v < len) out[c++] = static_cast<int32_t>(v);
            };
            if (visible <= p.block_topk) {
                for (int64_t v = 0; v < visible * r; ++v) put(v);  // every group: dense (§4.5)
            } else {
                const int32_t* sel = p.sel + t * p.sel_row_stride;
                for (int64_t j = 0; j < p.block_topk; ++j)
                    if (sel[j] >= 0)
                        for (int64_t m = 0; m < r; ++m) put(static_cast<int64_t>(sel[j]) * r + m);
            }
            for (int64_t v = ((pos + 1) / r) * r; v <= pos; ++v) put(v);  // the open tail
            if (p.out_count) p.out_count[t] = static_cast<int32_t>(c);
            for (; c < p.out_width; ++c) out[c] = -1;
        }
    });
    return Status::ok();
}

namespace {

struct GqaSlotLayout {
    size_t rows = 0, q = 0, acc = 0, stats = 0, kt = 0, lg = 0, tiles = 0, total = 0;  // byte offsets in a slot, its size
};
GqaSlotLayout gqa_slot_layout(const QsaKernels& k, const QsaSparseGqaParams& p) {
    const size_t n = static_cast<size_t>(p.n_indices);
    const size_t group = static_cast<size_t>(p.n_heads / p.n_kv_heads), d = static_cast<size_t>(p.head_dim);
    GqaSlotLayout l;
    l.rows = 0;
    l.q = workspace_round_up(n * sizeof(int64_t));
    l.acc = l.q + workspace_round_up(group * d * sizeof(float));
    l.stats = l.acc + workspace_round_up(group * d * sizeof(float));
    l.kt = l.stats + workspace_round_up(2 * group * sizeof(float));
    l.lg = l.kt + workspace_round_up(d * kQsaGqaChunk * sizeof(float));
    l.tiles = l.lg + workspace_round_up(group * kQsaGqaChunk * sizeof(float));
    l.total = l.tiles + (k.tiles ? workspace_round_up(SIEVE_QSA_GQA_TILE_SCRATCH_FLOATS(d) * sizeof(float)) : 0);
    return l;
}

}  // namespace

size_t qsa_sparse_gqa_workspace_size(const QsaKernels& k, const ThreadPool& pool, const QsaSparseGqaParams& p) {
    if (p.n_tokens <= 0 || p.n_kv_heads <= 0 || p.n_heads % p.n_kv_heads != 0 || p.head_dim <= 0 || p.n_indices < 0)
        return 0;
    const int64_t items = p.n_tokens * p.n_kv_heads;
    return static_cast<size_t>(std::min<int64_t>(pool.size(), items)) * gqa_slot_layout(k, p).total;
}

Status qsa_sparse_gqa_run(const QsaKernels& k, ThreadPool& pool, const QsaSparseGqaParams& p, Workspace ws) {
    SIEVE_RETURN_IF_ERROR(validate_and_check_indices(p));
    SIEVE_RETURN_IF_ERROR(check_workspace("cpu qsa_sparse_gqa", ws, qsa_sparse_gqa_workspace_size(k, pool, p)));
    if (p.n_tokens == 0) return Status::ok();
    const GqaSlotLayout layout = gqa_slot_layout(k, p);
    const int64_t items = p.n_tokens * p.n_kv_heads;
    const int64_t n_slots = std::min<int64_t>(pool.size(), items);
    const int64_t item_cost = std::max<int64_t>(1, (p.n_heads / p.n_kv_heads) * p.n_indices * p.head_dim);
    std::atomic<int64_t> next_slot{0};  // each chunk claims one workspace slot (≤ one chunk per thread)
    parallel_chunks(pool, items, min_chunk_for(item_cost), [&](int64_t b, int64_t e) {
        const int64_t slot = next_slot.fetch_add(1);
        SIEVE_ASSERT(slot < n_slots, "qsa_sparse_gqa: more chunks than workspace slots");
        char* base = static_cast<char*>(ws.data) + static_cast<size_t>(slot) * layout.total;
        QsaGqaScratch s;
        s.rows = reinterpret_cast<int64_t*>(base + layout.rows);
        s.q = reinterpret_cast<float*>(base + layout.q);
        s.acc = reinterpret_cast<float*>(base + layout.acc);
        s.stats = reinterpret_cast<float*>(base + layout.stats);
        s.kt = reinterpret_cast<float*>(base + layout.kt);
        s.lg = reinterpret_cast<float*>(base + layout.lg);
        s.tiles = k.tiles ? reinterpret_cast<float*>(base + layout.tiles) : nullptr;
        k.sparse_gqa_items(p, b, e, s);
    });
    return Status::ok();
}

}  // namespace sieve::cpu
