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
#include "sieve/ops/op_common.h"

namespace sieve::cpu {

RecordCache record_cache(const CacheView& v, const CacheRecordLayout& l) {
    RecordCache c;
    c.base = v.base;
    c.block_bytes = v.block_bytes;
    c.block_size = v.block_size;
    // The sparse attention's MQA path admits only these formats (ops/sparse_attention.h).
    c.format = l.format == CacheRecordFormat::fp8_model1 ? kRecordFp8Model1 : kRecordF32;
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
        case Isa::amx_bf16: return kCpuDsv4KernelsAmxBf16;
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

}  // namespace sieve::cpu
