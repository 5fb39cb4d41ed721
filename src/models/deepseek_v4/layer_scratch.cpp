// The layer's share of the step's scratch (scratch.h): the element count of every sub-buffer and the
// largest workspace of its ops, from the step's plan alone, so that plan_step can reserve the arena before
// any layer runs and the forward carves the same sub-buffers.
#include <algorithm>

#include "models/deepseek_v4/layer.h"

namespace sieve::dsv4 {

namespace {

// Tokens whose queries are normalized and rotated in one fp32 buffer (§2.2, §2.3): on the host few, so that the
// buffer stays in cache (16 tokens of 64 heads × 512: 2 MiB); on a device more, as each chunk costs two launches
// (a decode step of up to 128 tokens is one chunk: 16 MiB).
constexpr int64_t kHostQueryNormTokens = 16;
constexpr int64_t kDeviceQueryNormTokens = 128;

}  // namespace

Expected<ScratchShape> AttentionLayer::scratch_shape(const StepBatch& batch, const StepPlan& plan,
                                                     bool observed) const {
    const int64_t N = plan.n_tokens(), D = config_.hidden_size, H = config_.num_attention_heads, d = config_.head_dim;
    const int64_t Rq = config_.q_lora_rank, G = config_.o_groups, Ro = config_.o_lora_rank;
    ScratchShape sh;
    sh.act = act_;
    sh.n_tokens = N;
    sh.q_rank = Rq;
    sh.heads = H;
    sh.head_dim = d;
    sh.norm_tokens = std::min<int64_t>(
        N, backend_.device().host_accessible ? kHostQueryNormTokens : kDeviceQueryNormTokens);
    sh.out_rank = G * Ro;

    size_t ws = 0;  // the largest op workspace
    const auto linear = [&](const PlannedLinear& w, DType x_type, int64_t x_stride, DType y_type,
                            int64_t y_stride) -> Status {
        SIEVE_ASSIGN_OR_RETURN(const size_t bytes, w.workspace_bytes(x_type, x_stride, y_type, y_stride, N));
        ws = std::max(ws, bytes);
        return Status::ok();
    };
    SIEVE_RETURN_IF_ERROR(linear(w_.wq_a, DType::f32, D, act_, Rq));
    SIEVE_RETURN_IF_ERROR(linear(w_.wq_b, act_, Rq, act_, H * d));
    SIEVE_RETURN_IF_ERROR(linear(w_.wkv, DType::f32, D, act_, d));
    SIEVE_RETURN_IF_ERROR(linear(w_.wo_a, act_, H * d, act_, G * Ro));
    SIEVE_RETURN_IF_ERROR(linear(w_.wo_b, act_, G * Ro, DType::f32, D));

    // The compressors run one after another and share their buffers.
    const auto compressor = [&](const CompressorWeights& w, const CacheBinding& state) -> Status {
        SIEVE_RETURN_IF_ERROR(linear(w.wkv_gate, DType::f32, D, DType::f32, 2 * w.width()));
        SIEVE_ASSIGN_OR_RETURN(const PlannedCompressor* c, plan.compressor(state.group));
        sh.compressor_floats = std::max(sh.compressor_floats, N * 2 * w.width());
        sh.pooled_floats = std::max(sh.pooled_floats, c->n_emit * w.head_dim);
        return Status::ok();
    };
    if (w_.compressor) SIEVE_RETURN_IF_ERROR(compressor(*w_.compressor, caches_.state));
    if (w_.indexer_compressor) SIEVE_RETURN_IF_ERROR(compressor(*w_.indexer_compressor, caches_.indexer_state));

    const LayerScratch none;  // the ops' workspace sizes read no pointer
    int64_t n_comp = 0;
    BoundCache comp;
    if (spec_.kind != DeepseekV4LayerKind::swa) {
        SIEVE_ASSIGN_OR_RETURN(comp, bind_cache(batch, caches_.compressed));
        SIEVE_ASSIGN_OR_RETURN(const PlannedCompressed* planned, plan.compressed(caches_.compressed.group));
        n_comp = planned->visible;
    }
    if (spec_.kind == DeepseekV4LayerKind::csa) {
        SIEVE_ASSIGN_OR_RETURN(const PlannedIndexer* ix, plan.indexer(caches_.indexer_keys.group));
        n_comp = ix->width;
        sh.selected = N * ix->width;
        if (ix->scored) {
            const int64_t HI = config_.index_n_heads, cI = config_.index_head_dim;
            sh.index_weights = N * HI;
            sh.index_queries = N * HI * cI;
            SIEVE_RETURN_IF_ERROR(linear(w_.indexer_weights_proj, DType::f32, D, DType::f32, HI));
            SIEVE_RETURN_IF_ERROR(linear(w_.indexer_wq_b, act_, Rq, act_, HI * cI));
            SIEVE_ASSIGN_OR_RETURN(BoundCache keys, bind_cache(batch, caches_.indexer_keys));
            IndexerScoresParams ip = indexer_params(plan, *ix, keys, !observed, none);
            // The fused selection's workspace differs from the scoring's alone, and a non-null `selected` is
            // what asks for it (ops/indexer_scores.h); the size reads nothing behind it.
            int32_t fused_mark = 0;
            if (!observed) ip.selected = &fused_mark;
            ws = std::max(ws, backend_.indexer_scores_workspace_size(ip));
            if (observed) {
                sh.scores = N * ix->max_keys;
                ws = std::max(ws, backend_.topk_workspace_size(topk_params(plan, *ix, none)));
            }
        }
    }
    sh.compressed_slots = N * n_comp;
    SIEVE_ASSIGN_OR_RETURN(BoundCache swa, bind_cache(batch, caches_.swa));
    ws = std::max(ws, backend_.sparse_attention_workspace_size(attention_params(plan, swa, n_comp > 0 ? &comp : nullptr,
                                                                                n_comp, none)));
    sh.op_workspace = ws;
    return sh;
}

}  // namespace sieve::dsv4
