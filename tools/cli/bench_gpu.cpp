#include "bench_gpu.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <memory>
#include <nlohmann/json.hpp>
#include <ostream>
#include <random>
#include <string>
#include <vector>

#include "bench_layers.h"
#include "bench_roofline.h"
#include "gpu_ceilings.h"
#include "sieve/backends/backend.h"
#include "sieve/core/dtype.h"
#include "sieve/ops/cache_store.h"
#include "sieve/ops/indexer_scores.h"
#include "sieve/ops/qsa_sparse_gqa.h"
#include "sieve/ops/sparse_attention.h"
#include "sieve/ops/topk.h"

namespace sieve::cli {

namespace {

// The 2 × L2 (H200: 60 MB) written before every timed call, so that no input sits in L2.
constexpr size_t kFlushBytes = size_t{512} << 20;
// Blocks of a cache written by cache_store from random rows; the rest of the cache repeats them.
constexpr int64_t kTemplateBlocks = 8;

// The peers' times at the same shapes on an H200 of the same kind (torch 2.11 cu130, CUDA 13):
// FlashMLA 9241ae3 sparse decode (kineto: kernel time without launch gaps), torch eager and torch.topk, a
// split-K Triton GQA kernel (the best of six tile configurations). L2 flushed, median.
struct Peer {
    const char* name = "";
    double us = 0;  // 0: no peer at this shape
};

struct Target {
    std::string text;       // empty: no target at this shape
    double max_us = 0;      // met when sieve's median is at most this
};

struct Point {
    std::string work, shape;
    std::vector<double> seconds;
    double flop = 0, bytes = 0;
    Peer peer;
    Target target;
    double median() const {
        std::vector<double> s = seconds;
        std::sort(s.begin(), s.end());
        return s[s.size() / 2];
    }
};

using Buffer = std::unique_ptr<DeviceBuffer>;

class Gpu {
public:
    Gpu(Backend& b, uint64_t seed) : b_(b), rng_(seed) {}
    Backend& backend() { return b_; }
    std::mt19937_64& rng() { return rng_; }

