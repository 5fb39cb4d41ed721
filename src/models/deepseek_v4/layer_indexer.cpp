// The Lightning Indexer of a CSA layer (deepseek_v4.md §3.6): head weights, indexer queries,
// scores over the request's indexer keys, top-k of width index_topk — or, when no request of the step
// has more than index_topk entries, the short-context fallback that takes every causal entry unscored
// (vLLM `_fill_short_context_topk`; the same selected sets, §3.6), which the selected_slots op does by
// itself. The rows stay on the device; only an observer sees them (on the host).
#include <algorithm>
#include <span>

#include "models/allocation.h"
#include "models/deepseek_v4/layer.h"

namespace sieve::dsv4 {

IndexerScoresParams AttentionLayer::indexer_params(const StepPlan& plan, const PlannedIndexer& ix, const BoundCache& keys,
                                                   bool fused, const LayerScratch& b) const {
    const int64_t HI = config_.index_n_heads, cI = config_.index_head_dim;
    IndexerScoresParams ip;
    ip.q = b.index_q;
    ip.q_type = act_;
    ip.q_token_stride = HI * cI;
    ip.q_head_stride = cI;
    ip.weights = b.index_w;
    ip.weights_token_stride = HI;
    ip.weight_scale = static_cast<float>(config_.index_score_scale);  // applied by the op, in fp32
    ip.keys = keys.view;
    ip.key_format = key_layout_.format;
    ip.n_slots = keys.n_slots;
    ip.tables = ix.tables;
    ip.n_keys = ix.n_keys;
    ip.scores_row_stride = ix.max_keys;
    ip.n_tokens = plan.n_tokens();
    ip.n_heads = HI;
    ip.head_dim = cI;
    ip.n_cols = ix.max_keys;
    if (fused) {
        ip.selected = b.selected;
        ip.k = ix.width;
        ip.selected_row_stride = ix.width;
    } else {
        ip.scores = b.scores;
    }
    return ip;
}

TopkParams AttentionLayer::topk_params(const StepPlan& plan, const PlannedIndexer& ix, const LayerScratch& b) const {
    TopkParams tp;
    tp.scores = b.scores;
    tp.valid_len = ix.n_keys;
    tp.out = b.selected;
    tp.n_rows = plan.n_tokens();
    tp.n_cols = ix.max_keys;
    tp.k = ix.width;
    tp.scores_row_stride = ix.max_keys;
    tp.out_row_stride = ix.width;
    return tp;
}

Status AttentionLayer::select_top_k(const StepBatch& batch, const StepPlan& plan, const PlannedIndexer& ix,
                                    const float* x, StageTimes* times, SelectionObserver* observer,
                                    const LayerScratch& b, Scratch& s, const int32_t** rows) {
    const int64_t N = batch.n_tokens(), D = config_.hidden_size, Rq = config_.q_lora_rank;
    const int64_t HI = config_.index_n_heads, cI = config_.index_head_dim;
    *rows = b.selected;
    if (!ix.scored) {
        // Short-context fallback: every candidate fits (vLLM: `max_seq_len // 4 <= index_topk`). The
        // selected_slots op takes every visible entry itself; an observer is shown the explicit rows.
        ScopedStageTimer timer(times, Stage::topk);
        if (observer == nullptr) {
            *rows = nullptr;
            return Status::ok();
        }
        return observe_selection(batch, ix, *observer, b, s);
    }

    // Without an observer nobody needs the scores: the op selects as it scores (ops/indexer_scores.h
    // "Fused selection"), never writing a full row. `sieve check` observes them, so it gets the rows
    // and the separate top-k, which selects the same indices.
    const bool fused = observer == nullptr;
    {
        ScopedStageTimer timer(times, Stage::indexer);
        // w_t = weights_proj(x_t) · c_I^-0.5 · H_I^-0.5 (§3.6; transformers scales ReLU(<q, k>) by c_I^-0.5
        // instead: the same value); the op applies the scale (ops/indexer_scores.h weight_scale).
        SIEVE_RETURN_IF_ERROR(w_.indexer_weights_proj.run(x, DType::f32, D, b.index_w, DType::f32, HI, N, b.op));
        // qI_t = W_Iq · qr_t, rotated at p_t on the last r dims of each head (§3.6).
        SIEVE_RETURN_IF_ERROR(w_.indexer_wq_b.run(b.qr, act_, Rq, b.index_q, act_, HI * cI, N, b.op));
        SIEVE_RETURN_IF_ERROR(rope(b.index_q, act_, b.index_q, act_, plan.positions(), N, HI, cI, false));
        SIEVE_ASSIGN_OR_RETURN(BoundCache keys, bind_cache(batch, caches_.indexer_keys));
        SIEVE_RETURN_IF_ERROR(backend_.indexer_scores(indexer_params(plan, ix, keys, fused, b), b.op));
    }
    if (fused) return Status::ok();
    {
        ScopedStageTimer timer(times, Stage::topk);
        SIEVE_RETURN_IF_ERROR(backend_.topk(topk_params(plan, ix, b), b.op));
    }
    return observe_selection(batch, ix, *observer, b, s);
}

Status AttentionLayer::observe_selection(const StepBatch& batch, const PlannedIndexer& ix, SelectionObserver& observer,
                                         const LayerScratch& b, Scratch& s) {
    const int64_t N = batch.n_tokens(), W = ix.width, K = ix.max_keys;
    const size_t row_bytes = static_cast<size_t>(N * W) * sizeof(int32_t);
    SIEVE_RETURN_IF_ERROR(scratch_resize(s.observed_rows, N * W, "observed selection rows"));
    int32_t* rows = s.observed_rows.data();
    const bool with_scores = ix.scored && observer.wants_scores();
    if (ix.scored) {
        SIEVE_RETURN_IF_ERROR(scratch_resize(s.observed_scores, with_scores ? N * K : 0, "observed indexer scores"));
        if (row_bytes > 0) SIEVE_RETURN_IF_ERROR(s.arena.download(backend_, b.selected, rows, row_bytes));
        if (N * K > 0 && with_scores)
            SIEVE_RETURN_IF_ERROR(s.arena.download(backend_, b.scores, s.observed_scores.data(),
                                                   static_cast<size_t>(N * K) * sizeof(float)));
    } else {
        // What the fallback selects: every causal entry, ascending, then −1.
        for (int64_t t = 0; t < N; ++t)
            for (int64_t j = 0; j < W; ++j)
                rows[t * W + j] = j < ix.candidates[static_cast<size_t>(t)] ? static_cast<int32_t>(j) : -1;
    }
    for (int64_t t = 0; t < N; ++t) {
        std::span<const float> scores;
        if (with_scores)
            scores = std::span<const float>(s.observed_scores.data() + t * K,
                                            static_cast<size_t>(ix.candidates[static_cast<size_t>(t)]));
        observer.on_selection(layer_, batch.request_of_token(t), batch.positions[static_cast<size_t>(t)],
                              std::span<int32_t>(rows + t * W, static_cast<size_t>(W)), scores, 1);
    }
    // The observer may have replaced rows (sieve check does for exact ties): attention reads what it left.
    if (row_bytes > 0) SIEVE_RETURN_IF_ERROR(s.arena.upload(backend_, b.selected, rows, row_bytes));
    return Status::ok();
}

}  // namespace sieve::dsv4
