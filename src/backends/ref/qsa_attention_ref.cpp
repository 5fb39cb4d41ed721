// ref QSA sparse GQA attention (ops/qsa_sparse_gqa.h): double logits, a two-pass softmax in double
// and the gate, rounded where the contract rounds.
#include <algorithm>
#include <cmath>
#include <vector>

#include "backends/ref/qsa_ref.h"
#include "backends/ref/ref_ops.h"
#include "sieve/ops/op_common.h"

namespace sieve::ref {

Status qsa_sparse_gqa(const QsaSparseGqaParams& p) {
    SIEVE_RETURN_IF_ERROR(validate_and_check_indices(p));
    const int64_t group = p.n_heads / p.n_kv_heads, D = p.head_dim;
    const bool bf16_math = p.math == AttentionMath::bf16;
    std::vector<const uint8_t*> rows;
    std::vector<double> logits, acc(static_cast<size_t>(D));
    for (int64_t t = 0; t < p.n_tokens; ++t) {
        const int64_t q = p.tables.token_request[t];
        rows.clear();
        for (int64_t j = 0; j < p.n_indices; ++j) {
            const int32_t pos = p.indices[t * p.index_row_stride + j];
            if (pos < 0) continue;
            const int64_t block = p.tables.block_table[q * p.tables.block_table_stride + pos / p.kv.block_size];
            rows.push_back(p.kv.row(block * p.kv.block_size + pos % p.kv.block_size));
        }
        for (int64_t h = 0; h < p.n_heads; ++h) {
            const int64_t g = h / group;
            const int64_t qo = t * p.q_token_stride + h * p.q_head_stride;
            logits.assign(rows.size(), 0.0);
            double m = -INFINITY;
            for (size_t j = 0; j < rows.size(); ++j) {
                double d = 0.0;
                for (int64_t i = 0; i < D; ++i)
                    d += static_cast<double>(load(p.q, p.q_type, qo + i)) *
                         static_cast<double>(load(rows[j], p.kv_type, 2 * g * D + i));
                logits[j] = static_cast<double>(p.scale) * d;
                m = std::max(m, logits[j]);
            }
            double denom = 0.0;
            acc.assign(static_cast<size_t>(D), 0.0);
            for (size_t j = 0; j < rows.size(); ++j) {
                const double e = std::exp(logits[j] - m);
                denom += e;
                const double w = bf16_math ? static_cast<double>(round_to_bf16(static_cast<float>(e))) : e;
                for (int64_t i = 0; i < D; ++i)
                    acc[static_cast<size_t>(i)] += w * static_cast<double>(load(rows[j], p.kv_type, (2 * g + 1) * D + i));
            }
            const int64_t go = t * p.gate_token_stride + h * p.gate_head_stride;
            const int64_t oo = t * p.out_token_stride + h * p.out_head_stride;
            for (int64_t i = 0; i < D; ++i) {
                const double o = rows.empty() ? 0.0 : acc[static_cast<size_t>(i)] / denom;
                double y = o;
                if (bf16_math) {
                    const float ob = round_to_bf16(static_cast<float>(o));
                    float yb = ob;
                    if (p.gate) {
                        const double gv = load(p.gate, p.gate_type, go + i);
                        const float s = round_to_bf16(static_cast<float>(1.0 / (1.0 + std::exp(-gv))));
                        yb = round_to_bf16(ob * s);
                    }
                    y = yb;
                } else if (p.gate) {
                    const double gv = load(p.gate, p.gate_type, go + i);
                    y = o / (1.0 + std::exp(-gv));
                }
                store(p.out, p.out_type, oo + i, static_cast<float>(y));
            }
        }
    }
    return Status::ok();
}

}  // namespace sieve::ref
