#include "models/qsa/layer.h"

#include <algorithm>
#include <climits>
#include <new>
#include <span>

#include "models/qsa/layout.h"
#include "sieve/ops/cache_store.h"

#include "sieve/ops/qsa_expand.h"
#include "sieve/ops/qsa_pool.h"
#include "sieve/ops/indexer_scores.h"
#include "sieve/ops/qsa_sparse_gqa.h"
#include "sieve/ops/rms_norm.h"
#include "sieve/ops/rope.h"
#include "sieve/ops/topk.h"

namespace sieve::qsa {

namespace {

// Scores of one selection chunk: at most this many bytes of [rows, groups] f32 (vLLM and SGLang
// chunk their prefill logits the same way, with 128 MiB; qsa.md §12 item 4), or of the fused
// selection's workspace.
constexpr size_t kScoreChunkBytes = size_t{64} << 20;

// The tables of one cache group for tokens [token0, …).
BlockTables tables_from(const BlockTables& step, int64_t token0) {
    BlockTables t = step;
    t.token_request += token0;
    return t;
}

}  // namespace

Expected<std::unique_ptr<AttentionLayer>> AttentionLayer::create(const QsaConfig& c, LayerWeights w, NumericsProfile profile,
                                                     Backend& backend, int64_t layer_slot) {
    std::unique_ptr<AttentionLayer> l(new AttentionLayer(c, profile, backend));
    l->layer_ = w.layer;
    l->layer_slot_ = layer_slot;
    l->pl_ = projection_layout(c);
    const LinearMath math = profile == NumericsProfile::exact ? LinearMath::f32 : LinearMath::bf16;
    auto prepare = [&](const Tensor& t, const char* what) {
        LinearWeights lw;
        lw.weight = t.data();
        lw.out_features = t.dim(0);
        lw.in_features = t.dim(1);
        lw.weight_row_stride = t.dim(1);
        lw.weight_type = t.dtype();
        lw.math = math;
        return PlannedLinear::prepare(backend, lw, fmt::format("layer {} {}", w.layer, what));
    };
    SIEVE_ASSIGN_OR_RETURN(l->input_proj_, prepare(w.input_proj, "q|k|v|index_qk projection"));
    SIEVE_ASSIGN_OR_RETURN(l->o_proj_, prepare(w.o_proj, "o_proj"));
    const std::string name = fmt::format("layer {}", w.layer);
    SIEVE_ASSIGN_OR_RETURN(l->q_norm_, DeviceTensor::upload(backend, w.q_norm, name + " q_norm"));
    SIEVE_ASSIGN_OR_RETURN(l->k_norm_, DeviceTensor::upload(backend, w.k_norm, name + " k_norm"));
    SIEVE_ASSIGN_OR_RETURN(l->index_q_norm_, DeviceTensor::upload(backend, w.index_q_norm, name + " indexer q norm"));
    SIEVE_ASSIGN_OR_RETURN(l->index_k_norm_, DeviceTensor::upload(backend, w.index_k_norm, name + " indexer k norm"));
    // One table for main q/k and the indexer (qsa.md §4.2: same rotary, R dims, theta^(−2i/R)).
    SIEVE_ASSIGN_OR_RETURN(l->rope_, make_rope_table(backend, c.rope, c.rotary_dim, name));
    return l;
}

// The step's op params (pointers set by forward), their plans and workspaces, and the layer's scratch:
// computed once by plan_step's counting pass (reserve_scratch) and again, identically, by forward.
struct AttentionLayer::StepOps {
    int64_t T = 0, N = 0, Hq = 0, Hkv = 0, D = 0, Hi = 0, Di = 0, W = 0, k_top = 0, max_cols = 0, n_new = 0;
    size_t ae = 0;        // bytes of an activation
    int64_t chunk_rows = 0;  // selection rows per chunk of bounded score memory
    bool fused = false;   // selection inside the scoring (no observer)
    LinearParams in_lp, out_lp;
    const LinearPlan* in_plan = nullptr;
    const LinearPlan* out_plan = nullptr;
    QsaSparseGqaParams gp;
    IndexerScoresParams sp;
    TopkParams tk;
    size_t lin_ws = 0, score_ws = 0, topk_ws = 0, gqa_ws = 0;

