// ref QSA indexer ops: group pooling (fp32, member order), scores (double sums, one rounding) and
// the expansion of selected groups to token positions, as ops/qsa_pool.h, qsa_score.h and
// qsa_expand.h define them.
#include <algorithm>
#include <vector>

#include "backends/ref/qsa_ref.h"
#include "backends/ref/ref_ops.h"
#include "ops/op_common.h"

namespace sieve::ref {

namespace {

// Bytes of entry `e` of request row `q` (ops/block_tables.h).
const uint8_t* entry_row(const CacheView& v, const BlockTables& t, int64_t q, int64_t e) {
    const int64_t block = t.block_table[q * t.block_table_stride + e / v.block_size];
    return v.row(block * v.block_size + e % v.block_size);
}

}  // namespace

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

Status qsa_score(const QsaScoreParams& p) {
    SIEVE_RETURN_IF_ERROR(validate_and_check_indices(p));
    // The fused selection is the plain top-k over this backend's scores (a full row: ref is the oracle).
    std::vector<float> own_scores;
    int64_t scores_row_stride = p.scores_row_stride;
    float* scores = indexer_score_rows(p.scores, &scores_row_stride, p.selected != nullptr, p.n_tokens, p.n_cols, own_scores);
    for (int64_t t = 0; t < p.n_tokens; ++t) {
        const int64_t q = p.tables.token_request[t];
        for (int64_t g = 0; g < p.n_groups[t]; ++g) {
            const uint8_t* k = entry_row(p.keys, p.tables, q, g);
            double total = 0.0;
            for (int64_t h = 0; h < p.n_heads; ++h) {
                double d = 0.0;
                for (int64_t i = 0; i < p.head_dim; ++i)
                    d += static_cast<double>(load(p.q, p.q_type, t * p.q_token_stride + h * p.q_head_stride + i)) *
                         static_cast<double>(load(k, p.key_type, i));
                total += std::max(d, 0.0);  // ReLU per head, then the sum over heads (§4.4)
            }
            scores[t * scores_row_stride + g] = static_cast<float>(static_cast<double>(p.scale) * total);
        }
    }
    if (p.selected == nullptr || p.n_tokens == 0) return Status::ok();
    return select_from_scores(scores, scores_row_stride, p.n_groups, p.n_tokens, p.n_cols, p.selected, p.k,
                              p.selected_row_stride);
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
