// The cpu backend's DeepSeek-V4 ops: dispatch of the per-ISA kernels and the portable compressor code
// (see cpu_dsv4_ops.h).
#include "backends/cpu/cpu_dsv4_ops.h"

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

RecordCache record_cache(const CacheView& v, const CacheRecordLayout& l) {
    RecordCache c;
    c.base = v.base;
    c.block_bytes = v.block_bytes;
    c.block_size = v.block_size;
    // validate() admitted only these formats (sparse_mqa: f32 | fp8_model1).
    c.format = l.format == CacheRecordFormat::fp8_model1 ? kRecordFp8Model1 : kRecordF32;
    c.dim = l.dim;
    c.nope = l.is_fp8() ? l.quant_dim() : l.dim;
    c.data_bytes = l.data_bytes();
    c.scale_bytes = l.scale_bytes();
    c.scales_offset = v.block_size * l.data_bytes();
    return c;
}

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
        case Isa::avx512_bf16: return kCpuDsv4KernelsAvx512;  // no bf16 dot in these kernels
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

// ---- sparse MQA ----------------------------------------------------------------------------------------
//
// Work items are (token, head chunk): a call dequantizes and transposes the token's rows once for the
// heads of its chunk (dsv4_kernels.h sparse_mqa_block), so splitting a token's heads repeats that work
// (dequantization, transposition, softmax: ~15 % of a 32-head item in a perf profile of dev/bench_attention's
// decode at d = 512, i.e. about kMqaSetupHeads heads' worth).
// The split is the one with the shortest estimated makespan over the pool's threads: a decode step of one
// token still splits its 64 heads over the threads, a prefill chunk keeps every token whole. Threads claim
// items dynamically (items are equal, but the machine may be shared).

namespace {

constexpr int64_t kMqaSetupHeads = 4;

struct MqaPlan {
    int64_t q = 0, kc = 0, kt = 0, lg = 0, acc = 0, mx = 0, den = 0, slot_bytes = 0;
    int64_t heads_per_item = 1, head_chunks = 1, items = 0, slots = 0;
};

MqaPlan mqa_plan(const ThreadPool& pool, const SparseMqaParams& p) {
    MqaPlan m;
    const int64_t threads = std::max<int64_t>(pool.size(), 1);
    const int64_t tokens = std::max<int64_t>(p.n_tokens, 0), heads = std::max<int64_t>(p.n_heads, 1);
    // Makespan of k chunks per token, in heads' worth of work: rounds of items × (heads of an item + setup);
    // chunks hold whole register blocks of kSparseMqaHeadBlock heads where the heads allow.
    const int64_t block = heads >= 2 * kSparseMqaHeadBlock ? kSparseMqaHeadBlock : 1;
    int64_t best = -1;
    for (int64_t k = 1; k <= std::min<int64_t>(threads, heads); ++k) {
        const int64_t hpi = (heads + k - 1) / k;
        const int64_t per = (hpi + block - 1) / block * block;
        const int64_t chunks = (heads + per - 1) / per;
        const int64_t rounds = (tokens * chunks + threads - 1) / threads;
        const int64_t cost = rounds * (per + kMqaSetupHeads);
        if (best < 0 || cost < best) {
            best = cost;
            m.heads_per_item = std::min(per, heads);
            m.head_chunks = chunks;
        }
    }
    const int64_t d = std::max<int64_t>(p.head_dim, 0), nh = m.heads_per_item, C = kSparseMqaChunk;
    m.q = 0;
    m.kc = m.q + workspace_round_up(nh * d * 4);
    m.kt = m.kc + workspace_round_up(C * d * 4);
    m.lg = m.kt + workspace_round_up(C * d * 4);
    m.acc = m.lg + workspace_round_up(nh * C * 4);
    m.mx = m.acc + workspace_round_up(nh * d * 4);
    m.den = m.mx + workspace_round_up(nh * 4);
    m.slot_bytes = m.den + workspace_round_up(nh * 4);
    m.items = tokens * m.head_chunks;
    m.slots = std::min<int64_t>(threads, m.items);
    return m;
}

}  // namespace

size_t dsv4_sparse_mqa_workspace_size(const ThreadPool& pool, const SparseMqaParams& p) {
    if (p.n_tokens <= 0 || p.n_heads <= 0) return 0;
    const MqaPlan m = mqa_plan(pool, p);
    return static_cast<size_t>(m.slots * m.slot_bytes);
}

Status dsv4_sparse_mqa(const CpuDsv4Kernels& k, ThreadPool& pool, const SparseMqaParams& p, Workspace ws) {
    SIEVE_RETURN_IF_ERROR(validate_and_check_indices(p));
    SIEVE_RETURN_IF_ERROR(check_workspace("cpu sparse_mqa", ws, dsv4_sparse_mqa_workspace_size(pool, p)));
    if (p.n_tokens == 0 || p.n_heads == 0) return Status::ok();
    const MqaPlan m = mqa_plan(pool, p);
    SparseMqaKernelArgs a;
    a.q = p.q;
    a.q_bf16 = p.q_type == DType::bf16;
    a.q_token_stride = p.q_token_stride;
    a.q_head_stride = p.q_head_stride;
    if (p.n_window > 0) a.window = record_cache(p.window, p.window_layout());
    if (p.n_compressed > 0) a.compressed = record_cache(p.compressed, p.compressed_layout());
    a.window_slots = p.window_slots;
    a.n_window = p.n_window;
    a.window_stride = p.window_slots_stride;
    a.compressed_slots = p.compressed_slots;
    a.n_compressed = p.n_compressed;
    a.compressed_stride = p.compressed_slots_stride;
    a.sink = p.sink;
    a.scale = p.scale;
    a.out = p.out;
    a.out_bf16 = p.out_type == DType::bf16;
    a.out_token_stride = p.out_token_stride;
    a.out_head_stride = p.out_head_stride;
    a.n_heads = p.n_heads;
    a.head_dim = p.head_dim;
    a.ws_q = m.q;
    a.ws_kc = m.kc;
    a.ws_kt = m.kt;
    a.ws_lg = m.lg;
    a.ws_acc = m.acc;
    a.ws_mx = m.mx;
    a.ws_den = m.den;
    std::atomic<int64_t> next_slot{0}, next_item{0};
    parallel_chunks(pool, m.slots, 1, [&](int64_t b, int64_t e) {
        const int64_t slot = next_slot.fetch_add(1);
        SIEVE_ASSERT(slot < m.slots, "sparse_mqa: more chunks than workspace slots");
        void* w = static_cast<char*>(ws.data) + slot * m.slot_bytes;
        (void)b;
        (void)e;
        for (int64_t item = next_item.fetch_add(1); item < m.items; item = next_item.fetch_add(1)) {
            const int64_t t = item / m.head_chunks, h0 = (item % m.head_chunks) * m.heads_per_item;
            const int64_t h1 = std::min(p.n_heads, h0 + m.heads_per_item);
            if (h0 < h1) k.sparse_mqa_block(a, t, h0, h1, w);
        }
    });
    return Status::ok();
}

}  // namespace sieve::cpu
