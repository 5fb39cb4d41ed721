// ref latent-cache write and sparse MLA attention: the formulas of ops/sparse_mla.h, one entry at a
// time, sums in double.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "backends/ref/dsa_ref_ops.h"
#include "backends/ref/ref_ops.h"
#include "ops/op_common.h"

namespace sieve::ref {

float quant_group_e4m3(const float* x, int64_t n, uint8_t* q) {
    float amax = 0.0f;
    bool finite = true;
    for (int64_t j = 0; j < n; ++j) {
        if (!std::isfinite(x[j])) finite = false;
        amax = std::max(amax, std::fabs(x[j]));
    }
    if (!finite) {  // ops/quant_fp8.h: a group without a finite scale is poisoned
        for (int64_t j = 0; j < n; ++j) q[j] = static_cast<uint8_t>(0x7f | (std::signbit(x[j]) ? 0x80 : 0x00));
        return std::numeric_limits<float>::quiet_NaN();
    }
    const float s = ue8m0_scale_for_amax(amax);
    for (int64_t j = 0; j < n; ++j) q[j] = f32_to_fp8_e4m3(std::clamp(x[j] / s, -kFp8E4m3Max, kFp8E4m3Max));
    return s;
}

namespace {

// Entry `slot` of the latent cache as fp32 [R + Dr] (ops/sparse_mla.h dequant rule).
void read_entry(const SparseMlaAttentionParams& p, int64_t slot, float* out) {
    const uint8_t* e = p.cache.row(slot);
    const int64_t r = p.kv_lora_rank, dr = p.rope_dim;
    if (p.format == SparseMlaCacheFormat::f32) {
        std::memcpy(out, e, static_cast<size_t>(4 * (r + dr)));
        return;
    }
    const int64_t g = sparse_mla_quant_group(r);
    for (int64_t i = 0; i < r; ++i) {
        float s;
        std::memcpy(&s, e + r + 4 * (i / g), 4);
        out[i] = fp8_e4m3_to_f32(e[i]) * s;
    }
    for (int64_t j = 0; j < dr; ++j) {
        uint16_t b;
        std::memcpy(&b, e + r + 4 * (r / g) + 2 * j, 2);
        out[r + j] = bf16_to_f32(b);
    }
}

}  // namespace

Status sparse_mla_cache_write(const SparseMlaCacheWriteParams& p) {
    SIEVE_RETURN_IF_ERROR(validate_and_check_indices(p));
    const int64_t r = p.kv_lora_rank, dr = p.rope_dim;
    std::vector<float> lat(static_cast<size_t>(r)), rope(static_cast<size_t>(dr));
    std::vector<uint8_t> q(static_cast<size_t>(r));
    for (int64_t t = 0; t < p.n_tokens; ++t) {
        if (p.slots[t] < 0) continue;
        for (int64_t i = 0; i < r; ++i) lat[i] = load(p.latent, p.latent_type, t * p.latent_row_stride + i);
        for (int64_t j = 0; j < dr; ++j) rope[j] = load(p.rope, p.rope_type, t * p.rope_row_stride + j);
        uint8_t* e = p.cache.row(p.slots[t]);
        if (p.format == SparseMlaCacheFormat::f32) {
            std::memcpy(e, lat.data(), static_cast<size_t>(4 * r));
            if (dr > 0) std::memcpy(e + 4 * r, rope.data(), static_cast<size_t>(4 * dr));
            continue;
        }
        const int64_t g = sparse_mla_quant_group(r);
        for (int64_t k = 0; k < r / g; ++k) {
            const float s = quant_group_e4m3(lat.data() + k * g, g, q.data() + k * g);
            std::memcpy(e + r + 4 * k, &s, 4);  // §3.4: UE8M0 value stored as fp32
        }
        std::memcpy(e, q.data(), static_cast<size_t>(r));
        for (int64_t j = 0; j < dr; ++j) {
            const uint16_t b = f32_to_bf16(rope[j]);
            std::memcpy(e + r + 4 * (r / g) + 2 * j, &b, 2);
        }
    }
    return Status::ok();
}

Status sparse_mla_attention(const SparseMlaAttentionParams& p) {
    SIEVE_RETURN_IF_ERROR(validate_and_check_indices(p));
    const int64_t r = p.kv_lora_rank, dqk = r + p.rope_dim;
    std::vector<float> entries;                       // [n_valid, dqk] of the current row
    std::vector<double> logits, acc(static_cast<size_t>(r));
    std::vector<float> q(static_cast<size_t>(dqk));
    for (int64_t t = 0; t < p.n_tokens; ++t) {
        const int32_t* row = p.slots + t * p.slots_row_stride;
        entries.clear();
        for (int64_t j = 0; j < p.topk; ++j) {
            if (row[j] < 0) continue;
            entries.resize(entries.size() + static_cast<size_t>(dqk));
            read_entry(p, row[j], entries.data() + entries.size() - static_cast<size_t>(dqk));
        }
        const int64_t n = static_cast<int64_t>(entries.size()) / dqk;
        for (int64_t h = 0; h < p.n_heads; ++h) {
            for (int64_t i = 0; i < dqk; ++i) q[i] = load(p.q, p.q_type, t * p.q_token_stride + h * p.q_head_stride + i);
            const double sink = p.sink ? static_cast<double>(p.sink[h]) : -std::numeric_limits<double>::infinity();
            std::fill(acc.begin(), acc.end(), 0.0);
            double den = 0.0;
            // The rows the contract sends to 0: no listed entry, or σ = +inf. Every other row divides, so a
            // NaN den (non-finite logits, values or sink) gives a NaN output.
            const bool zero = n == 0 || sink == std::numeric_limits<double>::infinity();
            if (!zero) {
                logits.assign(static_cast<size_t>(n), 0.0);
                double m = sink;
                for (int64_t j = 0; j < n; ++j) {
                    double dot = 0.0;
                    for (int64_t i = 0; i < dqk; ++i)
                        dot += static_cast<double>(q[i]) * static_cast<double>(entries[j * dqk + i]);
                    logits[j] = static_cast<double>(p.scale) * dot;
                    m = std::max(m, logits[j]);
                }
                for (int64_t j = 0; j < n; ++j) {
                    const double w = std::exp(logits[j] - m);
                    den += w;
                    for (int64_t i = 0; i < r; ++i) acc[i] += w * static_cast<double>(entries[j * dqk + i]);
                }
                den += std::exp(sink - m);  // exp(−inf) = 0: no sink
            }
            const int64_t o = t * p.out_token_stride + h * p.out_head_stride;
            for (int64_t i = 0; i < r; ++i)
                store(p.out, p.out_type, o + i, zero ? 0.0f : static_cast<float>(acc[i] / den));
        }
    }
    return Status::ok();
}

}  // namespace sieve::ref
