// The layer's forward: query and K=V paths, caches, attention and output projection. The
// compressors are in layer_compressor.cpp, the indexer selection in layer_indexer.cpp, the sizes of the
// step's scratch in layer_scratch.cpp.
#include "models/deepseek_v4/layer.h"

#include <fmt/format.h>

#include "models/deepseek_v4/layout.h"
#include "sieve/ops/rms_norm.h"
#include "sieve/ops/rope.h"
#include "sieve/ops/selected_slots.h"
#include "sieve/ops/sparse_attention.h"

namespace sieve::dsv4 {

namespace {

// Byte offset helper for activation buffers whose element type is decided at run time.
void* at(void* base, int64_t elements, DType t) {
    return static_cast<uint8_t*>(base) + elements * static_cast<int64_t>(dtype_size(t));
}

}  // namespace

AttentionLayer::AttentionLayer(const DeepseekV4Config& config, int64_t layer, LayerWeights weights, LayerCaches caches,
                               NumericsProfile profile, Backend& backend)
    : config_(config),
      spec_(config.layer(layer)),
      layer_(layer),
      w_(std::move(weights)),
      caches_(std::move(caches)),
      profile_(profile),
      backend_(backend),
      act_(profile == NumericsProfile::exact ? DType::f32 : DType::bf16) {
    const DeepseekV4CacheLayouts records = deepseek_v4_cache_layouts(config, profile);
    kv_layout_ = records.kv;
    key_layout_ = records.keys;
}

Status AttentionLayer::init() {
    const RopeConfig& rc = spec_.rope;
    if (rc.slice != RopeConfigSlice::last || rc.pairing != RopeConfigPairing::interleaved ||
        rc.rotated_dims != config_.rope_head_dim)
        return unsupported_error("deepseek_v4 layer {}: RoPE on the {} {} dims with {} pairs; the layer rotates the last "
                                 "{} dims in interleaved pairs (§1.3, §2.3)",
                                 layer_, rope_config_slice_name(rc.slice), rc.rotated_dims,
                                 rope_config_pairing_name(rc.pairing), config_.rope_head_dim);
    // attention_factor is 1.0 in the release (§1.4).
    SIEVE_ASSIGN_OR_RETURN(rope_, make_rope_table(backend_, rc, rc.rotated_dims, fmt::format("deepseek_v4 layer {}", layer_)));
    return Status::ok();
}

void AttentionLayer::add_plan_needs(StepPlanNeeds& needs) const {
    needs.window = caches_.swa.group;
    needs.sliding_window = config_.sliding_window;
    if (spec_.kind == DeepseekV4LayerKind::swa) return;
    const int64_t m = spec_.compress_ratio;
    needs.add(StepPlanNeeds::Compressed{caches_.compressed.group, m});
    if (w_.compressor)
        needs.add(StepPlanNeeds::Compressor{caches_.state.group, caches_.compressed.group, m, w_.compressor->overlap});
    if (w_.indexer_compressor)
        needs.add(StepPlanNeeds::Compressor{caches_.indexer_state.group, caches_.indexer_keys.group, m,
                                            w_.indexer_compressor->overlap});
    if (spec_.kind == DeepseekV4LayerKind::csa)
        needs.add(StepPlanNeeds::Indexer{caches_.indexer_keys.group, m, config_.index_topk});
}

Status AttentionLayer::rope(void* x, DType x_type, void* y, DType y_type, const int64_t* positions, int64_t n_tokens,
                            int64_t n_heads, int64_t head_dim, bool inverse) {
    RopeParams p;
    p.x = x;
    p.y = y;
    p.positions = positions;
    p.inv_freq = rope_.inv_freq.as<float>();
    p.n_tokens = n_tokens;
    p.n_heads = n_heads;
    p.head_dim = head_dim;
    p.rot_dim = config_.rope_head_dim;
    p.x_token_stride = p.y_token_stride = n_heads * head_dim;
    p.x_head_stride = p.y_head_stride = head_dim;
    p.attention_factor = rope_.attention_factor;
    p.pairing = RopePairing::interleaved;  // GPT-J pairs (§2.3)
    p.slice = RopeSlice::last;             // the last r dims (§1.3)
    p.inverse = inverse;
    p.x_type = x_type;
    p.y_type = y_type;
    p.positions_type = DType::i64;
    return backend_.rope(p);
}

SparseAttentionParams AttentionLayer::attention_params(const StepPlan& plan, const BoundCache& window,
                                                       const BoundCache* compressed, int64_t n_compressed,
                                                       const LayerScratch& b) const {
    const int64_t H = config_.num_attention_heads, d = config_.head_dim;
    SparseAttentionParams p;
    p.q = b.q;
    p.q_type = act_;
    p.q_token_stride = H * d;
    p.q_head_stride = d;
    // main = the window (every layer has one), extra = the compressed entries: §3.8's order, window first
    // (ops/sparse_attention.h).
    p.main.cache = window.view;
    p.main.format = kv_layout_.format;
    p.main.n_slots = window.n_slots;
    p.main.slots = plan.window().slots;
    p.main.width = plan.window().width;
    p.main.slots_stride = plan.window().width;
    if (compressed != nullptr) {
        p.extra.cache = compressed->view;
        p.extra.format = kv_layout_.format;
        p.extra.n_slots = compressed->n_slots;
        p.extra.slots = b.compressed_slots;
        p.extra.width = n_compressed;
        p.extra.slots_stride = n_compressed;
    }
    p.sink = w_.sink.as<float>();
    p.scale = static_cast<float>(config_.softmax_scale);  // d^-0.5, no YaRN mscale (§1.2)
    p.out = b.o;
    p.out_type = act_;
    p.out_token_stride = H * d;
    p.out_head_stride = d;
    p.n_tokens = plan.n_tokens();
    p.n_heads = H;
    p.qk_dim = p.v_dim = d;  // MQA: one shared K = V row (§3.8)
    p.rope_dim = config_.rope_head_dim;
    // deployed: the weights cast to bf16 for P·V, as the authors' kernel, FlashMLA and vLLM do (§3.8)
    p.math = profile_ == NumericsProfile::exact ? AttentionMath::f32 : AttentionMath::bf16;
    return p;
}

Status AttentionLayer::compressed_slots(const StepPlan& plan, const PlannedCompressed& c, const int32_t* rows,
                                        int64_t width, const LayerScratch& b) {
    SelectedSlotsParams p;
    p.selected = rows;
    p.positions = plan.positions();
    p.tables = c.tables;
    p.slots = b.compressed_slots;
    p.n_tokens = plan.n_tokens();
    p.width = width;
    p.ratio = c.ratio;
    p.block_size = c.block_size;
    p.n_slots = c.n_slots;
    p.selected_row_stride = width;
    p.slots_row_stride = width;
    return backend_.selected_slots(p);
}

Status AttentionLayer::forward(const StepBatch& batch, const StepPlan& plan, const float* x, float* out,
                               StageTimes* times, SelectionObserver* observer, Scratch& s) {
    const int64_t N = batch.n_tokens();
    if (N == 0) return Status::ok();
    const int64_t D = config_.hidden_size, H = config_.num_attention_heads, d = config_.head_dim;
    const int64_t Rq = config_.q_lora_rank, G = config_.o_groups, Ro = config_.o_lora_rank;
    const float eps = static_cast<float>(config_.rms_norm_eps);  // every norm of the layer (§3.10)
    const int64_t* positions = plan.positions();

    // The layer's sub-buffers, inside what plan_step reserved for the step.
    SIEVE_ASSIGN_OR_RETURN(const ScratchShape shape, scratch_shape(batch, plan, observer != nullptr));
    if (const size_t need = layer_scratch_bytes(shape); need > s.arena.capacity())
        return internal_error("deepseek_v4 layer {}: the step's scratch holds {} B, the layer needs {} B (an observer "
                              "set after plan_step?)",
                              layer_, s.arena.capacity(), need);
    WorkspaceCarver carver{static_cast<uint8_t*>(s.arena.data())};
    const LayerScratch b = carve_layer_scratch(carver, shape);

    // ---- query and K = V paths (§3.1, §3.2) ----
    {
        ScopedStageTimer timer(times, Stage::projections);
        SIEVE_RETURN_IF_ERROR(w_.wq_a.run(x, DType::f32, D, b.qa, act_, Rq, N, b.op));
        RmsNormParams qn;
        qn.x = b.qa;
        qn.y = b.qr;
        qn.weight = w_.q_norm.as<float>();
        qn.n_tokens = N;
        qn.dim = Rq;
        qn.x_token_stride = qn.y_token_stride = Rq;
        qn.eps = eps;
        qn.x_type = qn.y_type = act_;
        SIEVE_RETURN_IF_ERROR(backend_.rms_norm(qn));

        SIEVE_RETURN_IF_ERROR(w_.wq_b.run(b.qr, act_, Rq, b.q, act_, H * d, N, b.op));
        // Per-head weight-free RMSNorm (§2.2) in fp32, RoPE in fp32, one rounding to the activation type
        // (vLLM CPU qnorm_rope: "fp32 throughout, single rounding"), a few tokens at a time so that the
        // fp32 rows stay a small buffer (a 2048-token chunk would need 256 MiB).
        const int64_t chunk = shape.norm_tokens;
        for (int64_t t0 = 0; t0 < N; t0 += chunk) {
            const int64_t n = std::min(chunk, N - t0);
            void* q_rows = at(b.q, t0 * H * d, act_);
            RmsNormParams hn;
            hn.x = q_rows;
            hn.y = b.q32;
            hn.weight_mode = RmsNormWeight::none;
            hn.n_tokens = n;
            hn.n_heads = H;
            hn.dim = d;
            hn.x_token_stride = hn.y_token_stride = H * d;
            hn.x_head_stride = hn.y_head_stride = d;
            hn.eps = eps;
            hn.x_type = act_;
            hn.y_type = DType::f32;
            SIEVE_RETURN_IF_ERROR(backend_.rms_norm(hn));
            SIEVE_RETURN_IF_ERROR(rope(b.q32, DType::f32, q_rows, act_, positions + t0, n, H, d, false));
        }

        SIEVE_RETURN_IF_ERROR(w_.wkv.run(x, DType::f32, D, b.kv_raw, act_, d, N, b.op));
        RmsNormParams kn = qn;
        kn.x = b.kv_raw;
        kn.y = b.kv;
        kn.weight = w_.kv_norm.as<float>();
        kn.dim = d;
        kn.x_token_stride = kn.y_token_stride = d;
        SIEVE_RETURN_IF_ERROR(backend_.rms_norm(kn));
        SIEVE_RETURN_IF_ERROR(rope(b.kv, act_, b.kv, act_, positions, N, 1, d, false));

        // Every token's row goes into the window cache before anyone attends (§5 step 3).
        SIEVE_ASSIGN_OR_RETURN(BoundCache swa, bind_cache(batch, caches_.swa));
        SIEVE_RETURN_IF_ERROR(
            backend_.cache_store(record_store(b.kv, act_, d, N, plan.window().token_slots, swa, kv_layout_)));
    }

    // ---- compressors (§3.4), before the indexer scores and attention (§5 steps 4–5) ----
    if (w_.compressor) {
        ScopedStageTimer timer(times, Stage::compressor);
        SIEVE_RETURN_IF_ERROR(
            run_compressor(batch, plan, x, *w_.compressor, caches_.state, caches_.compressed, kv_layout_, b));
        if (w_.indexer_compressor)
            SIEVE_RETURN_IF_ERROR(run_compressor(batch, plan, x, *w_.indexer_compressor, caches_.indexer_state,
                                                 caches_.indexer_keys, key_layout_, b));
    }

    // ---- compressed rows each token reads (§3.5, §3.7) ----
    int64_t n_comp = 0;
    BoundCache comp;
    if (spec_.kind != DeepseekV4LayerKind::swa) {
        SIEVE_ASSIGN_OR_RETURN(comp, bind_cache(batch, caches_.compressed));
        SIEVE_ASSIGN_OR_RETURN(const PlannedCompressed* planned, plan.compressed(caches_.compressed.group));
        const int32_t* rows = nullptr;  // HCA: every visible entry (§3.5)
        n_comp = planned->visible;
        if (spec_.kind == DeepseekV4LayerKind::csa) {
            SIEVE_ASSIGN_OR_RETURN(const PlannedIndexer* ix, plan.indexer(caches_.indexer_keys.group));
            SIEVE_RETURN_IF_ERROR(select_top_k(batch, plan, *ix, x, times, observer, b, s, &rows));
            n_comp = ix->width;
        }
        SIEVE_RETURN_IF_ERROR(compressed_slots(plan, *planned, rows, n_comp, b));
    }

    // ---- sparse attention with sink (§3.8) ----
    {
        ScopedStageTimer timer(times, Stage::attention);
        SIEVE_ASSIGN_OR_RETURN(BoundCache swa, bind_cache(batch, caches_.swa));
        SIEVE_RETURN_IF_ERROR(
            backend_.sparse_attention(attention_params(plan, swa, n_comp > 0 ? &comp : nullptr, n_comp, b), b.op));
    }

    // ---- inverse RoPE and grouped output projection (§3.9) ----
    {
        ScopedStageTimer timer(times, Stage::output);
        // The inverse rotation in place over every head (only the rope dims change: nothing is copied, one
        // launch); the grouped wo_a then maps group g's heads to z's columns g·R_o … in one call.
        SIEVE_RETURN_IF_ERROR(rope(b.o, act_, b.o, act_, positions, N, H, d, true));  // undo the query position
        SIEVE_RETURN_IF_ERROR(w_.wo_a.run(b.o, act_, H * d, b.z, act_, G * Ro, N, b.op));
        SIEVE_RETURN_IF_ERROR(w_.wo_b.run(b.z, act_, G * Ro, out, DType::f32, D, N, b.op));
    }
    return Status::ok();
}

}  // namespace sieve::dsv4
