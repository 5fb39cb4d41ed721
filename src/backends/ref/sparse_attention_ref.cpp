// ref sparse attention: the formulas of ops/sparse_attention.h, one entry at a time (read by load_record),
// the sink as an extra logit with a zero value, sums in double; math bf16 rounds each weight p_j (one chunk,
// the global max).
#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "backends/ref/ref_ops.h"
#include "sieve/ops/op_common.h"

namespace sieve::ref {

Status sparse_attention(const SparseAttentionParams& p) {
    SIEVE_RETURN_IF_ERROR(validate_and_check_indices(p));
    const int64_t dqk = p.qk_dim, dv = p.v_dim;
    const bool bf16_math = p.math == AttentionMath::bf16;  // P_j = bf16(p_j), den unrounded
    std::vector<float> entries;  // [n_listed, dqk] the token's listed entries (main, then extra), dequantized
    std::vector<double> logits, acc(static_cast<size_t>(dv));
    std::vector<float> q(static_cast<size_t>(dqk));
    auto gather = [&](const SparseKvList& l, int64_t t) {
        if (l.width == 0) return;
        const CacheRecordLayout layout = p.layout(l);
        const int32_t* row = l.slots + t * l.slots_stride;
        for (int64_t j = 0; j < l.width; ++j) {
            if (row[j] < 0) continue;
            entries.resize(entries.size() + static_cast<size_t>(dqk));
            load_record(l.cache, layout, row[j], entries.data() + entries.size() - static_cast<size_t>(dqk));
        }
    };
    for (int64_t t = 0; t < p.n_tokens; ++t) {
        entries.clear();
        gather(p.main, t);
        gather(p.extra, t);
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
                    const double e = std::exp(logits[j] - m);
                    den += e;
                    const double w = bf16_math ? static_cast<double>(round_to_bf16(static_cast<float>(e))) : e;
                    for (int64_t i = 0; i < dv; ++i) acc[i] += w * static_cast<double>(entries[j * dqk + i]);
                }
                den += std::exp(sink - m);  // exp(−inf) = 0: no sink
            }
            const int64_t o = t * p.out_token_stride + h * p.out_head_stride;
            for (int64_t i = 0; i < dv; ++i)
                store(p.out, p.out_type, o + i, zero ? 0.0f : static_cast<float>(acc[i] / den));
        }
    }
    return Status::ok();
}

}  // namespace sieve::ref
