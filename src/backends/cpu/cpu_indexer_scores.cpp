// Indexer scores on the cpu (ops/indexer_scores.h).
//
// Work units are (request row, key tile) pairs over all the row's tokens (key_tile_units.h): a key is
// converted from its storage format once per step, however many tokens of its request are scored (a
// prefill chunk, or one decode token), and a single decode token still splits into many tiles for the
// threads. Threads claim units dynamically (units differ in tokens and keys).
//
// Fused selection (p.selected), two ways:
//   * streaming (fewer tokens than threads, e.g. a decode token, or workspace rows past
//     kWholeRowsMaxBytes): a unit's scores go to its slot's tile buffer and from there into the streaming
//     top-k of fused_topk.h; no score row is written unless the caller also asks for scores;
//   * whole rows (a token or more per thread): the scores go to whole rows (the caller's, else the
//     workspace's), then each row is selected at once (row_topk.h, what the topk op runs), a thread per
//     row. Once every thread has a row, the streams' repeated cuts and their merge cost more than one
//     selection per row: measured on 2 threads (sieve bench, the index stage), whole rows took 25–40 %
//     less for the 2048-token prefill chunks of QSA and Hy4 and for QSA's 16 decode tokens, and no more
//     elsewhere. Both select exactly the top-k of ops/topk.h over the same scores.
#include "backends/cpu/cpu_indexer_scores.h"

#include <algorithm>
#include <atomic>
#include <cstring>
#include <optional>

#include "backends/cpu/fused_topk.h"
#include "backends/cpu/key_tile_units.h"
#include "backends/cpu/parallel.h"
#include "backends/cpu/row_topk.h"
#include "core/assert.h"
#include "sieve/ops/op_common.h"

