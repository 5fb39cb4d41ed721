// The Lightning Indexer of a CSA layer (deepseek_v4.md §3.6): head weights, indexer queries,
// scores over the request's indexer keys, top-k of width index_topk — or, when no request of the step
// has more than index_topk entries, the short-context fallback that takes every causal entry unscored
// (vLLM `_fill_short_context_topk`; the same selected sets, §3.6).
#include <algorithm>
#include <span>

#include "models/deepseek_v4/layer.h"

namespace sieve::dsv4 {

Status AttentionLayer::select_top_k(const StepBatch& batch, const float* x, const void* qr, StageTimes* times,
                                    SelectionObserver* observer, Scratch& s, int64_t* width) {
    const int64_t N = batch.n_tokens(), D = config_.hidden_size, Rq = config_.q_lora_rank;
    const int64_t HI = config_.index_n_heads, cI = config_.index_head_dim, K = config_.index_topk;
    const int64_t m = spec_.compress_ratio;
    WorkspaceBuffer& ws = s.workspace;

    // [N] causal candidates k < ⌊(p + 1)/m⌋ (§3.6)
    SIEVE_ASSIGN_OR_RETURN(int32_t* n_keys, sized(s.n_keys, N, "indexer candidate counts"));
    for (int64_t t = 0; t < N; ++t) n_keys[t] = static_cast<int32_t>((batch.positions[static_cast<size_t>(t)] + 1) / m);
    int64_t max_seq_len = 0;
    for (const StepRequest& r : batch.requests) max_seq_len = std::max(max_seq_len, r.end());
    // Rows of W = min(K, the most entries a token sees) ids: a row never holds more than its causal
    // entries, and index_topk may be far above any context. A scored step has more than K entries, so W = K.
    const int64_t W = std::min(K, max_seq_len / m);
    *width = W;
    // [N, W] entry ids ascending, then −1
    SIEVE_ASSIGN_OR_RETURN(int32_t* selected, sized(s.selected, N * W, "top-k rows"));

    float* scores = nullptr;  // [N, max_keys] f32 (scored path only)
    int64_t max_keys = 0;
    if (max_seq_len / m <= K) {
        // Short-context fallback: every candidate fits (vLLM: `max_seq_len // 4 <= index_topk`).
        ScopedStageTimer timer(times, Stage::topk);
        for (int64_t t = 0; t < N; ++t)
            for (int64_t j = 0; j < W; ++j) selected[t * W + j] = j < n_keys[t] ? static_cast<int32_t>(j) : -1;
    } else {
        ScopedStageTimer timer(times, Stage::indexer);
        // w_t = weights_proj(x_t) · c_I^-0.5 · H_I^-0.5 (§3.6; transformers scales ReLU(<q, k>) by c_I^-0.5
        // instead: the same value); the op applies the scale (ops/indexer_scores.h weight_scale).
        SIEVE_ASSIGN_OR_RETURN(float* iw, sized(s.index_w, N * HI, "indexer head weights"));  // [N, H_I] f32
        SIEVE_RETURN_IF_ERROR(w_.indexer_weights_proj.run(x, DType::f32, D, iw, DType::f32, HI, N, ws));
        // qI_t = W_Iq · qr_t, rotated at p_t on the last r dims of each head (§3.6).
        SIEVE_ASSIGN_OR_RETURN(void* iq, act_buffer(s.index_q, N * HI * cI, "indexer queries"));  // [N, H_I, c_I] act
        SIEVE_RETURN_IF_ERROR(w_.indexer_wq_b.run(qr, act_, Rq, iq, act_, HI * cI, N, ws));
        SIEVE_RETURN_IF_ERROR(rope(iq, act_, iq, act_, batch.positions.data(), N, HI, cI, false));

        SIEVE_ASSIGN_OR_RETURN(BoundCache keys, bind_cache(batch, caches_.indexer_keys));
        max_keys = max_request_entries(batch, m);
        // [n_requests, max_keys]
        SIEVE_ASSIGN_OR_RETURN(int32_t* key_slots,
                               sized(s.key_slots, batch.n_requests() * max_keys, "indexer key slots"));
        SIEVE_RETURN_IF_ERROR(request_entry_slots(batch, keys, m, max_keys, key_slots));
        // Without an observer nobody needs the scores: the op selects as it scores (ops/indexer_scores.h
        // "Fused selection"), never writing a full row. `sieve check` observes them, so it gets the rows
        // and the separate top-k, which selects the same indices.
        const bool fused = observer == nullptr;
        if (!fused) {
            SIEVE_ASSIGN_OR_RETURN(scores, sized(s.scores, N * max_keys, "indexer scores"));
        }
        IndexerScoresParams ip;
        ip.q = iq;
        ip.q_type = act_;
        ip.q_token_stride = HI * cI;
        ip.q_head_stride = cI;
        ip.weights = iw;
        ip.weights_row_stride = HI;
        ip.weight_scale = static_cast<float>(config_.index_score_scale);  // applied by the op, in fp32
        ip.keys = keys.view;
        ip.key_format = key_layout_.format;
        ip.key_slots = key_slots;
        ip.key_slots_stride = max_keys;
        ip.token_list = batch.token_request.data();
        ip.n_keys = n_keys;
        ip.scores = scores;
        ip.scores_row_stride = max_keys;
        ip.n_tokens = N;
        ip.n_heads = HI;
        ip.head_dim = cI;
        ip.n_lists = batch.n_requests();
        ip.max_keys = max_keys;
        if (fused) {
            ip.selected = selected;
            ip.k = W;
            ip.selected_row_stride = W;
        }
        SIEVE_ASSIGN_OR_RETURN(const Workspace scores_ws,
                               ws.workspace(backend_, backend_.indexer_scores_workspace_size(ip), "the indexer workspace"));
        SIEVE_RETURN_IF_ERROR(backend_.indexer_scores(ip, scores_ws));
        timer.stop();

        if (!fused) {
            ScopedStageTimer topk_timer(times, Stage::topk);
            TopkParams tp;
            tp.scores = scores;
            tp.valid_len = n_keys;
            tp.out = selected;
            tp.n_rows = N;
            tp.n_cols = max_keys;
            tp.k = W;
            tp.scores_row_stride = max_keys;
            tp.out_row_stride = W;
            SIEVE_ASSIGN_OR_RETURN(const Workspace topk_ws,
                                   ws.workspace(backend_, backend_.topk_workspace_size(tp), "the top-k workspace"));
            SIEVE_RETURN_IF_ERROR(backend_.topk(tp, topk_ws));
        }
    }

    if (observer != nullptr)
        for (int64_t t = 0; t < N; ++t) {
            std::span<const float> row;
            if (scores != nullptr) row = std::span<const float>(scores + t * max_keys, static_cast<size_t>(n_keys[t]));
            observer->on_selection(layer_, batch.request_of_token(t), batch.positions[static_cast<size_t>(t)],
                                   std::span<int32_t>(selected + t * W, static_cast<size_t>(W)), row, 1);
        }
    return Status::ok();
}

}  // namespace sieve::dsv4
