// ref sparse MQA with sink (ops/sparse_mqa.h): per token, per head, the listed rows' logits in
// double, the sink as an extra logit with a zero value, a plain softmax-weighted sum.
#include <algorithm>
#include <cmath>
#include <vector>

#include "backends/ref/ref_ops.h"
#include "backends/ref/ref_ops_dsv4.h"
#include "ops/cache_record.h"
#include "ops/cache_view.h"
#include "ops/op_common.h"
#include "ops/sparse_mqa.h"

namespace sieve::ref {

Status sparse_mqa(const SparseMqaParams& p) {
    SIEVE_RETURN_IF_ERROR(validate_and_check_indices(p));
    const int64_t d = p.head_dim;
    std::vector<float> rows;  // [n_rows, d] the token's listed rows, dequantized
    std::vector<double> logits, acc(static_cast<size_t>(d));
    for (int64_t t = 0; t < p.n_tokens; ++t) {
        rows.clear();
        auto gather = [&](const CacheView& cv, const CacheRecordLayout& l, const int32_t* slots, int64_t n) {
            for (int64_t j = 0; j < n; ++j) {
                if (slots[j] < 0) continue;
                rows.resize(rows.size() + static_cast<size_t>(d));
                load_record(cv, l, slots[j], rows.data() + rows.size() - static_cast<size_t>(d));
            }
        };
        if (p.n_window > 0) gather(p.window, p.window_layout(), p.window_slots + t * p.window_slots_stride, p.n_window);
        if (p.n_compressed > 0)
            gather(p.compressed, p.compressed_layout(), p.compressed_slots + t * p.compressed_slots_stride, p.n_compressed);
        const int64_t n = static_cast<int64_t>(rows.size()) / d;
        logits.assign(static_cast<size_t>(n), 0.0);
        for (int64_t h = 0; h < p.n_heads; ++h) {
            const int64_t qo = t * p.q_token_stride + h * p.q_head_stride;
            const int64_t oo = t * p.out_token_stride + h * p.out_head_stride;
            if (n == 0) {  // no valid row: o = 0 (§3.8)
                for (int64_t i = 0; i < d; ++i) store(p.out, p.out_type, oo + i, 0.0f);
                continue;
            }
            double m = p.sink ? static_cast<double>(p.sink[h]) : -INFINITY;
            for (int64_t j = 0; j < n; ++j) {
                double dot = 0.0;
                for (int64_t i = 0; i < d; ++i)
                    dot += static_cast<double>(load(p.q, p.q_type, qo + i)) * rows[static_cast<size_t>(j * d + i)];
                logits[static_cast<size_t>(j)] = static_cast<double>(p.scale) * dot;
                m = std::max(m, logits[static_cast<size_t>(j)]);
            }
            double denom = p.sink ? std::exp(static_cast<double>(p.sink[h]) - m) : 0.0;
            std::fill(acc.begin(), acc.end(), 0.0);
            for (int64_t j = 0; j < n; ++j) {
                const double w = std::exp(logits[static_cast<size_t>(j)] - m);
                denom += w;
                for (int64_t i = 0; i < d; ++i) acc[static_cast<size_t>(i)] += w * rows[static_cast<size_t>(j * d + i)];
            }
            for (int64_t i = 0; i < d; ++i)
                store(p.out, p.out_type, oo + i, static_cast<float>(acc[static_cast<size_t>(i)] / denom));
        }
    }
    return Status::ok();
}

}  // namespace sieve::ref