namespace sieve::cpu {

namespace {

constexpr int64_t kMinKeyTile = 64;
// Heads below which a head vector would be mostly padding: such indexers (QSA: 4 heads) take the
// dims_in_lanes kernel when their formats allow it (indexer_kernels.h).
constexpr int64_t kHeadsInLanesMin = 16;
// The most score-row bytes a fused selection may keep in its workspace (the layers' own score budget: a
// long-context prefill chunk streams instead).
constexpr int64_t kWholeRowsMaxBytes = int64_t{64} << 20;

struct ScoresPlan {
    int64_t key_tile = 0, heads_pad = 0, dim_pad = 0;
    int64_t qt = 0, w = 0, tile = 0, rows = 0, scale = 0, zero = 0, tag = 0, slot_bytes = 0;
    int64_t slots = 0;
    // shared part, before the slots: the work units (key_tile_units.h) at 0
    KeyTileUnitsPlan units;
    int64_t shared_bytes = 0;
    // fused selection, streaming: per slot, the tile's scores [n_tokens, key_tile] f32 (at tile_scores in the
    // slot); shared, after the above, the streams (at `fused`)
    int64_t tile_scores = 0, fused = 0;
    FusedTopkPlan topk;
    // fused selection, whole rows: shared, after the units, the score rows [n_tokens, n_cols] f32 when the
    // caller writes none (at row_scores), then the row top-k's workspace (at row_select)
    bool whole_rows = false;
    int64_t row_scores = 0, row_select = 0;
};

int64_t round_to(int64_t v, int64_t m) { return (v + m - 1) / m * m; }

ScoresPlan scores_plan(const ThreadPool& pool, const IndexerScoresParams& p) {
    ScoresPlan s;
    const int64_t d = std::max<int64_t>(p.head_dim, 0), h = std::max<int64_t>(p.n_heads, 0);
    const int64_t n = std::max<int64_t>(p.n_tokens, 0);
    const int64_t rows = std::min(std::max<int64_t>(p.tables.n_requests, 0), n), cols = std::max<int64_t>(p.n_cols, 0);
    const int64_t threads = std::max<int64_t>(pool.size(), 1);
    // Tiles small enough for ~4 units per thread when there are few keys, at most kIdxMaxKeyTile.
    const int64_t want = (rows * cols + 4 * threads - 1) / (4 * threads);
    s.key_tile = std::clamp(round_to(std::max<int64_t>(want, 1), kMinKeyTile), kMinKeyTile, kIdxMaxKeyTile);
    s.key_tile = std::min(s.key_tile, round_to(std::max<int64_t>(cols, 1), 16));
    s.heads_pad = round_to(std::max<int64_t>(h, 1), 16);
    s.dim_pad = round_to(d + 1, 16);  // + 1: the zero partner of an odd last dim
    s.qt = 0;
    s.w = s.qt + workspace_round_up(s.dim_pad * s.heads_pad * 4);
    s.tile = s.w + workspace_round_up(s.heads_pad * 4);
    s.rows = s.tile + workspace_round_up(s.key_tile * s.dim_pad * 4);
    s.scale = s.rows + workspace_round_up(s.key_tile * 8);
    s.zero = s.scale + workspace_round_up(s.key_tile * 4);
    s.tag = s.zero + workspace_round_up(s.dim_pad * 4);
    s.slot_bytes = s.tag + workspace_round_up(8);
    const int64_t max_units = rows * ((cols + s.key_tile - 1) / s.key_tile);
    s.slots = std::min<int64_t>(threads, max_units);
    s.units = key_tile_units_plan(n, std::max<int64_t>(p.tables.n_requests, 0));
    s.shared_bytes = workspace_round_up(s.units.bytes);
    s.whole_rows = p.selected != nullptr && p.k > 0 && n >= threads &&
                   (p.scores != nullptr || n * cols * 4 <= kWholeRowsMaxBytes);
    if (s.whole_rows) {
        s.row_scores = s.shared_bytes;
        if (p.scores == nullptr) s.shared_bytes += workspace_round_up(n * cols * 4);
        s.row_select = s.shared_bytes;
        s.shared_bytes += workspace_round_up(row_topk_workspace_size(pool, n, cols, p.k));
    } else if (p.selected != nullptr && p.k > 0) {
        s.tile_scores = s.slot_bytes;
        s.slot_bytes += workspace_round_up(n * s.key_tile * 4);
        s.topk = fused_topk_plan(s.slots, n, p.k, threads);
        s.fused = s.shared_bytes;
        s.shared_bytes += workspace_round_up(s.topk.bytes);
    }
    return s;
}

int32_t q_format(DType t) { return t == DType::f8_e4m3 ? kIdxQE4m3 : t == DType::bf16 ? kIdxQBf16 : kIdxQF32; }

int32_t key_format(CacheRecordFormat f) {
    // validate() admitted only these formats.
    return f == CacheRecordFormat::fp8_row_scale ? kIdxKeyFp8RowScale : f == CacheRecordFormat::bf16 ? kIdxKeyBf16 : kIdxKeyF32;
}

}  // namespace

const CpuIndexerKernels& indexer_kernels_for(Isa isa) {
    switch (isa) {
        case Isa::scalar: return kCpuIndexerKernelsScalar;
        case Isa::avx2: return kCpuIndexerKernelsAvx2;
        case Isa::avx512: return kCpuIndexerKernelsAvx512;
        case Isa::avx512_bf16: return kCpuIndexerKernelsAvx512Bf16;
        case Isa::amx_bf16: return kCpuIndexerKernelsAmxBf16;
    }
    return kCpuIndexerKernelsScalar;
}

size_t indexer_scores_workspace_size(const ThreadPool& pool, const IndexerScoresParams& p) {
    if (p.n_tokens <= 0 || p.n_cols <= 0) return 0;
    const ScoresPlan s = scores_plan(pool, p);
    return static_cast<size_t>(s.shared_bytes + s.slots * s.slot_bytes);
}

Status indexer_scores(const CpuIndexerKernels& k, const CpuKernels& base, ThreadPool& pool, const IndexerScoresParams& p,
                      Workspace ws) {
    SIEVE_RETURN_IF_ERROR(validate_and_check_indices(p));
    SIEVE_RETURN_IF_ERROR(check_workspace("cpu indexer_scores", ws, indexer_scores_workspace_size(pool, p)));
    const bool selects = p.selected != nullptr;
    if (selects && (p.n_tokens == 0 || p.n_cols == 0))  // no candidate anywhere: every row is −1
        for (int64_t t = 0; t < p.n_tokens; ++t) std::fill_n(p.selected + t * p.selected_row_stride, p.k, -1);
    if (p.n_tokens == 0 || p.n_cols == 0) return Status::ok();
    const ScoresPlan s = scores_plan(pool, p);
    IndexerKernelArgs a;
    a.q = p.q;
    a.q_format = q_format(p.q_type);
    a.q_token_stride = p.q_token_stride;
    a.q_head_stride = p.q_head_stride;
    a.q_scale = p.q_scale;
    a.q_scale_token_stride = p.q_scale_token_stride;
    a.weights = p.weights;
    a.weights_token_stride = p.weights_token_stride;
    a.weight_scale = p.weight_scale;
    const CacheRecordLayout layout = p.key_layout();
    a.keys = p.keys.base;
    a.key_block_bytes = p.keys.block_bytes;
    a.key_block_size = p.keys.block_size;
    a.key_format = key_format(p.key_format);
    a.key_data_bytes = layout.data_bytes();
    a.key_scales_offset = p.keys.block_size * layout.data_bytes();
    a.block_table = p.tables.block_table;
    a.block_table_stride = p.tables.block_table_stride;
    a.n_keys = p.n_keys;
    char* shared = static_cast<char*>(ws.data);
    const bool fused = selects && !s.whole_rows;  // streaming selection
    const bool own_rows = s.whole_rows && p.scores == nullptr;
    a.scores = own_rows ? reinterpret_cast<float*>(shared + s.row_scores) : p.scores;
    a.scores_row_stride = own_rows ? p.n_cols : p.scores_row_stride;
    a.n_heads = p.n_heads;
    a.head_dim = p.head_dim;
    const bool plain = a.q_format != kIdxQE4m3 && a.key_format != kIdxKeyFp8RowScale;
    a.layout = plain && p.n_heads < kHeadsInLanesMin ? kIdxDimsInLanes : kIdxHeadsInLanes;
    a.bf16_dot = k.bf16_dot && a.layout == kIdxHeadsInLanes && a.q_format != kIdxQF32 && a.key_format == kIdxKeyFp8RowScale;
    a.key_tile = s.key_tile;
    a.heads_pad = s.heads_pad;
    a.dim_pad = s.dim_pad;
    a.ws_qt = s.qt;
    a.ws_w = s.w;
    a.ws_tile = s.tile;
    a.ws_rows = s.rows;
    a.ws_scale = s.scale;
    a.ws_zero = s.zero;
    a.ws_tag = s.tag;

    const KeyTileUnits work(s.units, shared, p.tables.token_request, p.n_keys, s.key_tile);
    const int64_t units = work.units();

    std::optional<FusedTopk> topk;
    if (fused) topk.emplace(s.topk, shared + s.fused);

    char* slots_base = shared + s.shared_bytes;
    std::atomic<int64_t> next_slot{0}, next_unit{0};
    const int64_t workers = std::min<int64_t>(s.slots, units);
    if (units > 0)
        parallel_chunks(pool, workers, 1, [&](int64_t, int64_t) {
            const int64_t slot = next_slot.fetch_add(1);
            SIEVE_ASSERT(slot < s.slots, "indexer_scores: more chunks than workspace slots");
            char* w = slots_base + slot * s.slot_bytes;
            const int64_t none = -1;
            std::memcpy(w + s.tag, &none, 8);
            IndexerKernelArgs unit_args = a;  // fused: scores to the slot's tile rows
            float* tile = fused ? reinterpret_cast<float*>(w + s.tile_scores) : nullptr;
            if (fused) {
                unit_args.scores = tile;
                unit_args.scores_row_stride = s.key_tile;
                unit_args.scores_tile_rows = true;
            }
            int64_t row = 0;
            for (int64_t u = next_unit.fetch_add(1); u < units; u = next_unit.fetch_add(1)) {
                const KeyTileUnit unit = work.unit(u, row);
                const int64_t k0 = unit.k0, k1 = unit.k1;
                k.scores_tile(unit_args, unit.list, unit.tokens, unit.n_tokens, k0, k1, w);
                if (!fused) continue;
                for (int64_t i = 0; i < unit.n_tokens; ++i) {
                    const int64_t t = unit.tokens[i];
                    const int64_t end = std::min<int64_t>(k1, p.n_keys[t]);
                    if (end <= k0) continue;
                    const float* scores = tile + i * s.key_tile;
                    base.topk_stream_push(topk->stream(slot, t), scores, end - k0, k0);
                    if (p.scores != nullptr)
                        std::memcpy(p.scores + t * p.scores_row_stride + k0, scores, static_cast<size_t>(end - k0) * 4);
                }
            }
        });
    if (fused) topk->finish(base, pool, p.selected, p.selected_row_stride);
    if (s.whole_rows) {
        RowTopk r;
        r.scores = a.scores;
        r.scores_row_stride = a.scores_row_stride;
        r.valid_len = p.n_keys;
        r.n_rows = p.n_tokens;
        r.n_cols = p.n_cols;
        r.k = p.k;
        r.out = p.selected;
        r.out_row_stride = p.selected_row_stride;
        row_topk(base, pool, r, shared + s.row_select);
    }
    return Status::ok();
}

}  // namespace sieve::cpu
