// The cpu backend's DeepSeek-V4 ops: dispatch of the per-ISA kernels and the portable compressor code
// (see cpu_dsv4_ops.h).
#include "backends/cpu/cpu_dsv4_ops.h"

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

RecordCache record_cache(const CacheView& v, const CacheRecordLayout& l) {
    RecordCache c;
    c.base = v.base;
    c.block_bytes = v.block_bytes;
    c.block_size = v.block_size;
    c.format = l.format == CacheRecordFormat::fp8_model1      ? kRecordFp8Model1
               : l.format == CacheRecordFormat::fp8_row_scale ? kRecordFp8RowScale
                                                              : kRecordF32;
    c.dim = l.dim;
    c.nope = l.is_fp8() ? l.quant_dim() : l.dim;
    c.data_bytes = l.data_bytes();
    c.scale_bytes = l.scale_bytes();
    c.scales_offset = v.block_size * l.data_bytes();
    return c;
}

namespace {

// ---- compressor pooling (portable) -------------------------------------------------------------------

// Channels [e0, e0 + n) of entry k, n ≤ kPoolChunk: two passes over the rows (max, then the weighted
// sums), the structure of vLLM CPU's compressor.cpp (§3.4).
constexpr int64_t kPoolChunk = 64;
void pool_channels(const CompressorPoolParams& p, int64_t k, int64_t e0, int64_t n) {
    const int64_t c = p.head_dim, m = p.ratio, width = p.width();
    const int32_t* slots = p.gather_slots + k * p.gather_stride;
    float mx[kPoolChunk], num[kPoolChunk], den[kPoolChunk];
    for (int64_t e = 0; e < n; ++e) {
        mx[e] = -std::numeric_limits<float>::infinity();
        num[e] = 0.0f;
        den[e] = 0.0f;
    }
    bool any = false;
    for (int64_t j = 0; j < p.n_rows(); ++j) {
        if (slots[j] < 0) continue;
        any = true;
        const float* b = compressor_state_row(p.state, slots[j]) + width + (p.overlap && j >= m ? c : 0) + e0;
        for (int64_t e = 0; e < n; ++e) mx[e] = std::max(mx[e], b[e]);
    }
    float* out = p.out + k * p.out_row_stride + e0;
    if (!any) {
        for (int64_t e = 0; e < n; ++e) out[e] = 0.0f;
        return;
    }
    for (int64_t j = 0; j < p.n_rows(); ++j) {
        if (slots[j] < 0) continue;
        const float* row = compressor_state_row(p.state, slots[j]) + (p.overlap && j >= m ? c : 0) + e0;
        const float* b = row + width;
        for (int64_t e = 0; e < n; ++e) {
            const float w = std::exp(b[e] - mx[e]);
            num[e] += w * row[e];
            den[e] += w;
        }
    }
    for (int64_t e = 0; e < n; ++e) out[e] = num[e] / den[e];
}

}  // namespace

const CpuDsv4Kernels& dsv4_kernels_for(Isa isa) {
    switch (isa) {
        case Isa::scalar: return kCpuDsv4KernelsScalar;
        case Isa::avx2: return kCpuDsv4KernelsAvx2;
        case Isa::avx512: return kCpuDsv4KernelsAvx512;
        case Isa::avx512_bf16: return kCpuDsv4KernelsAvx512Bf16;
    }
    return kCpuDsv4KernelsScalar;
}

Status dsv4_compressor_state_store(ThreadPool& pool, const CompressorStateStoreParams& p) {
    SIEVE_RETURN_IF_ERROR(validate_and_check_indices(p));
    parallel_chunks(pool, p.n_tokens, min_chunk_for(2 * p.width), [&](int64_t b, int64_t e) {
        for (int64_t t = b; t < e; ++t) {
            if (p.slots[t] < 0) continue;
            float* row = compressor_state_row(p.state, p.slots[t]);
            const float* kv = p.kv + t * p.kv_row_stride;
            const float* gate = p.gate + t * p.gate_row_stride;
            const float* ape = p.ape + (p.positions[t] % p.ratio) * p.width;  // §3.4: ape[p mod m]
            std::memcpy(row, kv, static_cast<size_t>(p.width) * 4);
            for (int64_t i = 0; i < p.width; ++i) row[p.width + i] = gate[i] + ape[i];
        }
    });
    return Status::ok();
}

Status dsv4_compressor_pool(ThreadPool& pool, const CompressorPoolParams& p) {
    SIEVE_RETURN_IF_ERROR(validate_and_check_indices(p));
    const int64_t chunks = (p.head_dim + kPoolChunk - 1) / kPoolChunk;
    parallel_chunks(pool, p.n_entries * chunks, min_chunk_for(p.n_rows() * kPoolChunk * 8), [&](int64_t b, int64_t e) {
        for (int64_t item = b; item < e; ++item) {
            const int64_t k = item / chunks, e0 = (item % chunks) * kPoolChunk;
            pool_channels(p, k, e0, std::min(kPoolChunk, p.head_dim - e0));
        }
    });
    return Status::ok();
}

