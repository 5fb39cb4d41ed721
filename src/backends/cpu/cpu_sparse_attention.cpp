// The cpu backend's sparse attention: one dispatcher, one work split and one workspace plan for both kernel
// paths (see cpu_sparse_attention.h).
#include "backends/cpu/cpu_sparse_attention.h"

#include <algorithm>
#include <atomic>

#include "backends/cpu/cpu_dsv4_ops.h"
#include "backends/cpu/parallel.h"
#include "core/assert.h"
#include "sieve/ops/op_common.h"

namespace sieve::cpu {

namespace {

enum class AttnPath { none, mqa, mla };

bool is_format(const SparseKvList& l, CacheRecordFormat a, CacheRecordFormat b) {
    return l.width == 0 || l.format == a || l.format == b;
}

// The kernel that serves the layout (cpu_sparse_attention.h); none when no kernel does.
AttnPath attn_path(const SparseAttentionParams& p) {
    using F = CacheRecordFormat;
    if (p.v_dim == p.qk_dim && is_format(p.main, F::f32, F::fp8_model1) && is_format(p.extra, F::f32, F::fp8_model1))
        return AttnPath::mqa;
    if (p.extra.width == 0 && is_format(p.main, F::f32, F::fp8_v32)) return AttnPath::mla;
    return AttnPath::none;
}

// Work items are (token, head chunk): a kernel call dequantizes (and transposes) the token's entries once for
// the heads of its chunk, so splitting a token's heads repeats that work (dequantization, transposition,
// softmax: ~15 % of a 32-head item in a perf profile of dev/bench_attention's decode at d = 512, i.e. about
// kSetupHeads heads' worth). The split is the one with the shortest estimated makespan over the pool's
// threads: a decode step of one token still splits its heads over the threads, a prefill chunk keeps every
// token whole. Threads claim items dynamically (items are equal, but the machine may be shared). Per head,
// the kernels compute the same sums however the heads are split.
constexpr int64_t kSetupHeads = 4;
// Split-K (MQA path): with fewer tokens than threads, a token's listed rows are also split, into row ranges
// of at least this many rows, each computed for all the heads of its item and merged afterwards
// (merge_mqa_partials): heads split over threads each gather and decode every row again, row splits do not.
constexpr int64_t kMqaSplitRows = 128;
constexpr int64_t kMqaMaxSplits = 64;  // the merge's list of partial states lives on the stack (ops allocate nothing)

struct AttnPlan {
    AttnPath path = AttnPath::none;
    int64_t heads_per_item = 1, head_chunks = 1, items = 0, slots = 0, slot_bytes = 0;
    // Split-K: row_splits ranges of rows_per_split rows a token (1: none); each item's partial state (MQA
    // path) at partials + item · partial_bytes, after the slots.
    int64_t row_splits = 1, rows_per_split = 0, partials = 0, partial_bytes = 0;
    // MQA path: the byte offsets of SparseMqaKernelArgs's workspace parts inside a slot (the tile path's when
    // the table has tiles).
    int64_t q = 0, kc = 0, kt = 0, lg = 0, acc = 0, mx = 0, den = 0;
    bool tiles = false;
    int64_t qt = 0, kb = 0, kv = 0, lt = 0, pt = 0, pb = 0;
};

AttnPlan attn_plan(const SparseAttentionKernels& k, const ThreadPool& pool, const SparseAttentionParams& p) {
    AttnPlan m;
    m.path = attn_path(p);
    const int64_t threads = std::max<int64_t>(pool.size(), 1);
    const int64_t heads = std::max<int64_t>(p.n_heads, 1);
    const int64_t rows = std::max<int64_t>(p.main.width, 0) + std::max<int64_t>(p.extra.width, 0);
    if (m.path == AttnPath::mqa && p.n_tokens > 0 && p.n_tokens < threads) {
        m.row_splits = std::clamp<int64_t>((threads + p.n_tokens - 1) / p.n_tokens, 1,
                                           std::clamp<int64_t>(rows / kMqaSplitRows, 1, kMqaMaxSplits));
        m.rows_per_split = (rows + m.row_splits - 1) / m.row_splits;
        m.row_splits = m.rows_per_split > 0 ? (rows + m.rows_per_split - 1) / m.rows_per_split : 1;
    }
    // The head split below sees each row split as a token of its own.
    const int64_t tokens = std::max<int64_t>(p.n_tokens, 0) * m.row_splits;
    // Makespan of k chunks per token, in heads' worth of work: rounds of items × (heads of an item + setup);
    // chunks hold whole register blocks of kSparseMqaHeadBlock heads where the heads allow, whole groups of 16
    // (the tiles' rows) for an MQA table with tiles.
    const int64_t unit = (m.path == AttnPath::mqa && k.mqa->tiles) || (m.path == AttnPath::mla && k.mla->tiles) ? 16 : kSparseMqaHeadBlock;
    const int64_t block = heads >= 2 * unit ? unit : 1;
    int64_t best = -1;
    for (int64_t k = 1; k <= std::min<int64_t>(threads, heads); ++k) {
        const int64_t hpi = (heads + k - 1) / k;
        const int64_t per = (hpi + block - 1) / block * block;
        const int64_t chunks = (heads + per - 1) / per;
        const int64_t rounds = (tokens * chunks + threads - 1) / threads;
        const int64_t cost = rounds * (per + kSetupHeads);
        if (best < 0 || cost < best) {
            best = cost;
            m.heads_per_item = std::min(per, heads);
            m.head_chunks = chunks;
        }
    }
    const int64_t nh = m.heads_per_item, dqk = std::max<int64_t>(p.qk_dim, 0), dv = std::max<int64_t>(p.v_dim, 0);
    if (m.path == AttnPath::mla) {
        m.slot_bytes = workspace_round_up(
            (SIEVE_SPARSE_MLA_SCRATCH_FLOATS(nh, dv, dqk - dv) + (k.mla->tiles ? SIEVE_SPARSE_MLA_TILE_SCRATCH_FLOATS(nh, dv, dqk - dv) : 0)) * 4);
    } else {
        const int64_t d = dqk, C = kSparseMqaChunk, nh16 = (nh + 15) / 16 * 16;
        m.q = 0;
        m.kc = m.q + workspace_round_up(nh * d * 4);
        m.kt = m.kc + workspace_round_up(C * d * 4);
        m.lg = m.kt + workspace_round_up(C * d * 4);
        m.acc = m.lg + workspace_round_up(nh * C * 4);
        m.mx = m.acc + workspace_round_up(nh16 * d * 4);
        m.den = m.mx + workspace_round_up(nh16 * 4);
        m.slot_bytes = m.den + workspace_round_up(nh16 * 4);
        if (k.mqa->tiles) {
            const int64_t CT = kSparseMqaTileChunk;
            m.tiles = true;
            m.qt = m.slot_bytes;
            m.kb = m.qt + workspace_round_up(nh16 * d * 2);
            m.kv = m.kb + workspace_round_up(CT * d * 2);
            m.lt = m.kv + workspace_round_up(CT * d * 2);
            m.pt = m.lt + workspace_round_up(CT * 16 * 4);
            m.pb = m.pt + workspace_round_up(16 * CT * 4);
            m.slot_bytes = m.pb + workspace_round_up(16 * CT * 2);
        }
    }
    m.items = tokens * m.head_chunks;
    m.slots = std::min<int64_t>(threads, m.items);
    if (m.row_splits > 1) {
        m.partials = m.slots * m.slot_bytes;
        m.partial_bytes = workspace_round_up(SIEVE_MQA_PARTIAL_FLOATS(nh, dqk) * 4);
    }
    return m;
}

SparseMqaKernelArgs mqa_args(const SparseAttentionParams& p, const AttnPlan& m) {
    SparseMqaKernelArgs a;
    a.q = p.q;
    a.q_bf16 = p.q_type == DType::bf16;
    a.p_bf16 = p.math == AttentionMath::bf16;
    a.q_token_stride = p.q_token_stride;
    a.q_head_stride = p.q_head_stride;
    if (p.main.width > 0) a.main = record_cache(p.main.cache, p.layout(p.main));
    if (p.extra.width > 0) a.extra = record_cache(p.extra.cache, p.layout(p.extra));
    a.main_slots = p.main.slots;
    a.n_main = p.main.width;
    a.main_stride = p.main.slots_stride;
    a.extra_slots = p.extra.slots;
    a.n_extra = p.extra.width;
    a.extra_stride = p.extra.slots_stride;
    a.sink = p.sink;
    a.scale = p.scale;
    a.out = p.out;
    a.out_bf16 = p.out_type == DType::bf16;
    a.out_token_stride = p.out_token_stride;
    a.out_head_stride = p.out_head_stride;
    a.n_heads = p.n_heads;
    a.head_dim = p.qk_dim;
    a.ws_q = m.q;
    a.ws_kc = m.kc;
    a.ws_kt = m.kt;
    a.ws_lg = m.lg;
    a.ws_acc = m.acc;
    a.ws_mx = m.mx;
    a.ws_den = m.den;
    a.tile_workspace = m.tiles;
    a.ws_qt = m.qt;
    a.ws_kb = m.kb;
    a.ws_kv = m.kv;
    a.ws_lt = m.lt;
    a.ws_pt = m.pt;
    a.ws_pb = m.pb;
    return a;
}

}  // namespace

size_t sparse_attention_workspace_size(const SparseAttentionKernels& k, const ThreadPool& pool,
                                       const SparseAttentionParams& p) {
    if (p.n_tokens <= 0 || p.n_heads <= 0 || p.qk_dim <= 0) return 0;
    const AttnPlan m = attn_plan(k, pool, p);
    if (m.path == AttnPath::none) return 0;
    return static_cast<size_t>(m.slots * m.slot_bytes + (m.row_splits > 1 ? m.items * m.partial_bytes : 0));
}

Status sparse_attention(const SparseAttentionKernels& k, ThreadPool& pool, const SparseAttentionParams& p,
                        Workspace ws) {
    SIEVE_RETURN_IF_ERROR(validate_and_check_indices(p));
    const AttnPlan m = attn_plan(k, pool, p);
    if (m.path == AttnPath::none)
        return unsupported_error(
            "cpu sparse_attention: qk_dim = {}, v_dim = {}, main.format = {}, extra.width = {}, extra.format = {}: no "
            "kernel (v_dim = qk_dim over f32 | fp8_model1 lists, or one f32 | fp8_v32 list)",
            p.qk_dim, p.v_dim, cache_record_format_name(p.main.format), p.extra.width,
            cache_record_format_name(p.extra.format));
    SIEVE_RETURN_IF_ERROR(check_workspace("cpu sparse_attention", ws, sparse_attention_workspace_size(k, pool, p)));
    if (p.n_tokens == 0) return Status::ok();
    const SparseMqaKernelArgs a = m.path == AttnPath::mqa ? mqa_args(p, m) : SparseMqaKernelArgs{};
    std::atomic<int64_t> next_slot{0}, next_item{0};
    parallel_chunks(pool, m.slots, 1, [&](int64_t, int64_t) {
        const int64_t slot = next_slot.fetch_add(1);
        SIEVE_ASSERT(slot < m.slots, "sparse_attention: more chunks than workspace slots");
        void* w = static_cast<char*>(ws.data) + slot * m.slot_bytes;
        for (int64_t item = next_item.fetch_add(1); item < m.items; item = next_item.fetch_add(1)) {
            // item = (token · row_splits + split) · head_chunks + head chunk
            const int64_t ts = item / m.head_chunks, h0 = (item % m.head_chunks) * m.heads_per_item;
            const int64_t t = ts / m.row_splits, split = ts % m.row_splits;
            const int64_t h1 = std::min(p.n_heads, h0 + m.heads_per_item);
            if (h0 >= h1) continue;
            if (m.path == AttnPath::mqa) {
                MqaShare share{t, h0, h1, 0, a.n_main + a.n_extra, nullptr};
                if (m.row_splits > 1) {
                    share.row_begin = split * m.rows_per_split;
                    share.row_end = std::min(share.row_end, share.row_begin + m.rows_per_split);
                    share.partial = reinterpret_cast<float*>(static_cast<char*>(ws.data) + m.partials + item * m.partial_bytes);
                }
                k.mqa->sparse_mqa_block(a, share, w);
            } else {
                k.mla->sparse_mla_heads(p, t, h0, h1, static_cast<float*>(w));
            }
        }
    });
    if (m.row_splits == 1) return Status::ok();
    // Split-K: each (token, head chunk) merges its splits' partial states into the output.
    parallel_chunks(pool, p.n_tokens * m.head_chunks, 1, [&](int64_t b, int64_t e) {
        float* partials[kMqaMaxSplits];
        for (int64_t i = b; i < e; ++i) {
            const int64_t t = i / m.head_chunks, c = i % m.head_chunks, h0 = c * m.heads_per_item;
            const int64_t h1 = std::min(p.n_heads, h0 + m.heads_per_item);
            if (h0 >= h1) continue;
            for (int64_t s = 0; s < m.row_splits; ++s)
                partials[s] = reinterpret_cast<float*>(
                    static_cast<char*>(ws.data) + m.partials + ((t * m.row_splits + s) * m.head_chunks + c) * m.partial_bytes);
            k.mqa->merge_mqa_partials(a, t, h0, h1, partials, m.row_splits);
        }
    });
    return Status::ok();
}

}  // namespace sieve::cpu