    template <class T>
    Expected<Buffer> upload(const std::vector<T>& host, std::string_view what) {
        SIEVE_ASSIGN_OR_RETURN(Buffer buf, b_.buffer_alloc(std::max<size_t>(host.size() * sizeof(T), 1), BufferUsage::step, what));
        SIEVE_RETURN_IF_ERROR(b_.buffer_upload(*buf, 0, host.data(), host.size() * sizeof(T)));
        return buf;
    }
    Expected<Buffer> zeros(size_t bytes, std::string_view what) {
        return b_.buffer_alloc(std::max<size_t>(bytes, 1), BufferUsage::step, what);
    }
    // n bf16 values ~ N(0, scale²).
    std::vector<uint16_t> random_bf16(size_t n, float scale) {
        std::normal_distribution<float> d(0.0f, scale);
        std::vector<uint16_t> v(n);
        for (auto& x : v) x = f32_to_bf16(d(rng_));
        return v;
    }
    std::vector<float> random_f32(size_t n, float scale) {
        std::normal_distribution<float> d(0.0f, scale);
        std::vector<float> v(n);
        for (auto& x : v) x = d(rng_);
        return v;
    }
    // `width` distinct entries of [0, n), ascending (as a top-k writes them).
    std::vector<int64_t> distinct_entries(int64_t n, int64_t width) {
        if (perm_.size() != static_cast<size_t>(n)) {
            perm_.resize(static_cast<size_t>(n));
            for (int64_t i = 0; i < n; ++i) perm_[static_cast<size_t>(i)] = i;
        }
        for (int64_t i = 0; i < width; ++i) {
            std::uniform_int_distribution<int64_t> pick(i, n - 1);
            std::swap(perm_[static_cast<size_t>(i)], perm_[static_cast<size_t>(pick(rng_))]);
        }
        std::vector<int64_t> out(perm_.begin(), perm_.begin() + width);
        std::sort(out.begin(), out.end());
        return out;
    }

private:
    Backend& b_;
    std::mt19937_64 rng_;
    std::vector<int64_t> perm_;
};

// A paged cache of `n_blocks` blocks of `layout`: the first kTemplateBlocks written by the backend's own
// cache_store from random bf16 rows, then copied over the others (whole blocks: valid for every layout).
struct Cache {
    Buffer storage;
    CacheView view;
    int64_t n_slots = 0;
};
Expected<Cache> make_cache(Gpu& g, const CacheRecordLayout& layout, int64_t block_size, int64_t n_blocks, bool round_bf16) {
    Cache c;
    const int64_t a = static_cast<int64_t>(kBufferAlignment);
    c.view.block_size = block_size;
    c.view.entry_bytes = layout.entry_bytes();
    c.view.block_bytes = (block_size * c.view.entry_bytes + a - 1) / a * a;
    c.n_slots = n_blocks * block_size;
    SIEVE_ASSIGN_OR_RETURN(c.storage, g.backend().buffer_alloc(static_cast<size_t>(n_blocks * c.view.block_bytes),
                                                               BufferUsage::cache, "benchmark cache"));
    c.view.base = c.storage->as<uint8_t>();
    const int64_t rows = std::min(n_blocks, kTemplateBlocks) * block_size;
    SIEVE_ASSIGN_OR_RETURN(Buffer x, g.upload(g.random_bf16(static_cast<size_t>(rows * layout.dim), 1.0f), "cache rows"));
    std::vector<int32_t> slots(static_cast<size_t>(rows));
    for (int64_t i = 0; i < rows; ++i) slots[static_cast<size_t>(i)] = static_cast<int32_t>(i);
    SIEVE_ASSIGN_OR_RETURN(Buffer s, g.upload(slots, "cache slots"));
    CacheStoreParams p = whole_row_store(x->data(), DType::bf16, layout.dim, rows, s->as<int32_t>(), c.view, c.n_slots, layout);
    p.round_bf16 = round_bf16;
    SIEVE_RETURN_IF_ERROR(g.backend().cache_store(p));
    for (int64_t filled = rows / block_size; filled < n_blocks;) {
        const int64_t n = std::min(filled, n_blocks - filled);
        SIEVE_RETURN_IF_ERROR(g.backend().buffer_copy(*c.storage, static_cast<size_t>(filled * c.view.block_bytes), *c.storage,
                                                      0, static_cast<size_t>(n * c.view.block_bytes)));
        filled += n;
    }
    SIEVE_RETURN_IF_ERROR(g.backend().synchronize());  // x and slots go out of scope
    return c;
}

// `reps` device times of `op`, each after L2 was flushed (two untimed calls first).
template <class Op>
Expected<std::vector<double>> time_op(Gpu& g, DeviceBuffer& flush, int reps, Op&& op) {
    Backend& b = g.backend();
    SIEVE_ASSIGN_OR_RETURN(auto timer, b.stream_timer());
    SIEVE_RETURN_IF_ERROR(op());
    SIEVE_RETURN_IF_ERROR(op());
    std::vector<double> out;
    for (int r = 0; r < reps; ++r) {
        SIEVE_RETURN_IF_ERROR(b.buffer_fill(flush, 0, static_cast<uint8_t>(r), flush.bytes()));
        SIEVE_RETURN_IF_ERROR(timer->start());
        SIEVE_RETURN_IF_ERROR(op());
        SIEVE_RETURN_IF_ERROR(timer->stop());
        SIEVE_ASSIGN_OR_RETURN(double s, timer->seconds());
        out.push_back(s);
    }
    return out;
}

// Per token `width` distinct entries of its request's `entries` (request r owns blocks
// [r·blocks_per_request, (r + 1)·blocks_per_request)), as global slots; `unique` counts the distinct
// entries of each request over its tokens.
std::vector<int32_t> slot_lists(Gpu& g, int64_t requests, int64_t tokens_per_request, int64_t entries, int64_t width,
                                int64_t block_size, int64_t& unique) {
    const int64_t blocks_per_request = (entries + block_size - 1) / block_size;
    std::vector<int32_t> out;
    out.reserve(static_cast<size_t>(requests * tokens_per_request * width));
    for (int64_t r = 0; r < requests; ++r) {
        std::vector<char> seen(static_cast<size_t>(entries), 0);
        for (int64_t t = 0; t < tokens_per_request; ++t)
            for (int64_t e : g.distinct_entries(entries, width)) {
                unique += seen[static_cast<size_t>(e)] ? 0 : 1;
                seen[static_cast<size_t>(e)] = 1;
                out.push_back(static_cast<int32_t>((r * blocks_per_request + e / block_size) * block_size + e % block_size));
            }
    }
    return out;
}

// ---- the points ------------------------------------------------------------------------------

struct MlaShape {
    const char* name;
    int64_t heads, qk_dim, v_dim, rope_dim;
    CacheRecordFormat format;
    int64_t main_width, main_block, main_entries;     // window (V4) or top-k (V3.2) list
    int64_t extra_width, extra_block, extra_entries;  // compressed list (V4), none (V3.2)
    bool sink;
};
constexpr MlaShape kV4 = {"DeepSeek-V4", 64, 512, 512, 64, CacheRecordFormat::fp8_model1, 128, 256, 16384, 512, 64, 16384, true};
constexpr MlaShape kV32 = {"DeepSeek-V3.2", 128, 576, 512, 64, CacheRecordFormat::fp8_v32, 2048, 64, 32768, 0, 0, 0, false};

Expected<Point> sparse_decode_point(Gpu& g, DeviceBuffer& flush, int reps, const MlaShape& m, int64_t batch, int64_t s_q) {
    Backend& b = g.backend();
    const int64_t T = batch * s_q;
    const CacheRecordLayout layout{m.format, m.qk_dim, m.rope_dim};
    const bool v4 = m.extra_width > 0;
    int64_t unique = 0;
    SparseAttentionParams p;
    Cache main_cache, extra_cache;
    Buffer main_slots, extra_slots;
    SIEVE_ASSIGN_OR_RETURN(main_cache, make_cache(g, layout, m.main_block, batch * ((m.main_entries + m.main_block - 1) / m.main_block), v4));
    SIEVE_ASSIGN_OR_RETURN(main_slots, g.upload(slot_lists(g, batch, s_q, m.main_entries, m.main_width, m.main_block, unique), "main slots"));
    p.main = {main_cache.view, m.format, main_cache.n_slots, main_slots->as<int32_t>(), m.main_width, m.main_width};
    if (v4) {
        SIEVE_ASSIGN_OR_RETURN(extra_cache, make_cache(g, layout, m.extra_block, batch * ((m.extra_entries + m.extra_block - 1) / m.extra_block), true));
        SIEVE_ASSIGN_OR_RETURN(extra_slots, g.upload(slot_lists(g, batch, s_q, m.extra_entries, m.extra_width, m.extra_block, unique), "extra slots"));
        p.extra = {extra_cache.view, m.format, extra_cache.n_slots, extra_slots->as<int32_t>(), m.extra_width, m.extra_width};
    }
    SIEVE_ASSIGN_OR_RETURN(Buffer q, g.upload(g.random_bf16(static_cast<size_t>(T * m.heads * m.qk_dim), 1.0f), "q"));
    SIEVE_ASSIGN_OR_RETURN(Buffer sink, g.upload(g.random_f32(static_cast<size_t>(m.heads), 1.0f), "sink"));
    SIEVE_ASSIGN_OR_RETURN(Buffer out, g.zeros(static_cast<size_t>(T * m.heads * m.v_dim * 2), "out"));
    p.q = q->data();
    p.q_type = DType::bf16;
    p.math = AttentionMath::bf16;  // the deployed profile's weights, as FlashMLA's bf16 P·V
    p.sink = m.sink ? sink->as<float>() : nullptr;
    p.scale = static_cast<float>(1.0 / std::sqrt(static_cast<double>(m.qk_dim)));
    p.out = out->data();
    p.out_type = DType::bf16;
    p.n_tokens = T;
    p.n_heads = m.heads;
    p.qk_dim = m.qk_dim;
    p.v_dim = m.v_dim;
    p.rope_dim = m.rope_dim;
    p.q_token_stride = m.heads * m.qk_dim;
    p.q_head_stride = m.qk_dim;
    p.out_token_stride = m.heads * m.v_dim;
    p.out_head_stride = m.v_dim;
    const size_t ws_bytes = b.sparse_attention_workspace_size(p);
    SIEVE_ASSIGN_OR_RETURN(Buffer ws, g.zeros(ws_bytes, "workspace"));
    Point pt;
    pt.work = fmt::format("{} sparse decode", m.name);
    pt.shape = fmt::format("b={} s_q={} h={} d={}/{} {}{} {}-B records{}", batch, s_q, m.heads, m.qk_dim, m.v_dim, m.main_width,
                           v4 ? fmt::format("+{}", m.extra_width) : std::string(), layout.entry_bytes(), m.sink ? " sink" : "");
    SIEVE_ASSIGN_OR_RETURN(pt.seconds, time_op(g, flush, reps, [&] { return b.sparse_attention(p, {ws->data(), ws_bytes}); }));
    const double attended = static_cast<double>(T) * static_cast<double>(m.main_width + m.extra_width);
    pt.flop = 2.0 * static_cast<double>(m.heads) * attended * static_cast<double>(m.qk_dim + m.v_dim);
    pt.bytes = 2.0 * static_cast<double>(T * m.heads * (m.qk_dim + m.v_dim)) + static_cast<double>(unique * layout.entry_bytes());
    // FlashMLA 9241ae3, kineto (split-KV kernel + combine without launch gaps).
    struct Row { int64_t b, s_q; double us; };
    static constexpr Row kFlashV4[] = {{1, 1, 13.8}, {16, 1, 18.8}, {64, 1, 46.2}, {128, 1, 50.1},
                                       {1, 2, 13.8}, {16, 2, 26.6}, {64, 2, 49.8}, {128, 2, 92.5}};
    static constexpr Row kFlashV32[] = {{1, 1, 18.4}, {16, 1, 41.0}, {64, 1, 96.8}, {128, 1, 187.5},
                                        {1, 2, 18.6}, {16, 2, 64.2}, {64, 2, 186.9}, {128, 2, 365.0}};
    for (const Row& r : v4 ? std::span<const Row>(kFlashV4) : std::span<const Row>(kFlashV32))
        if (r.b == batch && r.s_q == s_q) pt.peer = {"FlashMLA sparse fp8", r.us};
    if (v4 && s_q == 1 && batch == 1) pt.target = {"≤ 14 µs", 14.0};
    if (v4 && s_q == 1 && batch >= 16 && pt.peer.us > 0) pt.target = {"≤ 0.8× FlashMLA", 0.8 * pt.peer.us};
    if (v4 && s_q == 2 && batch == 128) pt.target = {"≤ 75 µs", 75.0};
    if (!v4 && s_q == 2 && batch == 128) pt.target = {"≥ 0.95× FlashMLA's speed", pt.peer.us / 0.95};
    return pt;
}

// DeepSeek-V3.2's indexer in decode: `tokens` requests of one token, each over `keys` FP8 keys of its own.
Expected<Point> indexer_point(Gpu& g, DeviceBuffer& flush, int reps, int64_t tokens, int64_t keys, int64_t k) {
    Backend& b = g.backend();
    constexpr int64_t H = 64, D = 128, B = 64;
    const CacheRecordLayout layout{CacheRecordFormat::fp8_row_scale, D, 0};
    const int64_t blocks_per_request = keys / B;
    SIEVE_ASSIGN_OR_RETURN(Cache cache, make_cache(g, layout, B, tokens * blocks_per_request, false));
    std::vector<int32_t> table(static_cast<size_t>(tokens * blocks_per_request)), token_request(static_cast<size_t>(tokens)),
        n_keys(static_cast<size_t>(tokens), static_cast<int32_t>(keys));
    for (size_t i = 0; i < table.size(); ++i) table[i] = static_cast<int32_t>(i);
    for (int64_t t = 0; t < tokens; ++t) token_request[static_cast<size_t>(t)] = static_cast<int32_t>(t);
    std::vector<uint8_t> q8(static_cast<size_t>(tokens * H * D));
    {
        const std::vector<float> v = g.random_f32(q8.size(), 2.0f);
        for (size_t i = 0; i < q8.size(); ++i) q8[i] = f32_to_fp8_e4m3(v[i]);
    }
    std::vector<float> q_scale = g.random_f32(static_cast<size_t>(tokens * H), 0.01f), w = g.random_f32(static_cast<size_t>(tokens * H), 1.0f);
    for (float& s : q_scale) s = std::fabs(s) + 1e-3f;
    SIEVE_ASSIGN_OR_RETURN(Buffer q_buf, g.upload(q8, "q"));
    SIEVE_ASSIGN_OR_RETURN(Buffer qs_buf, g.upload(q_scale, "q scales"));
    SIEVE_ASSIGN_OR_RETURN(Buffer w_buf, g.upload(w, "head weights"));
    SIEVE_ASSIGN_OR_RETURN(Buffer table_buf, g.upload(table, "block table"));
    SIEVE_ASSIGN_OR_RETURN(Buffer tr_buf, g.upload(token_request, "token requests"));
    SIEVE_ASSIGN_OR_RETURN(Buffer nk_buf, g.upload(n_keys, "key counts"));
    SIEVE_ASSIGN_OR_RETURN(Buffer sel_buf, g.zeros(static_cast<size_t>(tokens * k * 4), "selection"));
    IndexerScoresParams p;
    p.q = q_buf->data();
    p.q_type = DType::f8_e4m3;
    p.q_scale = qs_buf->as<float>();
    p.weights = w_buf->as<float>();
    p.weight_scale = static_cast<float>(1.0 / std::sqrt(static_cast<double>(H * D)));
    p.keys = cache.view;
    p.key_format = layout.format;
    p.n_slots = cache.n_slots;
    p.tables = {table_buf->as<int32_t>(), tr_buf->as<int32_t>(), tokens, blocks_per_request};
    p.n_keys = nk_buf->as<int32_t>();
    p.n_tokens = tokens;
    p.n_heads = H;
    p.head_dim = D;
    p.n_cols = keys;
    p.q_token_stride = H * D;
    p.q_head_stride = D;
    p.q_scale_token_stride = H;
    p.weights_token_stride = H;
    p.selected = sel_buf->as<int32_t>();
    p.k = k;
    p.selected_row_stride = k;
    const size_t ws_bytes = b.indexer_scores_workspace_size(p);
    SIEVE_ASSIGN_OR_RETURN(Buffer ws, g.zeros(ws_bytes, "workspace"));
    Point pt;
    pt.work = "Lightning Indexer + top-k";
    pt.shape = fmt::format("tokens={} keys={} H={} D={} FP8 keys (132 B) q e4m3, fused top-{}", tokens, keys, H, D, k);
    SIEVE_ASSIGN_OR_RETURN(pt.seconds, time_op(g, flush, reps, [&] { return b.indexer_scores(p, {ws->data(), ws_bytes}); }));
    pt.flop = 2.0 * static_cast<double>(tokens * keys) * H * D;
    pt.bytes = static_cast<double>(tokens * keys * (D + 4) + tokens * H * (D + 8) + tokens * k * 4);
    if (tokens == 64 && keys == 131072) {
        pt.peer = {"torch eager gather+dequant+bmm (no top-k)", 11342.5};
        pt.target = {"≤ 380 µs (≥ 70 % of HBM)", 380.0};
    }
    if (tokens == 1 && keys == 131072) pt.peer = {"torch eager gather+dequant+bmm (no top-k)", 218.3};
    return pt;
}

Expected<Point> topk_point(Gpu& g, DeviceBuffer& flush, int reps, int64_t rows, int64_t cols, int64_t k) {
    Backend& b = g.backend();
    SIEVE_ASSIGN_OR_RETURN(Buffer scores, g.upload(g.random_f32(static_cast<size_t>(rows * cols), 1.0f), "scores"));
    SIEVE_ASSIGN_OR_RETURN(Buffer out, g.zeros(static_cast<size_t>(rows * k * 4), "selection"));
    TopkParams p;
    p.scores = scores->as<float>();
    p.out = out->as<int32_t>();
    p.n_rows = rows;
    p.n_cols = cols;
    p.k = k;
    p.scores_row_stride = cols;
    p.out_row_stride = k;
    const size_t ws_bytes = b.topk_workspace_size(p);
    SIEVE_ASSIGN_OR_RETURN(Buffer ws, g.zeros(ws_bytes, "workspace"));
    Point pt;
    pt.work = "top-k";
    pt.shape = fmt::format("rows={} n={} k={} fp32 scores", rows, cols, k);
    SIEVE_ASSIGN_OR_RETURN(pt.seconds, time_op(g, flush, reps, [&] { return b.topk(p, {ws->data(), ws_bytes}); }));
    pt.bytes = static_cast<double>(rows * cols * 4 + rows * k * 4);
    if (cols == 131072 && k == 2048 && rows == 1) pt.peer = {"torch.topk", 92.5}, pt.target = {"≤ 15 µs", 15.0};
    if (cols == 131072 && k == 2048 && rows == 64) pt.peer = {"torch.topk", 195.1}, pt.target = {"≤ 60 µs", 60.0};
    return pt;
}

// Qwen3.8-Flash-Next's sparse GQA in decode: one token per request over `selected` slots of its 32K cache.
Expected<Point> qsa_point(Gpu& g, DeviceBuffer& flush, int reps, int64_t batch, double copy_gbps) {
    Backend& b = g.backend();
    constexpr int64_t Hq = 24, Hkv = 2, D = 256, B = 64, context = 32768, selected = 2051;
    const CacheRecordLayout layout{CacheRecordFormat::bf16, Hkv * 2 * D, 0};
    const int64_t blocks_per_request = context / B;
    SIEVE_ASSIGN_OR_RETURN(Cache cache, make_cache(g, layout, B, batch * blocks_per_request, false));
    std::vector<int32_t> table(static_cast<size_t>(batch * blocks_per_request)), token_request(static_cast<size_t>(batch)), idx;
    for (size_t i = 0; i < table.size(); ++i) table[i] = static_cast<int32_t>(i);
    for (int64_t t = 0; t < batch; ++t) {
        token_request[static_cast<size_t>(t)] = static_cast<int32_t>(t);
        for (int64_t e : g.distinct_entries(context, selected)) idx.push_back(static_cast<int32_t>(e));
    }
    SIEVE_ASSIGN_OR_RETURN(Buffer table_buf, g.upload(table, "block table"));
    SIEVE_ASSIGN_OR_RETURN(Buffer tr_buf, g.upload(token_request, "token requests"));
    SIEVE_ASSIGN_OR_RETURN(Buffer idx_buf, g.upload(idx, "positions"));
    SIEVE_ASSIGN_OR_RETURN(Buffer q, g.upload(g.random_bf16(static_cast<size_t>(batch * Hq * D), 1.0f), "q"));
    SIEVE_ASSIGN_OR_RETURN(Buffer gate, g.upload(g.random_bf16(static_cast<size_t>(batch * Hq * D), 1.0f), "gate"));
    SIEVE_ASSIGN_OR_RETURN(Buffer out, g.zeros(static_cast<size_t>(batch * Hq * D * 2), "out"));
    QsaSparseGqaParams p;
    p.q = q->data();
    p.kv = cache.view;
    p.tables = {table_buf->as<int32_t>(), tr_buf->as<int32_t>(), batch, blocks_per_request};
    p.indices = idx_buf->as<int32_t>();
    p.gate = gate->data();
    p.out = out->data();
    p.n_tokens = batch;
    p.n_heads = Hq;
    p.n_kv_heads = Hkv;
    p.head_dim = D;
    p.n_indices = selected;
    p.index_row_stride = selected;
    p.q_token_stride = p.gate_token_stride = p.out_token_stride = Hq * D;
    p.q_head_stride = p.gate_head_stride = p.out_head_stride = D;
    p.scale = static_cast<float>(1.0 / std::sqrt(static_cast<double>(D)));
    p.math = AttentionMath::bf16;
    p.q_type = p.kv_type = p.gate_type = p.out_type = DType::bf16;
    const size_t ws_bytes = b.qsa_sparse_gqa_workspace_size(p);
    SIEVE_ASSIGN_OR_RETURN(Buffer ws, g.zeros(ws_bytes, "workspace"));
    Point pt;
    pt.work = "QSA sparse GQA decode";
    pt.shape = fmt::format("b={} {}q/{}kv d={} {} slots of a 32K bf16 cache, gate", batch, Hq, Hkv, D, selected);
    SIEVE_ASSIGN_OR_RETURN(pt.seconds, time_op(g, flush, reps, [&] { return b.qsa_sparse_gqa(p, {ws->data(), ws_bytes}); }));
    pt.flop = 2.0 * static_cast<double>(batch * Hq * selected) * 2.0 * D;
    pt.bytes = static_cast<double>(batch * selected * layout.entry_bytes() + 3 * batch * Hq * D * 2);
    if (batch == 1) pt.peer = {"Triton split-K GQA", 17.8}, pt.target = {"≤ 12 µs", 12.0};
    if (batch == 16) pt.peer = {"Triton split-K GQA", 39.8};
    if (batch == 64) {
        pt.peer = {"Triton split-K GQA", 88.0};
        // ≥ 80 % of the copy bandwidth measured in this run.
        pt.target = {fmt::format("≥ 80 % of {:.0f} GB/s", copy_gbps), pt.bytes / (0.8 * copy_gbps * 1e9) * 1e6};
    }
    return pt;
}

// Whole decode layer steps on the GPU: the layer benchmark's sweep (real shapes, random weights, caches
// filled from one real prefill) of every preset at 128K tokens and a batch of 64 (--quick: 4K tokens, one
// request), each layer kind a point, timed two ways: enqueued op by op (wall time from the layer's first op
// to the backend's synchronize: the host's launch gaps included), and replayed from the graph its ops were
// recorded into (device time, L2 flushed first: how an engine runs a decode step). Its roofline: the sum of
// its stages' rooflines at the measured copy bandwidth, with the bf16 tensor rate for both the weights' and
// the cache work's flops (the GPU kernels run on tensor cores). Target: the replayed step ≥ 60 % of that
// roofline. Without --quick each step also runs in its family's dense variant (attention over the whole
// context: the bench plan's config change); the layers that select their rows (an indexer's top-k, or the
// top-k of another layer) have the target of being ≥ 35× faster, replayed, than that.
constexpr double kStepRooflineShare = 0.60;
constexpr double kSparseOverDense = 35.0;
bool selects_rows(const std::string& kind) { return kind == "csa" || kind == "dsa_full" || kind == "dsa_shared" || kind == "qsa"; }

struct StepPoint {
    LayerPoint layer;
    StageRoofline roofline;
};

Expected<std::vector<StepPoint>> layer_step_points(const GpuBenchOptions& options, double copy_gbps, double gemm_tflops,
                                                   std::ostream* live) {
    LayerBenchOptions lo;
    lo.backend = options.backend;
    lo.graph_replay = true;
    lo.l2_flush_bytes = kFlushBytes;
    lo.contexts = {options.quick ? 4096 : 131072};
    lo.batches = {options.quick ? 1 : 64};
    lo.prefill_chunks = {};
    lo.dense_max_batch = options.quick ? 0 : lo.batches.front();
    lo.thread_compare = false;
    lo.seed_tokens = options.quick ? 256 : 1024;
    lo.reps = options.quick ? 1 : 5;
    const auto progress = [&](const LayerPoint& p) {
        if (live)
            *live << fmt::format("  layer step  {:20s} layer {:3d} {:10s} {:6s} b={} context={} {:>9.3f} ms enqueued, {:.3f} ms replayed\n",
                                 p.preset, p.layer, p.kind, p.variant, p.batch, p.context, p.seconds * 1e3, p.replay_seconds * 1e3)
                  << std::flush;
    };
    SIEVE_ASSIGN_OR_RETURN(std::vector<LayerPoint> layers, run_layer_bench(lo, progress));
    std::vector<StepPoint> out;
    for (LayerPoint& p : layers) {
        StepPoint s;
        s.roofline = step_roofline(p.work, copy_gbps * 1e9, gemm_tflops * 1e12, gemm_tflops * 1e12);
        s.layer = std::move(p);
        out.push_back(std::move(s));
    }
    return out;
}

int device_index(const std::string& name) {
    const size_t colon = name.find(':');
    return colon == std::string::npos ? 0 : std::stoi(name.substr(colon + 1));
}

}  // namespace

Expected<bool> run_gpu_bench(const GpuBenchOptions& options, std::ostream& out) {
    SIEVE_ASSIGN_OR_RETURN(std::unique_ptr<Backend> backend, make_backend(options.backend));
    if (backend->host_accessible())
        return invalid_argument_error("sieve bench --backend {}: the GPU benchmark runs on a cuda backend", options.backend);
    const int reps = options.quick ? 3 : options.reps;
    if (!options.json) out << fmt::format("GPU ceilings ({}) ...\n", backend->name()) << std::flush;
    SIEVE_ASSIGN_OR_RETURN(std::vector<bench::Ceiling> ceilings, bench::measure_gpu_ceilings(device_index(backend->name()), options.quick));
    const double copy_gbps = ceilings[0].value, gemm_tflops = ceilings[1].value;
    if (!options.json)
        for (const auto& c : ceilings)
            out << fmt::format("  {:16s} {:9.1f} {} (spread {:.1f} %)\n", c.name, c.value, c.unit, 100 * c.spread);

    Gpu g(*backend, 1);
    SIEVE_ASSIGN_OR_RETURN(Buffer flush, backend->buffer_alloc(kFlushBytes, BufferUsage::workspace, "L2 flush"));
    std::vector<Point> points;
    auto add = [&](Expected<Point> p) -> Status {
        if (!p.has_value()) return p.status();
        if (!options.json)
            out << fmt::format("  {:28s} {:64s} {:9.1f} µs\n", p->work, p->shape, p->median() * 1e6) << std::flush;
        points.push_back(std::move(*p));
        return Status::ok();
    };
    if (!options.json) out << "kernels (L2 flushed, device time, median) ...\n";
    auto wanted = [&](const char* kind) {
        return options.only.empty() || std::find(options.only.begin(), options.only.end(), kind) != options.only.end();
    };
    auto batches_or = [&](std::vector<int64_t> targets) {
        return options.quick ? std::vector<int64_t>{1} : options.batches.empty() ? targets : options.batches;
    };
    const std::vector<int64_t> batches = batches_or({1, 16, 64, 128});
    for (int64_t s_q : {1, 2})
        for (int64_t bsz : batches)
            if (wanted("v4")) SIEVE_RETURN_IF_ERROR(add(sparse_decode_point(g, *flush, reps, kV4, bsz, s_q)));
    for (int64_t s_q : {1, 2})
        for (int64_t bsz : batches)
            if (wanted("v32")) SIEVE_RETURN_IF_ERROR(add(sparse_decode_point(g, *flush, reps, kV32, bsz, s_q)));
    for (int64_t t : options.quick ? std::vector<int64_t>{1} : std::vector<int64_t>{1, 64})
        if (wanted("indexer")) SIEVE_RETURN_IF_ERROR(add(indexer_point(g, *flush, reps, t, options.quick ? 8192 : 131072, 2048)));
    for (int64_t rows : options.quick ? std::vector<int64_t>{1} : std::vector<int64_t>{1, 64})
        if (wanted("topk")) SIEVE_RETURN_IF_ERROR(add(topk_point(g, *flush, reps, rows, options.quick ? 8192 : 131072, 2048)));
    for (int64_t bsz : batches_or({1, 16, 64}))
        if (wanted("qsa")) SIEVE_RETURN_IF_ERROR(add(qsa_point(g, *flush, reps, bsz, copy_gbps)));

    std::vector<StepPoint> steps;
    if (wanted("step")) {
        if (!options.json) out << "whole decode layer steps (enqueued: wall time, host launch gaps included; replayed: a graph's device time) ...\n" << std::flush;
        SIEVE_ASSIGN_OR_RETURN(steps, layer_step_points(options, copy_gbps, gemm_tflops, options.json ? nullptr : &out));
    }

    bool all_met = true;
    int evaluated = 0;
    nlohmann::json j_points = nlohmann::json::array();
    if (!options.json && !points.empty())
        out << fmt::format("\n| work | shape | sieve µs (min-max) | TFLOP/s (% of {:.0f}) | GB/s (% of {:.0f}) | peer µs | peer / sieve | target | met |\n"
                           "|---|---|---:|---:|---:|---:|---:|---|---|\n",
                           gemm_tflops, copy_gbps);
    for (const Point& p : points) {
        const double t = p.median();
        const auto [lo, hi] = std::minmax_element(p.seconds.begin(), p.seconds.end());
        const double tf = p.flop / t / 1e12, gbs = p.bytes / t / 1e9;
        const bool has_target = !options.quick && p.target.max_us > 0;
        const bool met = has_target && t * 1e6 <= p.target.max_us;
        if (has_target) {
            ++evaluated;
            all_met = all_met && met;
        }
        if (options.json) {
            j_points.push_back({{"work", p.work}, {"shape", p.shape}, {"median_us", t * 1e6}, {"min_us", *lo * 1e6},
                                {"max_us", *hi * 1e6}, {"flop", p.flop}, {"bytes", p.bytes}, {"tflops", tf},
                                {"tflops_share", tf / gemm_tflops}, {"gbps", gbs}, {"gbps_share", gbs / copy_gbps},
                                {"peer", p.peer.name}, {"peer_us", p.peer.us}, {"target", p.target.text},
                                {"target_us", p.target.max_us}, {"met", has_target ? nlohmann::json(met) : nlohmann::json()}});
            continue;
        }
        out << fmt::format("| {} | {} | {:.1f} ({:.1f}-{:.1f}) | {} | {:.0f} ({:.1f} %) | {} | {} | {} | {} |\n", p.work, p.shape,
                           t * 1e6, *lo * 1e6, *hi * 1e6,
                           p.flop > 0 ? fmt::format("{:.1f} ({:.1f} %)", tf, 100 * tf / gemm_tflops) : std::string("-"), gbs,
                           100 * gbs / copy_gbps, p.peer.us > 0 ? fmt::format("{:.1f}", p.peer.us) : std::string("-"),
                           p.peer.us > 0 ? fmt::format("{:.2f}×", p.peer.us / (t * 1e6)) : std::string("-"),
                           p.target.max_us > 0 ? fmt::format("{} ({:.1f} µs)", p.target.text, p.target.max_us) : std::string("-"),
                           has_target ? (met ? "yes" : "**no**") : "-");
    }
    nlohmann::json j_steps = nlohmann::json::array();
    if (!options.json && !steps.empty())
        out << fmt::format("\n| layer step | shape | enqueued ms (spread) | replayed ms (spread) | roofline ms | replayed share of roofline | target | met |\n"
                           "|---|---|---:|---:|---:|---:|---|---|\n");
    auto step_shape = [](const LayerPoint& p) {
        return fmt::format("{} layer {} ({}) b={} context={}", p.preset, p.layer, p.kind, p.batch, p.context);
    };
    // The dense counterpart of a sparse step (same preset, layer, batch and context).
    auto dense_of = [&](const LayerPoint& p) -> const LayerPoint* {
        for (const StepPoint& s : steps)
            if (s.layer.variant == "dense" && s.layer.preset == p.preset && s.layer.layer == p.layer && s.layer.batch == p.batch &&
                s.layer.context == p.context)
                return &s.layer;
        return nullptr;
    };
    std::vector<std::string> ratio_rows;
    nlohmann::json j_ratios = nlohmann::json::array();
    for (const StepPoint& s : steps) {
        const LayerPoint& p = s.layer;
        if (p.variant != "sparse" || !selects_rows(p.kind)) continue;
        const LayerPoint* d = dense_of(p);
        if (!d || p.replay_seconds <= 0 || d->replay_seconds <= 0) continue;
        const double ratio = d->replay_seconds / p.replay_seconds;
        const bool met = ratio >= kSparseOverDense;
        ++evaluated;
        all_met = all_met && met;
        const std::string shape = step_shape(p);
        if (options.json)
            j_ratios.push_back({{"preset", p.preset}, {"layer", p.layer}, {"kind", p.kind}, {"batch", p.batch}, {"context", p.context},
                                {"sparse_replay_seconds", p.replay_seconds}, {"dense_replay_seconds", d->replay_seconds},
                                {"sparse_speedup", ratio}, {"target_ratio", kSparseOverDense}, {"met", met}});
        else
            ratio_rows.push_back(fmt::format("| sparse vs dense | {} | {:.3f} | {:.3f} | {:.1f}× | ≥ {:.0f}× | {} |\n", shape,
                                             p.replay_seconds * 1e3, d->replay_seconds * 1e3, ratio, kSparseOverDense,
                                             met ? "yes" : "**no**"));
    }
    for (const StepPoint& s : steps) {
        const LayerPoint& p = s.layer;
        if (p.variant != "sparse") continue;  // dense steps enter the sparse-vs-dense rows only
        const double roof = s.roofline.seconds;
        const double share = p.replay_seconds > 0 ? roof / p.replay_seconds : 0;
        const bool has_target = !options.quick && roof > 0;
        const bool met = has_target && share >= kStepRooflineShare;
        if (has_target) {
            ++evaluated;
            all_met = all_met && met;
        }
        const std::string shape = step_shape(p);
        if (options.json) {
            j_steps.push_back({{"preset", p.preset}, {"layer", p.layer}, {"kind", p.kind}, {"batch", p.batch},
                               {"context", p.context}, {"seconds", p.seconds}, {"spread", p.spread},
                               {"replay_seconds", p.replay_seconds}, {"replay_spread", p.replay_spread},
                               {"roofline_seconds", roof}, {"memory_bound", s.roofline.memory_bound},
                               {"target_share", kStepRooflineShare}, {"met", has_target ? nlohmann::json(met) : nlohmann::json()}});
            continue;
        }
        out << fmt::format("| decode layer step | {} | {:.3f} ({:.0f} %) | {:.3f} ({:.0f} %) | {:.3f} ({}) | {:.1f} % | ≥ {:.0f} % of the roofline | {} |\n",
                           shape, p.seconds * 1e3, 100 * p.spread, p.replay_seconds * 1e3, 100 * p.replay_spread, roof * 1e3,
                           s.roofline.memory_bound ? "memory" : "compute", 100 * share, 100 * kStepRooflineShare,
                           has_target ? (met ? "yes" : "**no**") : "-");
    }
    if (!options.json && !ratio_rows.empty()) {
        out << "\n| work | shape | sparse replayed ms | dense replayed ms | dense / sparse | target | met |\n|---|---|---:|---:|---:|---|---|\n";
        for (const std::string& r : ratio_rows) out << r;
    }
    if (options.json) {
        nlohmann::json j_ceil = nlohmann::json::array();
        for (const auto& c : ceilings)
            j_ceil.push_back({{"name", c.name}, {"unit", c.unit}, {"device", c.isa}, {"value", c.value}, {"spread", c.spread}});
        out << nlohmann::json{{"backend", backend->name()}, {"ceilings", j_ceil}, {"points", j_points}, {"layer_steps", j_steps},
                              {"sparse_vs_dense", j_ratios},
                              {"targets_evaluated", evaluated}, {"targets_met", all_met}}
                   .dump(2)
            << "\n";
    } else {
        out << fmt::format("\npeers: FlashMLA 9241ae3 (kineto kernel time), torch 2.11 eager / torch.topk, a split-K Triton "
                           "GQA kernel, measured on an H200 with L2 flushed; the whole layer steps have no peer: sparse vs dense compares each with its dense variant.\n"
                           "targets: {} evaluated, {}\n",
                           evaluated, options.quick ? "none with --quick" : (all_met ? "all met" : "NOT all met"));
    }
    return all_met;
}

}  // namespace sieve::cli