// ---- indexer scores ------------------------------------------------------------------------------------
//
// Work units are (list, key tile) pairs over all the tokens of the list (dsv4_kernels.h
// indexer_scores_tile): a key is converted from its storage format once per step, however many tokens of
// its request are scored (a prefill chunk, or one decode token), and a single decode token still splits
// into many tiles for the threads. Threads claim units dynamically (units differ in tokens and keys).
//
// Fused selection (p.selected): a unit's scores go to its slot's tile buffer and from there into the
// streaming top-k of fused_topk.h; no score row is written.

namespace {

constexpr int64_t kIdxMaxTile = 512;  // keys per unit: q is transposed once per (token, unit), ≤ 3 % of the dots
constexpr int64_t kIdxMinTile = 64;

struct ScoresPlan {
    int64_t key_tile = 0, heads_pad = 0, dim_pad = 0;
    int64_t qt = 0, w = 0, tile = 0, rows = 0, scale = 0, flag = 0, zero = 0, key = 0, tag = 0, slot_bytes = 0;
    int64_t slots = 0;
    // shared part, before the slots: the work units (key_tile_units.h) at 0
    KeyTileUnitsPlan units;
    int64_t shared_bytes = 0;
    // fused selection: per slot, the tile's scores [n_tokens, key_tile] f32 (at tile_scores in the slot);
    // shared, after the above, the streams (at `fused`)
    int64_t tile_scores = 0, fused = 0;
    FusedTopkPlan topk;
};

int64_t round_to(int64_t v, int64_t m) { return (v + m - 1) / m * m; }

ScoresPlan scores_plan(const ThreadPool& pool, const IndexerScoresParams& p) {
    ScoresPlan s;
    const int64_t d = std::max<int64_t>(p.head_dim, 0), h = std::max<int64_t>(p.n_heads, 0);
    const int64_t lists = std::max<int64_t>(p.n_lists, 0), keys = std::max<int64_t>(p.max_keys, 0);
    const int64_t threads = std::max<int64_t>(pool.size(), 1);
    // Tiles small enough for ~4 units per thread when there are few keys, at most kIdxMaxTile.
    const int64_t want = (lists * keys + 4 * threads - 1) / (4 * threads);
    s.key_tile = std::clamp(round_to(std::max<int64_t>(want, 1), kIdxMinTile), kIdxMinTile, kIdxMaxTile);
    s.key_tile = std::min(s.key_tile, round_to(std::max<int64_t>(keys, 1), 16));
    s.heads_pad = round_to(std::max<int64_t>(h, 1), 16);
    s.dim_pad = round_to(d + 1, 16);  // + 1: the zero partner of an odd last dim
    s.qt = 0;
    s.w = s.qt + workspace_round_up(s.dim_pad * s.heads_pad * 4);
    s.tile = s.w + workspace_round_up(s.heads_pad * 4);
    s.rows = s.tile + workspace_round_up(s.key_tile * s.dim_pad * 4);
    s.scale = s.rows + workspace_round_up(s.key_tile * 8);
    s.flag = s.scale + workspace_round_up(s.key_tile * 4);
    s.zero = s.flag + workspace_round_up(s.key_tile * 4);
    s.key = s.zero + workspace_round_up(s.dim_pad * 4);
    s.tag = s.key + workspace_round_up(s.dim_pad * 4);
    s.slot_bytes = s.tag + workspace_round_up(8);
    const int64_t max_units = lists * ((keys + s.key_tile - 1) / s.key_tile);
    s.slots = std::min<int64_t>(threads, max_units);
    const int64_t n = std::max<int64_t>(p.n_tokens, 0);
    s.units = key_tile_units_plan(n, lists);
    s.shared_bytes = workspace_round_up(s.units.bytes);
    if (p.selected != nullptr && p.k > 0) {
        s.tile_scores = s.slot_bytes;
        s.slot_bytes += workspace_round_up(n * s.key_tile * 4);
        s.topk = fused_topk_plan(s.slots, n, p.k, threads);
        s.fused = s.shared_bytes;
        s.shared_bytes += workspace_round_up(s.topk.bytes);
    }
    return s;
}

}  // namespace

size_t dsv4_indexer_scores_workspace_size(const ThreadPool& pool, const IndexerScoresParams& p) {
    if (p.n_tokens <= 0 || p.max_keys <= 0) return 0;
    const ScoresPlan s = scores_plan(pool, p);
    return static_cast<size_t>(s.shared_bytes + s.slots * s.slot_bytes);
}

