// The forward of one DSA-on-MLA layer over a step (specs/dsa_mla.md §2.10 order, §2.12 compact form):
// projections and latent cache write, indexer and top-k (full layers) or the source layer's top-k
// (shared layers), absorbed sparse MLA attention with the sink, W_UV, gate and o_proj.
#include <algorithm>
#include <cmath>
#include <span>

#include <fmt/format.h>

#include "models/allocation.h"
#include "models/dsa_mla/model_impl.h"
#include "sieve/ops/cache_record.h"
#include "sieve/ops/cache_store.h"
#include "sieve/ops/dsa_output_gate.h"
#include "sieve/ops/hadamard.h"
#include "sieve/ops/indexer_scores.h"
#include "sieve/ops/layer_norm.h"
#include "sieve/ops/mla_head_proj.h"
#include "sieve/ops/quant_fp8.h"
#include "sieve/ops/rms_norm.h"
#include "sieve/ops/rope.h"
#include "sieve/ops/selected_slots.h"
#include "sieve/ops/sparse_attention.h"
#include "sieve/ops/topk.h"

namespace sieve::dsa_mla {

namespace {

// Scores of one indexer chunk: at most this many floats (rows × candidates), as vLLM bounds its logits
// buffer (dsa_mla.md §4.2); a single row always fits.
constexpr int64_t kScoreBudgetFloats = int64_t{1} << 24;

void* at(void* base, DType t, int64_t elements) { return static_cast<char*>(base) + elements * static_cast<int64_t>(dtype_size(t)); }

size_t bytes(int64_t n, DType t) { return static_cast<size_t>(n) * dtype_size(t); }

// Calls the observer for tokens [t0, t1) on their host rows `rows` [t1 − t0, W]; with fill_unscored, the rows
// of unscored tokens (n_keys == 0) first get every causal position, oldest first, then −1 (what attention
// reads for them, §2.7, and what an observer always saw). scores_of(t): token t's scores, empty if unscored.
template <typename ScoresOf>
void observe_rows(SelectionObserver& observer, int64_t layer, const StepBatch& batch, const StepPlan& plan, int64_t t0,
                  int64_t t1, std::span<int32_t> rows, bool fill_unscored, ScoresOf&& scores_of) {
    const auto W = static_cast<size_t>(plan.width);
    for (int64_t t = t0; t < t1; ++t) {
        const std::span<int32_t> row = rows.subspan(static_cast<size_t>(t - t0) * W, W);
        const int64_t pos = batch.positions[static_cast<size_t>(t)];
        if (fill_unscored && plan.n_keys[static_cast<size_t>(t)] == 0)
            for (size_t j = 0; j < W; ++j) row[j] = static_cast<int64_t>(j) <= pos ? static_cast<int32_t>(j) : -1;
        observer.on_selection(layer, batch.request_of_token(t), pos, row, scores_of(t), 1);
    }
}

// RoPE of a [n_tokens, n_heads, head_dim] view in place (ops/rope.h), the positions of the step.
RopeParams rope_in_place(void* x, DType t, int64_t n_tokens, int64_t n_heads, int64_t head_dim, int64_t token_stride,
                         int64_t head_stride, const StepPlan& plan, const RopeTable& table, int64_t rot_dim,
                         RopeConfigPairing pairing, RopeConfigSlice slice) {
    RopeParams p;
    p.x = x;
    p.y = x;
    p.positions = plan.positions;
    p.positions_type = DType::i64;
    p.inv_freq = table.inv_freq.as<float>();
    p.n_tokens = n_tokens;
    p.n_heads = n_heads;
    p.head_dim = head_dim;
    p.rot_dim = rot_dim;
    p.x_token_stride = p.y_token_stride = token_stride;
    p.x_head_stride = p.y_head_stride = head_stride;
    p.attention_factor = table.attention_factor;
    p.pairing = pairing == RopeConfigPairing::interleaved ? RopePairing::interleaved : RopePairing::half_split;
    p.slice = slice == RopeConfigSlice::first ? RopeSlice::first : RopeSlice::last;
    p.x_type = p.y_type = t;
    return p;
}

}  // namespace

Status Model::head_proj(const DeviceTensor& weight, const void* x, int64_t x_token_stride, int64_t x_head_stride, void* y,
                        int64_t y_token_stride, int64_t y_head_stride, int64_t n_tokens, int64_t n_heads, int64_t in,
                        int64_t out) {
    MlaHeadProjParams p;
    p.x = x;
    p.w = weight.data();
    p.y = y;
    p.n_tokens = n_tokens;
    p.n_heads = n_heads;
    p.in_features = in;
    p.out_features = out;
    p.x_token_stride = x_token_stride;
    p.x_head_stride = x_head_stride;
    p.y_token_stride = y_token_stride;
    p.y_head_stride = y_head_stride;
    p.math = act_type_ == DType::bf16 ? LinearMath::bf16 : LinearMath::f32;
    p.x_type = p.y_type = act_type_;
    p.w_type = weight.dtype();
    SIEVE_ASSIGN_OR_RETURN(const Workspace ws,
                           op_workspace_.workspace(backend_, backend_.mla_head_proj_workspace_size(p),
                                                   "the head projection workspace"));
    return backend_.mla_head_proj(p, ws);
}

Status Model::project(const LayerWeights& w, const StepPlan& plan, int64_t T, int64_t layer_pos, const float* input) {
    const DsaMlaConfig& c = config_;
    const DType a = act_type_;
    const int64_t D = c.hidden_size, H = c.num_attention_heads, Rq = c.q_lora_rank;
    const int64_t R = c.kv_lora_rank, Dr = c.qk_rope_head_dim, Dn = c.qk_nope_head_dim, Dqk = c.qk_head_dim;
    const int64_t w1 = R + Dr;

    // q_c_raw = x·W_qaᵀ, [c_raw | kr] = x·W_kvaᵀ (§2.1)
    SIEVE_ASSIGN_OR_RETURN(void* qc, q_c_.reserve(backend_, bytes(T * Rq, a), "q_c"));  // [T, Rq]
    SIEVE_ASSIGN_OR_RETURN(void* ckv, ckv_.reserve(backend_, bytes(T * w1, a), "ckv"));  // [T, R + Dr]
    SIEVE_RETURN_IF_ERROR(w.q_a.run(input, DType::f32, D, qc, a, Rq, T, op_workspace_));
    SIEVE_RETURN_IF_ERROR(w.kv_a.run(input, DType::f32, D, ckv, a, w1, T, op_workspace_));
    // q_c = RMSNorm(q_c_raw), c = RMSNorm(c_raw), in place; eps = latent_norm_eps ("Decisions for sieve")
    RmsNormParams n;
    n.x = n.y = qc;
    n.weight = w.q_a_norm.as<float>();
    n.n_tokens = T;
    n.dim = Rq;
    n.x_token_stride = n.y_token_stride = Rq;
    n.x_head_stride = n.y_head_stride = Rq;
    n.eps = static_cast<float>(c.latent_norm_eps);
    n.x_type = n.y_type = a;
    SIEVE_RETURN_IF_ERROR(backend_.rms_norm(n));
    n.x = n.y = ckv;
    n.weight = w.kv_a_norm.as<float>();
    n.dim = n.x_head_stride = n.y_head_stride = R;
    n.x_token_stride = n.y_token_stride = w1;
    SIEVE_RETURN_IF_ERROR(backend_.rms_norm(n));
    // RoPE(kr), interleaved on its Dr dims (§2.2)
    SIEVE_RETURN_IF_ERROR(backend_.rope(
        rope_in_place(at(ckv, a, R), a, T, 1, Dr, w1, Dr, plan, rope_, Dr, c.rope_mla.pairing, RopeConfigSlice::last)));

    // q = q_c·W_qbᵀ viewed [T, H, Dqk] = [q_nope | q_pe] (§2.1)
    SIEVE_ASSIGN_OR_RETURN(void* q, q_.reserve(backend_, bytes(T * H * Dqk, a), "q"));  // [T, H, Dqk]
    SIEVE_RETURN_IF_ERROR(w.q_b.run(qc, a, Rq, q, a, H * Dqk, T, op_workspace_));
    // q_mqa = [q_nope·W_UK | RoPE(q_pe)] (§2.5): the rope part written straight into q_mqa's last Dr dims.
    SIEVE_ASSIGN_OR_RETURN(void* qm, q_mqa_.reserve(backend_, bytes(T * H * (R + Dr), a), "q_mqa"));  // [T, H, R + Dr]
    RopeParams rp = rope_in_place(at(q, a, Dn), a, T, H, Dr, H * Dqk, Dqk, plan, rope_, Dr,
                                  c.rope_mla.pairing, RopeConfigSlice::last);
    rp.y = at(qm, a, R);
    rp.y_token_stride = H * (R + Dr);
    rp.y_head_stride = R + Dr;
    SIEVE_RETURN_IF_ERROR(backend_.rope(rp));
    // llama_4_scaling (§2.2) is never passed by Hy4's decoder: nothing to do.
    SIEVE_RETURN_IF_ERROR(head_proj(w.w_uk, q, H * Dqk, Dqk, qm, H * (R + Dr), R + Dr, T, H, Dn, R));

    // Latent cache entries [c | RoPE(kr)] of the step's tokens (§2.5, §3.4), before attention reads them:
    // ckv's rows as they are (no bf16 rounding before the quantization).
    return backend_.cache_store(whole_row_store(ckv, a, w1, T, plan.latent_slots, plan.latent->view(layer_pos),
                                                plan.latent->n_slots(), latent_layout_));
}

Status Model::run_indexer(const LayerWeights& w, const StepBatch& batch, const StepPlan& plan, int64_t layer_pos,
                          const float* input, StepSelection& selection, StageTimes* times) {
    const DsaMlaConfig& c = config_;
    const DType a = act_type_;
    const bool fp8 = key_layout_.format == CacheRecordFormat::fp8_row_scale;
    const int64_t T = batch.n_tokens(), D = c.hidden_size, Rq = c.q_lora_rank;
    const int64_t Dr = c.qk_rope_head_dim, Hi = c.index_n_heads, Di = c.index_head_dim;
    // Row width W ≤ K (StepPlan::width): a scored row has more than K candidates, so W = K whenever a row
    // is scored.
    const int64_t W = plan.width;
    const int64_t wk = Di + Hi;
    const int64_t index_slot = indexer_slot_[static_cast<size_t>(layer_pos)];
    void* iq = nullptr;        // [T, Hi, Di] act
    float* kw = nullptr;       // [T, Di + Hi] f32: [k_raw | head weights]
    uint8_t* q8 = nullptr;     // [T, Hi, Di] e4m3 (deployed)
    float* q_scale = nullptr;  // [T, Hi] (deployed)
    {
        ScopedStageTimer timer(times, Stage::indexer);
        // qI = q_c·W_iqᵀ, [kI_raw | w] = x·[W_ik ; W_iw]ᵀ (§2.6)
        SIEVE_ASSIGN_OR_RETURN(void* qc, q_c_.reserve(backend_, bytes(T * Rq, a), "q_c"));  // q_c from project()
        SIEVE_ASSIGN_OR_RETURN(iq, idx_q_.reserve(backend_, bytes(T * Hi * Di, a), "idx_q"));
        SIEVE_RETURN_IF_ERROR(w.indexer_wq_b.run(qc, a, Rq, iq, a, Hi * Di, T, op_workspace_));
        SIEVE_ASSIGN_OR_RETURN(void* kw_raw, idx_kw_.reserve(backend_, bytes(T * wk, DType::f32), "idx_kw"));
        kw = static_cast<float*>(kw_raw);
        SIEVE_RETURN_IF_ERROR(w.indexer_wk_weights.run(input, DType::f32, D, kw, DType::f32, wk, T, op_workspace_));
        // kI = LayerNorm(x·W_ikᵀ; γ, β, eps) (§2.6, eps "Decisions for sieve")
        SIEVE_ASSIGN_OR_RETURN(void* k, idx_k_.reserve(backend_, bytes(T * Di, a), "idx_k"));  // [T, Di]
        LayerNormParams ln;
        ln.x = kw;
        ln.y = k;
        ln.weight = w.k_norm_weight.as<float>();
        ln.bias = w.k_norm_bias.as<float>();
        ln.n_tokens = T;
        ln.dim = Di;
        ln.x_token_stride = wk;
        ln.y_token_stride = Di;
        ln.x_head_stride = ln.y_head_stride = Di;
        ln.eps = static_cast<float>(c.indexer_key_norm_eps);
        ln.x_type = DType::f32;
        ln.y_type = a;
        SIEVE_RETURN_IF_ERROR(backend_.layer_norm(ln));
        // RoPE on the indexer rope slice: V3.2 NeoX on the first Dr dims, Hy4 interleaved on the last (§2.2).
        SIEVE_RETURN_IF_ERROR(backend_.rope(rope_in_place(iq, a, T, Hi, Di, Hi * Di, Di, plan, rope_, Dr,
                                                          c.rope_indexer.pairing, c.rope_indexer.slice)));
        SIEVE_RETURN_IF_ERROR(backend_.rope(rope_in_place(k, a, T, 1, Di, Di, Di, plan, rope_,
                                                          Dr, c.rope_indexer.pairing, c.rope_indexer.slice)));
        if (hadamard_) {  // deployed deepseek_v32: H_Di / sqrt(Di) on q and k before FP8 (§3.5)
            HadamardParams hp;
            hp.x = hp.y = iq;
            hp.n_tokens = T;
            hp.n_heads = Hi;
            hp.dim = Di;
            hp.x_token_stride = hp.y_token_stride = Hi * Di;
            hp.x_head_stride = hp.y_head_stride = Di;
            hp.scale = static_cast<float>(1.0 / std::sqrt(static_cast<double>(Di)));
            hp.x_type = hp.y_type = a;
            SIEVE_RETURN_IF_ERROR(backend_.hadamard(hp));
            hp.x = hp.y = k;
            hp.n_heads = 1;
            hp.x_token_stride = hp.y_token_stride = Di;
            SIEVE_RETURN_IF_ERROR(backend_.hadamard(hp));
        }
        if (fp8) {  // qI → e4m3 with one UE8M0 scale per (token, head) (§2.6 "FP8 execution", §3.2)
            SIEVE_ASSIGN_OR_RETURN(void* q8_raw, idx_q8_.reserve(backend_, bytes(T * Hi * Di, DType::u8), "idx_q8"));
            SIEVE_ASSIGN_OR_RETURN(void* qs_raw,
                                   idx_q_scale_.reserve(backend_, bytes(T * Hi, DType::f32), "idx_q_scale"));
            q8 = static_cast<uint8_t*>(q8_raw);
            q_scale = static_cast<float*>(qs_raw);
            QuantFp8Params qp;
            qp.x = iq;
            qp.q = q8;
            qp.scale_f32 = q_scale;
            qp.n_tokens = T;
            qp.n_heads = Hi;
            qp.dim = Di;
            qp.group_size = Di;
            qp.x_token_stride = qp.q_token_stride = Hi * Di;
            qp.x_head_stride = qp.q_head_stride = Di;
            qp.scale_token_stride = Hi;
            qp.scale_head_stride = 1;
            qp.x_type = a;
            SIEVE_RETURN_IF_ERROR(backend_.quant_fp8(qp));
        }
        // The step's keys enter the indexer cache before scoring: candidates are 0..p inclusive (§2.7).
        // Quantized as they are (no bf16 rounding first, §3.3).
        SIEVE_RETURN_IF_ERROR(backend_.cache_store(whole_row_store(k, a, Di, T, plan.indexer_slots,
                                                                   plan.indexer->view(index_slot),
                                                                   plan.indexer->n_slots(), key_layout_)));
    }

    // Selection: rows with p + 1 ≤ K take every causal token (sparse = dense, §2.7) without scoring
    // (selected_slots reads them as n_keys == 0 rows, StepSelection); the others are scored and cut to their
    // top K, in chunks that bound the scores buffer; every row is W wide. Without an observer nobody needs
    // the scores: the op selects as it scores (ops/indexer_scores.h "Fused selection") and no score row is
    // written; the observed path (`sieve check`) selects the same.
    const bool fused = observer_ == nullptr;
    SIEVE_ASSIGN_OR_RETURN(void* rows_raw,
                           selection.buffer.reserve(backend_, bytes(T * W, DType::i32), "the top-k rows"));
    selection.rows = static_cast<int32_t*>(rows_raw);  // [T, W]
    selection.step = plan.serial;
    selection.explicit_unscored = !fused;
    selection.scores.clear();
    selection.score_begin.assign(fused ? 0 : static_cast<size_t>(T + 1), 0);
    const std::vector<int32_t>& n_keys = plan.n_keys;
    for (int64_t r0 = 0; r0 < T;) {
        int64_t r1 = r0, n_cols = 0;
        while (r1 < T) {
            const int64_t cols = std::max<int64_t>(n_cols, n_keys[static_cast<size_t>(r1)]);
            if (r1 > r0 && (r1 - r0 + 1) * cols > kScoreBudgetFloats) break;
            n_cols = cols;
            ++r1;
        }
        const int64_t rows = r1 - r0;
        float* scores = nullptr;  // [rows, n_cols]
        if (n_cols > 0) {
            if (!fused) {
                SIEVE_ASSIGN_OR_RETURN(void* s_raw,
                                       scores_.reserve(backend_, bytes(rows * n_cols, DType::f32), "scores"));
                scores = static_cast<float*>(s_raw);
            }
            {
                ScopedStageTimer timer(times, Stage::indexer);
                IndexerScoresParams sp;
                sp.q = fp8 ? static_cast<const void*>(q8 + r0 * Hi * Di) : at(iq, a, r0 * Hi * Di);
                sp.q_type = fp8 ? DType::f8_e4m3 : a;
                sp.q_token_stride = Hi * Di;
                sp.q_head_stride = Di;
                sp.q_scale = fp8 ? q_scale + r0 * Hi : nullptr;
                sp.q_scale_token_stride = Hi;
                sp.weights = kw + r0 * wk + Di;
                sp.weights_token_stride = wk;
                // Hi^-0.5 on the head weights and Di^-0.5 on the dot products (§2.6), folded together.
                sp.weight_scale = static_cast<float>(c.indexer_head_weight_scale * c.indexer_softmax_scale);
                sp.keys = plan.indexer->view(index_slot);
                sp.key_format = key_layout_.format;
                sp.n_slots = plan.indexer->n_slots();
                sp.tables = plan.indexer_tables;
                sp.tables.token_request += r0;
                sp.n_keys = plan.n_keys_device + r0;
                sp.scores = scores;
                sp.n_tokens = rows;
                sp.n_heads = Hi;
                sp.head_dim = Di;
                sp.n_cols = n_cols;
                sp.scores_row_stride = n_cols;
                if (fused) {
                    sp.selected = selection.rows + r0 * W;
                    sp.k = W;
                    sp.selected_row_stride = W;
                }
                SIEVE_ASSIGN_OR_RETURN(const Workspace ws,
                                       op_workspace_.workspace(backend_, backend_.indexer_scores_workspace_size(sp),
                                                               "the indexer workspace"));
                SIEVE_RETURN_IF_ERROR(backend_.indexer_scores(sp, ws));
            }
            if (!fused) {
                ScopedStageTimer timer(times, Stage::topk);
                TopkParams tp;
                tp.scores = scores;
                tp.valid_len = plan.n_keys_device + r0;
                tp.out = selection.rows + r0 * W;
                tp.n_rows = rows;
                tp.n_cols = n_cols;
                tp.k = W;
                tp.scores_row_stride = n_cols;
                tp.out_row_stride = W;
                SIEVE_ASSIGN_OR_RETURN(const Workspace ws, op_workspace_.workspace(backend_, backend_.topk_workspace_size(tp),
                                                                                  "the top-k workspace"));
                SIEVE_RETURN_IF_ERROR(backend_.topk(tp, ws));
            }
        }
        if (observer_) {
            // The one readback of a step: the chunk's rows and scores to the host, the observer's rows back
            // before attention reads them (its changes reach the shared layers too, as they reuse these rows).
            int32_t* chunk_rows = selection.rows + r0 * W;  // [rows, W]
            const size_t row_bytes = bytes(rows * W, DType::i32);
            SIEVE_RETURN_IF_ERROR(scratch_resize(observed_rows_, rows * W, "the observed top-k rows"));
            SIEVE_RETURN_IF_ERROR(
                scratch_resize(observed_scores_, observer_->wants_scores() ? rows * n_cols : 0, "the observed scores"));
            SIEVE_RETURN_IF_ERROR(selection.buffer.download(backend_, chunk_rows, observed_rows_.data(), row_bytes));
            const bool with_scores = observer_->wants_scores();
            if (n_cols > 0 && with_scores)
                SIEVE_RETURN_IF_ERROR(scores_.download(backend_, scores, observed_scores_.data(),
                                                       bytes(rows * n_cols, DType::f32)));
            observe_rows(*observer_, w.layer, batch, plan, r0, r1, observed_rows_, true, [&](int64_t t) {
                if (!with_scores) return std::span<const float>();
                const int32_t n = n_keys[static_cast<size_t>(t)];
                const std::span<const float> row_scores(observed_scores_.data() + (t - r0) * n_cols,
                                                        static_cast<size_t>(n));
                selection.scores.insert(selection.scores.end(), row_scores.begin(), row_scores.end());
                selection.score_begin[static_cast<size_t>(t + 1)] = static_cast<int64_t>(selection.scores.size());
                return row_scores;
            });
            SIEVE_RETURN_IF_ERROR(selection.buffer.upload(backend_, chunk_rows, observed_rows_.data(), row_bytes));
        }
        r0 = r1;
    }
    return Status::ok();
}

Expected<const StepSelection*> Model::reuse_selection(const LayerWeights& w, const StepBatch& batch,
                                                       const StepPlan& plan) {
    auto it = source_selections_.find(w.topk_source_layer);
    if (it == source_selections_.end() || it->second.step != plan.serial || it->second.rows == nullptr)
        return internal_error("{}: shared layer {} reuses the top-k of layer {} (dsa_mla.md §1.3), which did not run "
                              "in this step before it",
                              model_type_, w.layer, w.topk_source_layer);
    const StepSelection& source = it->second;
    if (!observer_) return &source;  // read in place
    // The observer may change the rows it sees: it gets a copy, and the source's rows stay as the source
    // layer left them for the shared layers after this one.
    const int64_t T = batch.n_tokens(), W = plan.width;
    const size_t row_bytes = bytes(T * W, DType::i32);
    SIEVE_RETURN_IF_ERROR(scratch_resize(observed_rows_, T * W, "the observed top-k rows"));
    SIEVE_RETURN_IF_ERROR(source.buffer.download(backend_, source.rows, observed_rows_.data(), row_bytes));
    const bool have_scores = source.score_begin.size() == static_cast<size_t>(T + 1);
    observe_rows(*observer_, w.layer, batch, plan, 0, T, observed_rows_, !source.explicit_unscored, [&](int64_t t) {
        if (!have_scores) return std::span<const float>();
        const auto b = static_cast<size_t>(source.score_begin[static_cast<size_t>(t)]);
        const auto e = static_cast<size_t>(source.score_begin[static_cast<size_t>(t + 1)]);
        return std::span<const float>(source.scores.data() + b, e - b);
    });
    StepSelection& copy = observed_shared_selection_;
    SIEVE_ASSIGN_OR_RETURN(void* rows_raw, copy.buffer.reserve(backend_, row_bytes, "the observed top-k rows"));
    copy.rows = static_cast<int32_t*>(rows_raw);
    copy.step = plan.serial;
    copy.explicit_unscored = true;
    SIEVE_RETURN_IF_ERROR(copy.buffer.upload(backend_, copy.rows, observed_rows_.data(), row_bytes));
    return &copy;
}

Status Model::attend(const LayerWeights& w, const StepPlan& plan, int64_t T, int64_t layer_pos,
                     const StepSelection& selection) {
    const DsaMlaConfig& c = config_;
    const DType a = act_type_;
    const int64_t H = c.num_attention_heads, R = c.kv_lora_rank, Dr = c.qk_rope_head_dim;
    const int64_t K = plan.width;  // the step's row width (≤ index_topk)
    // Request-local positions → global latent-cache slots (§4.3) on the device; entries past the token's
    // own position (as reference top-k rows list them for early tokens, §2.7) and −1 mean "none". Unscored
    // rows take every causal position unless the rows list them (StepSelection::explicit_unscored).
    SIEVE_ASSIGN_OR_RETURN(void* slots_raw, attn_slots_.reserve(backend_, bytes(T * K, DType::i32), "attn_slots"));
    int32_t* slots = static_cast<int32_t*>(slots_raw);  // [T, K]
    SelectedSlotsParams sl;
    sl.selected = selection.rows;
    sl.n_scored = selection.explicit_unscored ? nullptr : plan.n_keys_device;
    sl.positions = plan.positions;
    sl.tables = plan.latent_tables;
    sl.slots = slots;
    sl.n_tokens = T;
    sl.width = K;
    sl.ratio = 1;  // one latent entry per token
    sl.block_size = plan.latent->block_size();
    sl.n_slots = plan.latent->n_slots();
    sl.selected_row_stride = sl.slots_row_stride = K;
    if (Status s = backend_.selected_slots(sl); !s.is_ok())
        return s.with_context(
            fmt::format("{} layer {}: the latent-cache slots of its selection", model_type_, w.layer));
    SIEVE_ASSIGN_OR_RETURN(void* q, q_mqa_.reserve(backend_, bytes(T * H * (R + Dr), a), "q_mqa"));
    SIEVE_ASSIGN_OR_RETURN(void* out, o_lat_.reserve(backend_, bytes(T * H * R, a), "o_lat"));  // [T, H, R]
    SparseAttentionParams p;  // one main list: the latent entries of the selection (ops/sparse_attention.h)
    p.q = q;
    p.q_token_stride = H * (R + Dr);
    p.q_head_stride = R + Dr;
    p.main.cache = plan.latent->view(layer_pos);
    p.main.format = latent_layout_.format;
    p.main.n_slots = plan.latent->n_slots();
    p.main.slots = slots;
    p.main.width = K;
    p.main.slots_stride = K;
    p.sink = w.sink.as<float>();  // every path applies the sink (§2.11)
    p.out = out;
    p.out_token_stride = H * R;
    p.out_head_stride = R;
    p.scale = static_cast<float>(c.softmax_scale);  // Dqk^-0.5 · m² (§2.3)
    p.n_tokens = T;
    p.n_heads = H;
    p.qk_dim = R + Dr;  // K = [c | kr], V = c (§2.5)
    p.v_dim = R;
    p.rope_dim = Dr;
    p.q_type = p.out_type = a;
    p.math = a == DType::bf16 ? AttentionMath::bf16 : AttentionMath::f32;  // deployed: bf16 P·V, as FlashMLA (§3.4)
    SIEVE_ASSIGN_OR_RETURN(const Workspace ws,
                           op_workspace_.workspace(backend_, backend_.sparse_attention_workspace_size(p),
                                                   "the attention workspace"));
    return backend_.sparse_attention(p, ws);
}

Status Model::output_projection(const LayerWeights& w, int64_t T, const float* input, float* output) {
    const DsaMlaConfig& c = config_;
    const DType a = act_type_;
    const int64_t D = c.hidden_size, H = c.num_attention_heads, R = c.kv_lora_rank, Dv = c.v_head_dim;
    SIEVE_ASSIGN_OR_RETURN(void* o_lat, o_lat_.reserve(backend_, bytes(T * H * R, a), "o_lat"));
    SIEVE_ASSIGN_OR_RETURN(void* o, o_.reserve(backend_, bytes(T * H * Dv, a), "o"));  // [T, H, Dv]
    // o[t, h] = W_UV[h]·o_lat[t, h] (§2.5)
    SIEVE_RETURN_IF_ERROR(head_proj(w.w_uv, o_lat, H * R, R, o, H * Dv, Dv, T, H, R, Dv));
    if (w.gate_mode != DsaOutputGate::none) {  // o ⊙ sigmoid(x·W_gateᵀ), before o_proj (§2.9)
        const int64_t gw = w.gate.out_features();
        SIEVE_ASSIGN_OR_RETURN(void* g, gate_.reserve(backend_, bytes(T * gw, a), "gate"));
        SIEVE_RETURN_IF_ERROR(w.gate.run(input, DType::f32, D, g, a, gw, T, op_workspace_));
        DsaOutputGateParams gp;
        gp.x = o;
        gp.y = o;
        gp.gate = g;
        gp.n_tokens = T;
        gp.n_heads = H;
        gp.head_dim = Dv;
        gp.x_token_stride = gp.y_token_stride = H * Dv;
        gp.x_head_stride = gp.y_head_stride = Dv;
        gp.gate_row_stride = gw;
        gp.mode = w.gate_mode == DsaOutputGate::elementwise ? DsaGateMode::elementwise : DsaGateMode::headwise;
        gp.x_type = gp.gate_type = gp.y_type = a;
        SIEVE_RETURN_IF_ERROR(backend_.dsa_output_gate(gp));
    }
    return w.o_proj.run(o, a, H * Dv, output, DType::f32, D, T, op_workspace_);
}

}  // namespace sieve::dsa_mla