    struct Buffers {
        void* proj;               // [T, N] act: q_gate | k | v | index_q | index_k (ProjectionLayout)
        void* q;                  // [T, Hq, D] act, normed and rotated
        void* k;                  // [T, Hkv, D] act, normed and rotated
        void* iq;                 // [T, Hi, Di] act, normed and rotated index queries
        void* attn;               // [T, Hq, D] act, gated attention output
        void* pooled;             // [n_new, Di] act, the groups completed in this step
        int32_t* idx;             // [T, W] token positions per row (−1 padded)
        int32_t* sel;             // [T, k_top] selected groups (−1 padded)
        float* scores;            // [chunk_rows, max_cols] group scores of one row chunk (not fused)
        void *lin_ws, *score_ws, *topk_ws, *gqa_ws;
    };
    // The scratch's sub-buffers in `cv` (a counting carver sums their bytes).
    Buffers carve(WorkspaceCarver& cv) const {
        Buffers b;
        b.proj = cv.take_bytes(static_cast<size_t>(T * N) * ae);
        b.q = cv.take_bytes(static_cast<size_t>(T * Hq * D) * ae);
        b.k = cv.take_bytes(static_cast<size_t>(T * Hkv * D) * ae);
        b.iq = cv.take_bytes(static_cast<size_t>(T * Hi * Di) * ae);
        b.attn = cv.take_bytes(static_cast<size_t>(T * Hq * D) * ae);
        b.pooled = cv.take_bytes(static_cast<size_t>(std::max<int64_t>(n_new, 1) * Di) * ae);
        b.idx = cv.take<int32_t>(static_cast<size_t>(T * W));
        b.sel = cv.take<int32_t>(static_cast<size_t>(T * k_top));
        b.scores = cv.take<float>(static_cast<size_t>(fused ? 1 : std::max<int64_t>(chunk_rows * max_cols, 1)));
        b.lin_ws = cv.take_bytes(lin_ws);
        b.score_ws = cv.take_bytes(score_ws);
        b.topk_ws = cv.take_bytes(topk_ws);
        b.gqa_ws = cv.take_bytes(gqa_ws);
        return b;
    }
    size_t scratch_bytes() const {
        WorkspaceCarver sizing;
        carve(sizing);
        return sizing.offset;
    }
};

Expected<AttentionLayer::StepOps> AttentionLayer::step_ops(const StepBatch& batch, const StepPlan& plan, bool fused) {
    StepOps o;
    const int64_t T = batch.n_tokens();
    const CacheGroup* kv_group = plan.kv;
    const bool exact = profile_ == NumericsProfile::exact;
    const DType act = exact ? DType::f32 : DType::bf16;  // activations and caches (see layer.h)
    const int64_t H = c_.hidden_size, Hq = c_.num_attention_heads, Hkv = c_.num_key_value_heads, D = c_.head_dim;
    const int64_t Hi = c_.indexer_n_heads, Di = c_.indexer_head_dim, N = pl_.total;
    const int64_t max_cols = plan.max_cols, k_top = plan.k_top, W = plan.width;
    o.T = T, o.N = N, o.Hq = Hq, o.Hkv = Hkv, o.D = D, o.Hi = Hi, o.Di = Di, o.W = W, o.k_top = k_top;
    o.max_cols = max_cols, o.n_new = plan.n_new(), o.ae = dtype_size(act), o.fused = fused;
    int64_t chunk_rows =
        max_cols == 0 ? T : std::clamp<int64_t>(static_cast<int64_t>(kScoreChunkBytes / (4 * static_cast<size_t>(max_cols))), 1, T);

    LinearParams& in_lp = o.in_lp;
    in_lp.n_tokens = T;
    in_lp.x_row_stride = H;
    in_lp.y_row_stride = N;
    in_lp.x_type = DType::f32;
    in_lp.y_type = act;
    LinearParams& out_lp = o.out_lp;
    out_lp.n_tokens = T;
    out_lp.x_row_stride = Hq * D;
    out_lp.y_row_stride = H;
    out_lp.x_type = act;
    out_lp.y_type = DType::f32;
    SIEVE_ASSIGN_OR_RETURN(o.in_plan, input_proj_.plan(in_lp));
    SIEVE_ASSIGN_OR_RETURN(o.out_plan, o_proj_.plan(out_lp));
    o.lin_ws = std::max(o.in_plan->workspace_bytes, o.out_plan->workspace_bytes);

    QsaSparseGqaParams& gp = o.gp;
    gp.kv = kv_group->view(layer_slot_);
    gp.tables = plan.kv_tables;
    gp.n_tokens = T;
    gp.n_heads = Hq;
    gp.n_kv_heads = Hkv;
    gp.head_dim = D;
    gp.n_indices = W;
    gp.index_row_stride = W;
    gp.q_token_stride = Hq * D;
    gp.q_head_stride = D;
    gp.gate_token_stride = N;  // the gate halves of q_proj's rows (§3, §4.8)
    gp.gate_head_stride = 2 * D;
    gp.out_token_stride = Hq * D;
    gp.out_head_stride = D;
    gp.scale = static_cast<float>(c_.softmax_scale);  // D^-0.5 (§4.7)
    gp.math = exact ? AttentionMath::f32 : AttentionMath::bf16;
    gp.q_type = gp.kv_type = gp.gate_type = gp.out_type = act;
    o.gqa_ws = backend_.qsa_sparse_gqa_workspace_size(gp);

    // Selection: fused into the scoring (no score row written, performance_facts.md §5) unless an
    // observer wants the scores, then scores and a separate top-k.
    IndexerScoresParams& sp = o.sp;
    sp.n_tokens = chunk_rows;
    sp.n_heads = Hi;
    sp.head_dim = Di;
    sp.q_token_stride = Hi * Di;
    sp.q_head_stride = Di;
    sp.n_cols = max_cols;
    sp.scores_row_stride = max_cols;
    sp.weight_scale = static_cast<float>(c_.indexer_score_scale);  // Di^-0.5 (§4.4), no head weights
    sp.q_type = act;
    sp.key_format = act == DType::bf16 ? CacheRecordFormat::bf16 : CacheRecordFormat::f32;
    sp.tables = plan.compressed_tables;  // the workspace size depends on the number of requests
    if (fused) {
        sp.k = k_top;
        sp.selected_row_stride = k_top;
    }
    TopkParams& tk = o.tk;
    tk.n_rows = chunk_rows;
    tk.n_cols = max_cols;
    tk.k = k_top;
    tk.scores_row_stride = max_cols;
    tk.out_row_stride = k_top;
    o.topk_ws = max_cols > 0 && !fused ? backend_.topk_workspace_size(tk) : 0;
    // the workspace size does not depend on the pointers (fused: a non-null `selected` asks for it)
    int32_t fused_probe = 0;
    if (fused) sp.selected = &fused_probe;
    size_t score_ws = max_cols > 0 ? backend_.indexer_scores_workspace_size(sp) : 0;
    // The fused top-k keeps a stream per (scoring thread, row): its workspace grows with threads × rows, so
    // a chunk of rows is also bounded by kScoreChunkBytes of it.
    while (fused && score_ws > kScoreChunkBytes && chunk_rows > 1) {
        chunk_rows = (chunk_rows + 1) / 2;
        sp.n_tokens = chunk_rows;
        score_ws = backend_.indexer_scores_workspace_size(sp);
    }
    sp.selected = nullptr;
    tk.n_rows = chunk_rows;
    o.score_ws = score_ws;
    o.chunk_rows = chunk_rows;
    return o;
}

Status AttentionLayer::reserve_scratch(const StepBatch& batch, const StepPlan& plan, bool fused, WorkspaceBuffer& arena) {
    if (batch.n_tokens() == 0) return Status::ok();
    SIEVE_ASSIGN_OR_RETURN(const StepOps ops, step_ops(batch, plan, fused));
    auto base = arena.reserve(backend_, ops.scratch_bytes(), "the step's scratch");
    if (!base) return base.status().with_context(fmt::format("QSA layer {}, a step of {} tokens", layer_, batch.n_tokens()));
    return Status::ok();
}

Status AttentionLayer::forward(const StepBatch& batch, const StepPlan& plan, const float* input, float* output,
                         WorkspaceBuffer& arena, SelectionObserver* observer, StageTimes* times) {
    const int64_t T = batch.n_tokens();
    if (T == 0) return Status::ok();
    const CacheGroup* kv_group = plan.kv;
    const CacheGroup* comp_group = plan.compressed;
    const CacheGroup* ring_group = plan.ring;
    const bool exact = profile_ == NumericsProfile::exact;
    const DType act = exact ? DType::f32 : DType::bf16;  // activations and caches (see layer.h)
    const size_t ae = dtype_size(act);
    const int64_t Hq = c_.num_attention_heads, Hkv = c_.num_key_value_heads, D = c_.head_dim;
    const int64_t Hi = c_.indexer_n_heads, Di = c_.indexer_head_dim, r = c_.indexer_compress_ratio;
    const int64_t R = c_.rotary_dim, N = pl_.total;
    const float eps = static_cast<float>(c_.rms_norm_eps);

    const std::vector<int32_t>& n_groups = plan.n_groups;
    const int64_t max_cols = plan.max_cols, k_top = plan.k_top, W = plan.width, n_new = plan.n_new();
    const bool fused = observer == nullptr;
    SIEVE_ASSIGN_OR_RETURN(StepOps ops, step_ops(batch, plan, fused));
    const int64_t chunk_rows = ops.chunk_rows;
    LinearParams& in_lp = ops.in_lp;
    LinearParams& out_lp = ops.out_lp;
    QsaSparseGqaParams& gp = ops.gp;
    IndexerScoresParams& sp = ops.sp;
    const TopkParams& tk = ops.tk;
    in_lp.x = input;
    out_lp.y = output;
    // The scratch was reserved by plan_step (one counting pass per step); a forward never grows it.
    if (arena.capacity() < ops.scratch_bytes())
        return internal_error("QSA layer {}: a step of {} tokens needs {} bytes of scratch, plan_step reserved {}", layer_,
                              T, ops.scratch_bytes(), arena.capacity());
    WorkspaceCarver cv{static_cast<uint8_t*>(arena.data()), 0};
    const StepOps::Buffers buf = ops.carve(cv);
    const size_t lin_ws_bytes = ops.lin_ws, score_ws = ops.score_ws, topk_ws = ops.topk_ws, gqa_ws = ops.gqa_ws;

    // ---- 1. projections, norms, RoPE (§4.1, §4.2) ----
    {
        ScopedStageTimer timer(times, Stage::projections);
        in_lp.y = buf.proj;
        SIEVE_RETURN_IF_ERROR(input_proj_.run(*ops.in_plan, in_lp, {buf.lin_ws, lin_ws_bytes}));
        auto norm_rope = [&](int64_t offset, int64_t n_heads, int64_t dim, int64_t head_stride, const DeviceTensor& w,
                             void* y) -> Status {
            RmsNormParams n;
            n.x = static_cast<const uint8_t*>(buf.proj) + static_cast<size_t>(offset) * ae;
            n.y = y;
            n.weight = w.as<float>();
            n.n_tokens = T;
            n.n_heads = n_heads;
            n.dim = dim;
            n.x_token_stride = N;
            n.x_head_stride = head_stride;
            n.y_token_stride = n_heads * dim;
            n.y_head_stride = dim;
            n.eps = eps;  // rms_norm_eps for every QSA norm (§2.1)
            n.weight_mode = RmsNormWeight::one_plus;  // Gemma (1 + w) (§4.1)
            n.x_type = n.y_type = act;
            SIEVE_RETURN_IF_ERROR(backend_.rms_norm(n));
            RopeParams rp;
            rp.x = rp.y = y;
            rp.positions = plan.positions;
            rp.inv_freq = rope_.inv_freq.as<float>();
            rp.n_tokens = T;
            rp.n_heads = n_heads;
            rp.head_dim = dim;
            rp.rot_dim = R;
            rp.x_token_stride = rp.y_token_stride = n_heads * dim;
            rp.x_head_stride = rp.y_head_stride = dim;
            rp.pairing = RopePairing::half_split;  // NeoX on the first R dims, after the norm (§4.1)
            rp.slice = RopeSlice::first;
            rp.x_type = rp.y_type = act;
            rp.positions_type = DType::i64;
            return backend_.rope(rp);
        };
        SIEVE_RETURN_IF_ERROR(norm_rope(pl_.q_gate, Hq, D, 2 * D, q_norm_, buf.q));
        SIEVE_RETURN_IF_ERROR(norm_rope(pl_.k, Hkv, D, D, k_norm_, buf.k));
        SIEVE_RETURN_IF_ERROR(norm_rope(pl_.index_q, Hi, Di, Di, index_q_norm_, buf.iq));
    }

    // ---- 2. cache stores: K|V, raw index keys (§4.9 steps 2.3 and 3; §5.1, §5.2) ----
    const CacheView kv_view = kv_group->view(layer_slot_);
    const CacheView ring_view = ring_group->view(layer_slot_);
    const CacheView comp_view = comp_group->view(layer_slot_);
    const QsaCacheLayouts records = qsa_cache_layouts(c_, profile_);
    // Rows x [n_rows, dim] (row stride in elements) into sub-rows [entry_offset, entry_offset + dim) of the
    // entries `slots` (device memory) of a plain-format cache.
    auto store = [&](const void* x, int64_t x_row_stride, int64_t n_rows, int64_t dim, const int32_t* slots,
                     const CacheView& view, const CacheGroup& group, const CacheRecordLayout& layout,
                     int64_t entry_offset) {
        CacheStoreParams st = whole_row_store(x, act, x_row_stride, n_rows, slots, view, group.n_slots(), layout);
        st.dim = dim;
        st.entry_offset = entry_offset;
        return backend_.cache_store(st);
    };
    {
        ScopedStageTimer timer(times, Stage::compressor);
        const int32_t* kv_slots_d = plan.kv_slots;
        const int32_t* ring_slots_d = plan.ring_slots;
        const auto* proj = static_cast<const uint8_t*>(buf.proj);
        const auto* kb = static_cast<const uint8_t*>(buf.k);
        // Entry [Hkv, 2, D]: K of kv head g at 2g·D, V at (2g + 1)·D (§5.1).
        for (int64_t g = 0; g < Hkv; ++g) {
            SIEVE_RETURN_IF_ERROR(store(kb + static_cast<size_t>(g * D) * ae, Hkv * D, T, D, kv_slots_d, kv_view,
                                        *kv_group, records.kv, 2 * g * D));
            SIEVE_RETURN_IF_ERROR(store(proj + static_cast<size_t>(pl_.v + g * D) * ae, N, T, D, kv_slots_d, kv_view,
                                        *kv_group, records.kv, (2 * g + 1) * D));
        }
        SIEVE_RETURN_IF_ERROR(store(proj + static_cast<size_t>(pl_.index_k) * ae, N, T, Di, ring_slots_d, ring_view,
                                    *ring_group, records.keys, 0));

        // ---- 3. compression of the groups completed in this step (§4.3, §5.3) ----
        if (n_new > 0) {
            QsaPoolParams pp;
            pp.keys = ring_view;
            pp.member_slots = plan.member_slots;
            pp.out = buf.pooled;
            pp.n_groups = n_new;
            pp.ratio = r;
            pp.head_dim = Di;
            pp.out_row_stride = Di;
            pp.key_type = pp.out_type = act;  // deployed: the pooled mean rounded to bf16 before the norm (§4.3)
            SIEVE_RETURN_IF_ERROR(backend_.qsa_pool(pp));
            RmsNormParams n;
            n.x = n.y = buf.pooled;
            n.weight = index_k_norm_.as<float>();
            n.n_tokens = n_new;
            n.dim = Di;
            n.x_token_stride = n.y_token_stride = Di;
            n.eps = eps;
            n.weight_mode = RmsNormWeight::one_plus;  // k_layernorm, Gemma (1 + w) (§3, §4.3)
            n.x_type = n.y_type = act;
            SIEVE_RETURN_IF_ERROR(backend_.rms_norm(n));
            RopeParams rp;
            rp.x = rp.y = buf.pooled;
            rp.positions = plan.pool_positions;
            rp.inv_freq = rope_.inv_freq.as<float>();
            rp.n_tokens = n_new;
            rp.head_dim = Di;
            rp.rot_dim = R;
            rp.x_token_stride = rp.y_token_stride = Di;
            rp.pairing = RopePairing::half_split;
            rp.slice = RopeSlice::first;
            rp.x_type = rp.y_type = act;
            rp.positions_type = DType::i64;
            SIEVE_RETURN_IF_ERROR(backend_.rope(rp));
            SIEVE_RETURN_IF_ERROR(
                store(buf.pooled, Di, n_new, Di, plan.compressed_slots, comp_view, *comp_group, records.keys, 0));
        }
    }

    // ---- 4. selection (§4.4–§4.6), in row chunks of bounded score memory ----
    for (int64_t t0 = 0; t0 < T; t0 += chunk_rows) {
        const int64_t t1 = std::min(T, t0 + chunk_rows);
        bool any = false;
        for (int64_t t = t0; t < t1; ++t) any |= n_groups[static_cast<size_t>(t)] > 0;
        if (any) {
            {
                // fused: one stage, timed as the indexer's (its top-k runs inside the scoring)
                ScopedStageTimer timer(times, Stage::indexer);
                sp.q = static_cast<const uint8_t*>(buf.iq) + static_cast<size_t>(t0 * Hi * Di) * ae;
                sp.keys = comp_view;
                sp.tables = tables_from(plan.compressed_tables, t0);
                sp.n_slots = comp_group->n_slots();
                sp.n_keys = plan.n_groups_d + t0;
                sp.n_tokens = t1 - t0;
                sp.scores = fused ? nullptr : buf.scores;
                sp.selected = fused ? buf.sel + t0 * k_top : nullptr;
                SIEVE_RETURN_IF_ERROR(backend_.indexer_scores(sp, {buf.score_ws, score_ws}));
            }
            if (!fused) {
                ScopedStageTimer timer(times, Stage::topk);
                TopkParams p = tk;
                p.scores = buf.scores;
                p.valid_len = plan.n_groups_d + t0;
                p.out = buf.sel + t0 * k_top;
                p.n_rows = t1 - t0;
                SIEVE_RETURN_IF_ERROR(backend_.topk(p, {buf.topk_ws, topk_ws}));
            }
        }
        ScopedStageTimer timer(times, Stage::topk);
        QsaExpandParams ep;
        ep.sel = buf.sel + t0 * k_top;
        ep.positions = plan.positions + t0;
        ep.seq_lens = plan.seq_lens_d + t0;
        ep.out = buf.idx + t0 * W;
        ep.n_tokens = t1 - t0;
        ep.ratio = r;
        ep.block_topk = k_top;
        ep.out_width = W;
        ep.sel_row_stride = k_top;
        ep.out_row_stride = W;
        SIEVE_RETURN_IF_ERROR(backend_.qsa_expand(ep));
        if (observer) {
            // The one readback of a step: the rows and scores to the host, the observer's rows back.
            const int64_t rows = t1 - t0;
            std::vector<int32_t> idx(static_cast<size_t>(rows * W));
            std::vector<float> scores(fused || !observer->wants_scores() ? 0 : static_cast<size_t>(rows * max_cols));
            SIEVE_RETURN_IF_ERROR(arena.download(backend_, buf.idx + t0 * W, idx.data(), idx.size() * 4));
            if (!scores.empty())
                SIEVE_RETURN_IF_ERROR(arena.download(backend_, buf.scores, scores.data(), scores.size() * 4));
            for (int64_t t = t0; t < t1; ++t) {
                const int32_t n = n_groups[static_cast<size_t>(t)];
                std::span<const float> row_scores;
                if (n > 0 && !scores.empty())
                    row_scores = std::span<const float>(scores.data() + (t - t0) * max_cols, static_cast<size_t>(n));
                observer->on_selection(layer_, batch.request_of_token(t), batch.positions[static_cast<size_t>(t)],
                                       std::span<int32_t>(idx.data() + (t - t0) * W, static_cast<size_t>(W)), row_scores,
                                       r);
            }
            SIEVE_RETURN_IF_ERROR(arena.upload(backend_, buf.idx + t0 * W, idx.data(), idx.size() * 4));
        }
    }

    // ---- 5. sparse GQA × sigmoid(gate), o_proj (§4.7, §4.8) ----
    {
        ScopedStageTimer timer(times, Stage::attention);
        gp.q = buf.q;
        gp.indices = buf.idx;
        gp.gate = static_cast<const uint8_t*>(buf.proj) + static_cast<size_t>(pl_.q_gate + D) * ae;
        gp.out = buf.attn;
        SIEVE_RETURN_IF_ERROR(backend_.qsa_sparse_gqa(gp, {buf.gqa_ws, gqa_ws}));
    }
    ScopedStageTimer timer(times, Stage::output);
    out_lp.x = buf.attn;
    return o_proj_.run(*ops.out_plan, out_lp, {buf.lin_ws, lin_ws_bytes});
}

}  // namespace sieve::qsa
