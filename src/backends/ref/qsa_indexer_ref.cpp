// ref QSA indexer ops: group pooling (fp32, member order) and the expansion of selected groups to token
// positions, as ops/qsa_pool.h and qsa_expand.h define them (the scores are ops/indexer_scores.h).
#include <algorithm>
#include <vector>

#include "backends/ref/qsa_ref.h"
#include "backends/ref/ref_ops.h"
#include "sieve/ops/op_common.h"

namespace sieve::ref {

Status qsa_pool(const QsaPoolParams& p) {
    SIEVE_RETURN_IF_ERROR(validate_and_check_indices(p));
    for (int64_t g = 0; g < p.n_groups; ++g) {
        for (int64_t i = 0; i < p.head_dim; ++i) {
            float sum = 0.0f;  // fp32, member order (the contract fixes it: bit-identical everywhere)
            for (int64_t j = 0; j < p.ratio; ++j)
                sum += load(p.keys.row(p.member_slots[g * p.ratio + j]), p.key_type, i);
            store(p.out, p.out_type, g * p.out_row_stride + i, sum / static_cast<float>(p.ratio));
        }
    }
    return Status::ok();
}

Status qsa_expand(const QsaExpandParams& p) {
    SIEVE_RETURN_IF_ERROR(validate_and_check_indices(p));
    const int64_t r = p.ratio;
    for (int64_t t = 0; t < p.n_tokens; ++t) {
        const int64_t pos = p.positions[t], len = p.seq_lens[t];
        const int64_t visible = std::min((pos + 1) / r, len / r);
        std::vector<int64_t> groups;
        if (visible <= p.block_topk) {
            for (int64_t g = 0; g < visible; ++g) groups.push_back(g);
        } else {
            for (int64_t j = 0; j < p.block_topk; ++j)
                if (p.sel[t * p.sel_row_stride + j] >= 0) groups.push_back(p.sel[t * p.sel_row_stride + j]);
        }
        std::vector<int64_t> row;
        for (int64_t g : groups)
            for (int64_t j = 0; j < r; ++j) row.push_back(g * r + j);
        for (int64_t pos_j = ((pos + 1) / r) * r; pos_j <= pos; ++pos_j) row.push_back(pos_j);  // the open tail
        int32_t* out = p.out + t * p.out_row_stride;
        int32_t valid = 0;
        for (int64_t c = 0; c < p.out_width; ++c) {
            const int64_t v = c < static_cast<int64_t>(row.size()) ? row[static_cast<size_t>(c)] : -1;
            const bool ok = v >= 0 && v < len;
            out[c] = ok ? static_cast<int32_t>(v) : -1;
            valid += ok ? 1 : 0;
        }
        if (p.out_count) p.out_count[t] = valid;
    }
    return Status::ok();
}

}  // namespace sieve::ref
