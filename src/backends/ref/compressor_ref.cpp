// ref compressor state rows and pooling (ops/compressor.h): one channel at a time, softmax in double.
#include <algorithm>
#include <cmath>
#include <vector>

#include "backends/ref/ref_ops_dsv4.h"
#include "sieve/ops/op_common.h"

namespace sieve::ref {

Status compressor_state_store(const CompressorStateStoreParams& p) {
    SIEVE_RETURN_IF_ERROR(validate_and_check_indices(p));
    for (int64_t t = 0; t < p.n_tokens; ++t) {
        if (p.slots[t] < 0) continue;
        float* row = compressor_state_row(p.state, p.slots[t]);
        const float* ape = p.ape + (p.positions[t] % p.ratio) * p.width;  // §3.4: ape[p mod m]
        for (int64_t i = 0; i < p.width; ++i) {
            row[i] = p.kv[t * p.kv_row_stride + i];
            row[p.width + i] = p.gate[t * p.gate_row_stride + i] + ape[i];
        }
    }
    return Status::ok();
}

Status compressor_pool(const CompressorPoolParams& p) {
    SIEVE_RETURN_IF_ERROR(validate_and_check_indices(p));
    const int64_t c = p.head_dim, m = p.ratio, width = p.width(), n_rows = p.n_rows();
    std::vector<double> a(static_cast<size_t>(n_rows)), b(static_cast<size_t>(n_rows));
    for (int64_t k = 0; k < p.n_entries; ++k) {
        const int32_t* slots = p.gather_slots + k * p.gather_stride;
        for (int64_t e = 0; e < c; ++e) {
            int64_t n = 0;
            for (int64_t j = 0; j < n_rows; ++j) {
                if (slots[j] < 0) continue;
                const float* row = compressor_state_row(p.state, slots[j]);
                const int64_t col = p.overlap && j >= m ? c + e : e;  // Ca half of the previous block, Cb of the own
                a[static_cast<size_t>(n)] = row[col];
                b[static_cast<size_t>(n)] = row[width + col];
                ++n;
            }
            double out = 0.0;
            if (n > 0) {
                const double mx = *std::max_element(b.begin(), b.begin() + n);
                double num = 0.0, den = 0.0;
                for (int64_t j = 0; j < n; ++j) {
                    const double w = std::exp(b[static_cast<size_t>(j)] - mx);
                    num += w * a[static_cast<size_t>(j)];
                    den += w;
                }
                out = num / den;
            }
            p.out[k * p.out_row_stride + e] = static_cast<float>(out);
        }
    }
    return Status::ok();
}

}  // namespace sieve::ref