Status dsv4_indexer_scores(const CpuDsv4Kernels& k, const CpuKernels& base, ThreadPool& pool,
                           const IndexerScoresParams& p, Workspace ws) {
    SIEVE_RETURN_IF_ERROR(validate_and_check_indices(p));
    SIEVE_RETURN_IF_ERROR(check_workspace("cpu indexer_scores", ws, dsv4_indexer_scores_workspace_size(pool, p)));
    const bool fused = p.selected != nullptr;
    if (fused && (p.n_tokens == 0 || p.max_keys == 0))  // no candidate anywhere: every row is −1
        for (int64_t t = 0; t < p.n_tokens; ++t) std::fill_n(p.selected + t * p.selected_row_stride, p.k, -1);
    if (p.n_tokens == 0 || p.max_keys == 0) return Status::ok();
    const ScoresPlan s = scores_plan(pool, p);
    IndexerScoresKernelArgs a;
    a.q = p.q;
    a.q_bf16 = p.q_type == DType::bf16;
    a.q_token_stride = p.q_token_stride;
    a.q_head_stride = p.q_head_stride;
    a.weights = p.weights;
    a.weights_row_stride = p.weights_row_stride;
    a.weight_scale = p.weight_scale;
    a.keys = record_cache(p.keys, p.key_layout());
    a.key_slots = p.key_slots;
    a.key_slots_stride = p.key_slots_stride;
    a.n_keys = p.n_keys;
    a.scores = p.scores;
    a.scores_row_stride = p.scores_row_stride;
    a.n_heads = p.n_heads;
    a.head_dim = p.head_dim;
    a.bf16_dot = k.bf16_dot && a.q_bf16 && p.key_format == CacheRecordFormat::fp8_row_scale;
    a.key_tile = s.key_tile;
    a.heads_pad = s.heads_pad;
    a.dim_pad = s.dim_pad;
    a.ws_qt = s.qt;
    a.ws_w = s.w;
    a.ws_tile = s.tile;
    a.ws_rows = s.rows;
    a.ws_scale = s.scale;
    a.ws_flag = s.flag;
    a.ws_zero = s.zero;
    a.ws_key = s.key;
    a.ws_tag = s.tag;

    char* shared = static_cast<char*>(ws.data);
    const KeyTileUnits work(s.units, shared, p.token_list, p.n_keys, s.key_tile, false);
    const int64_t units = work.units();

    std::optional<FusedTopk> topk;
    if (fused) topk.emplace(s.topk, shared + s.fused);

    char* slots_base = shared + s.shared_bytes;
    std::atomic<int64_t> next_slot{0}, next_unit{0};
    const int64_t workers = std::min<int64_t>(s.slots, units);
    if (units > 0)
        parallel_chunks(pool, workers, 1, [&](int64_t b, int64_t e) {
            const int64_t slot = next_slot.fetch_add(1);
            SIEVE_ASSERT(slot < s.slots, "indexer_scores: more chunks than workspace slots");
            char* w = slots_base + slot * s.slot_bytes;
            const int64_t none = -1;
            std::memcpy(w + s.tag, &none, 8);
            (void)b;
            (void)e;
            IndexerScoresKernelArgs unit_args = a;  // fused: scores to the slot's tile rows
            float* tile = fused ? reinterpret_cast<float*>(w + s.tile_scores) : nullptr;
            if (fused) {
                unit_args.scores = tile;
                unit_args.scores_row_stride = s.key_tile;
                unit_args.scores_tile_rows = true;
            }
            int64_t list = 0;
            for (int64_t u = next_unit.fetch_add(1); u < units; u = next_unit.fetch_add(1)) {
                const KeyTileUnit unit = work.unit(u, list);
                const int64_t k0 = unit.k0, k1 = unit.k1;
                k.indexer_scores_tile(unit_args, unit.list, unit.tokens, unit.n_tokens, k0, k1, w);
                if (!fused) continue;
                for (int64_t i = 0; i < unit.n_tokens; ++i) {
                    const int64_t t = unit.tokens[i];
                    const int64_t end = std::min<int64_t>(k1, p.n_keys[t]);
                    if (end <= k0) continue;
                    const float* row = tile + i * s.key_tile;
                    base.topk_stream_push(topk->stream(slot, t), row, end - k0, k0);
                    if (p.scores != nullptr)
                        std::memcpy(p.scores + t * p.scores_row_stride + k0, row, static_cast<size_t>(end - k0) * 4);
                }
            }
        });
    if (!fused) return Status::ok();

    topk->finish(base, pool, p.selected, p.selected_row_stride);
    return Status::ok();
}

}  // namespace sieve::cpu
