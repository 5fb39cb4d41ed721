// The layer's forward: query and K=V paths, caches, attention and output projection. The
// compressors are in layer_compressor.cpp, the indexer selection in layer_indexer.cpp.
#include "models/deepseek_v4/layer.h"

#include <fmt/format.h>

#include "models/deepseek_v4/layout.h"
#include "ops/rope.h"

namespace sieve::dsv4 {

namespace {

// Tokens whose queries are normalized and rotated in one fp32 buffer (§2.2, §2.3).
constexpr int64_t kQueryNormTokens = 16;

// Byte offset helper for activation buffers whose element type is decided at run time.
void* at(void* base, int64_t elements, DType t) {
    return static_cast<uint8_t*>(base) + elements * static_cast<int64_t>(dtype_size(t));
}

}  // namespace

AttentionLayer::AttentionLayer(const DeepseekV4Config& config, int64_t layer, LayerWeights weights, LayerCaches caches,
                               NumericsProfile profile, Backend& backend)
    : config_(config),
      spec_(config.layers[static_cast<size_t>(layer)]),
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

Status AttentionLayer::forward(const StepBatch& batch, const float* x, float* out, StageTimes* times,
                               SelectionObserver* observer, Scratch& s) {
    const int64_t N = batch.n_tokens();
    if (N == 0) return Status::ok();
    const int64_t D = config_.hidden_size, H = config_.num_attention_heads, d = config_.head_dim;
    const int64_t Rq = config_.q_lora_rank, G = config_.o_groups, Ro = config_.o_lora_rank, Hg = config_.heads_per_group;
    const float eps = static_cast<float>(config_.rms_norm_eps);  // every norm of the layer (§3.10)
    const int64_t* positions = batch.positions.data();
    WorkspaceBuffer& ws = s.workspace;

    // ---- query and K = V paths (§3.1, §3.2) ----
    // [N, q_lora_rank] act: q_norm output, also the indexer's input
    SIEVE_ASSIGN_OR_RETURN(void* qr, act_buffer(s.qr, N * Rq, "q_norm rows"));
    void* q_att = nullptr;           // [N, H, d] act: the rotated queries
    {
        ScopedStageTimer timer(times, Stage::projections);
        SIEVE_ASSIGN_OR_RETURN(void* qa, act_buffer(s.qa, N * Rq, "wq_a rows"));  // [N, q_lora_rank] act
        SIEVE_RETURN_IF_ERROR(w_.wq_a.run(x, DType::f32, D, qa, act_, Rq, N, ws));
        RmsNormParams qn;
        qn.x = qa;
        qn.y = qr;
        qn.weight = w_.q_norm.as<float>();
        qn.n_tokens = N;
        qn.dim = Rq;
        qn.x_token_stride = qn.y_token_stride = Rq;
        qn.eps = eps;
        qn.x_type = qn.y_type = act_;
        SIEVE_RETURN_IF_ERROR(backend_.rms_norm(qn));

        // [N, H, d] act: wq_b output, then the rotated queries
        SIEVE_ASSIGN_OR_RETURN(void* q, act_buffer(s.q, N * H * d, "queries"));
        SIEVE_RETURN_IF_ERROR(w_.wq_b.run(qr, act_, Rq, q, act_, H * d, N, ws));
        // Per-head weight-free RMSNorm (§2.2) in fp32, RoPE in fp32, one rounding to the activation type
        // (vLLM CPU qnorm_rope: "fp32 throughout, single rounding"), a few tokens at a time so that the
        // fp32 rows stay a small buffer (a 2048-token chunk would need 256 MiB).
        const int64_t chunk = std::min<int64_t>(N, kQueryNormTokens);
        // [chunk, H, d] f32: head-normed
        SIEVE_ASSIGN_OR_RETURN(float* q32, sized(s.q32, chunk * H * d, "head-normed queries"));
        for (int64_t t0 = 0; t0 < N; t0 += chunk) {
            const int64_t n = std::min(chunk, N - t0);
            void* q_rows = at(q, t0 * H * d, act_);
            RmsNormParams hn;
            hn.x = q_rows;
            hn.y = q32;
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
            SIEVE_RETURN_IF_ERROR(rope(q32, DType::f32, q_rows, act_, positions + t0, n, H, d, false));
        }
        q_att = q;

        SIEVE_ASSIGN_OR_RETURN(float* kv, sized(s.kv, 2 * N * d, "K = V rows"));
        void* kv_raw = kv;        // [N, d] act: wkv output
        void* kv_n = kv + N * d;  // [N, d] act: normed and rotated K = V rows
        SIEVE_RETURN_IF_ERROR(w_.wkv.run(x, DType::f32, D, kv_raw, act_, d, N, ws));
        RmsNormParams kn = qn;
        kn.x = kv_raw;
        kn.y = kv_n;
        kn.weight = w_.kv_norm.as<float>();
        kn.dim = d;
        kn.x_token_stride = kn.y_token_stride = d;
        SIEVE_RETURN_IF_ERROR(backend_.rms_norm(kn));
        SIEVE_RETURN_IF_ERROR(rope(kv_n, act_, kv_n, act_, positions, N, 1, d, false));

        // Every token's row goes into the window cache before anyone attends (§5 step 3).
        SIEVE_ASSIGN_OR_RETURN(BoundCache swa, bind_cache(batch, caches_.swa));
        SIEVE_ASSIGN_OR_RETURN(int32_t* slots, sized(s.swa_slots, N, "window slots"));  // [N]
        SIEVE_RETURN_IF_ERROR(token_slots(batch, swa, slots));
        SIEVE_RETURN_IF_ERROR(backend_.cache_store(record_store(kv_n, act_, d, N, slots, swa, kv_layout_)));
    }

    // ---- compressors (§3.4), before the indexer scores and attention (§5 steps 4–5) ----
    if (w_.compressor) {
        ScopedStageTimer timer(times, Stage::compressor);
        SIEVE_RETURN_IF_ERROR(run_compressor(batch, x, *w_.compressor, caches_.state, caches_.compressed, kv_layout_, s));
        if (w_.indexer_compressor)
            SIEVE_RETURN_IF_ERROR(run_compressor(batch, x, *w_.indexer_compressor, caches_.indexer_state,
                                                 caches_.indexer_keys, key_layout_, s));
    }

    // ---- compressed rows each token reads (§3.5, §3.7) ----
    int64_t n_comp = 0;
    int32_t* comp_list = nullptr;  // [N, n_comp] compressed-cache slots each token reads, −1 = none
    BoundCache comp;
    if (spec_.kind != DeepseekV4LayerKind::swa) {
        SIEVE_ASSIGN_OR_RETURN(comp, bind_cache(batch, caches_.compressed));
        const int64_t m = spec_.compress_ratio;
        if (spec_.kind == DeepseekV4LayerKind::hca) {
            n_comp = batch.max_visible_entries(m);
            SIEVE_ASSIGN_OR_RETURN(comp_list, sized(s.comp_list, N * n_comp, "compressed slot lists"));
            SIEVE_RETURN_IF_ERROR(visible_entry_slots(batch, comp, m, n_comp, comp_list));
        } else {
            SIEVE_RETURN_IF_ERROR(select_top_k(batch, x, qr, times, observer, s, &n_comp));
            SIEVE_ASSIGN_OR_RETURN(comp_list, sized(s.comp_list, N * n_comp, "compressed slot lists"));
            SIEVE_RETURN_IF_ERROR(selected_entry_slots(batch, comp, m, s.selected.data(), n_comp, comp_list));
        }
    }

    // ---- sparse attention with sink (§3.8) ----
    SIEVE_ASSIGN_OR_RETURN(void* o, act_buffer(s.o, N * H * d, "attention output"));  // [N, H, d] act: attention output
    {
        ScopedStageTimer timer(times, Stage::attention);
        SIEVE_ASSIGN_OR_RETURN(BoundCache swa, bind_cache(batch, caches_.swa));
        // min(w, the most positions a token sees): the window of p is [p − w + 1, p] ∩ [0, p] (§3.2), so a
        // wider list would only hold −1, and sliding_window may be far above any context.
        const int64_t w = std::min(config_.sliding_window, batch.max_visible_entries(1));
        SIEVE_ASSIGN_OR_RETURN(int32_t* window, sized(s.window, N * w, "window slot lists"));  // [N, w]
        SIEVE_RETURN_IF_ERROR(window_slots(batch, swa, w, window));
        SparseMqaParams p;
        p.q = q_att;
        p.q_type = act_;
        p.q_token_stride = H * d;
        p.q_head_stride = d;
        p.window = swa.view;
        p.window_format = kv_layout_.format;
        p.window_slots = window;
        p.n_window = w;
        p.window_slots_stride = w;
        if (n_comp > 0) {
            p.compressed = comp.view;
            p.compressed_format = kv_layout_.format;
            p.compressed_slots = comp_list;
            p.n_compressed = n_comp;
            p.compressed_slots_stride = n_comp;
        }
        p.sink = w_.sink.as<float>();
        p.scale = static_cast<float>(config_.softmax_scale);  // d^-0.5, no YaRN mscale (§1.2)
        p.out = o;
        p.out_type = act_;
        p.out_token_stride = H * d;
        p.out_head_stride = d;
        p.n_tokens = N;
        p.n_heads = H;
        p.head_dim = d;
        p.rope_dim = config_.rope_head_dim;
        SIEVE_ASSIGN_OR_RETURN(const Workspace attention_ws,
                               ws.workspace(backend_, backend_.sparse_mqa_workspace_size(p), "attention"));
        SIEVE_RETURN_IF_ERROR(backend_.sparse_mqa(p, attention_ws));
    }

    // ---- inverse RoPE and grouped output projection (§3.9) ----
    {
        ScopedStageTimer timer(times, Stage::output);
        // The inverse rotation writes each group's heads as one contiguous [N, (H/G)·d] block, so that every
        // wo_a GEMM reads a dense input (a strided one can be far slower, e.g. in oneDNN).
        void* og = q_att;  // [G, N, (H/G)·d] act, in the queries' buffer: attention has read them
        for (int64_t g = 0; g < G; ++g) {
            RopeParams p;
            p.x = at(o, g * Hg * d, act_);
            p.y = at(og, g * N * Hg * d, act_);
            p.positions = positions;
            p.inv_freq = rope_.inv_freq.as<float>();
            p.n_tokens = N;
            p.n_heads = Hg;
            p.head_dim = d;
            p.rot_dim = config_.rope_head_dim;
            p.x_token_stride = H * d;
            p.y_token_stride = Hg * d;
            p.x_head_stride = p.y_head_stride = d;
            p.attention_factor = rope_.attention_factor;
            p.pairing = RopePairing::interleaved;
            p.slice = RopeSlice::last;
            p.inverse = true;  // undo the query position (§3.9)
            p.x_type = p.y_type = act_;
            p.positions_type = DType::i64;
            SIEVE_RETURN_IF_ERROR(backend_.rope(p));
        }
        SIEVE_ASSIGN_OR_RETURN(void* z, act_buffer(s.z, N * G * Ro, "grouped output rows"));  // [N, G·o_lora_rank] act
        for (int64_t g = 0; g < G; ++g)
            SIEVE_RETURN_IF_ERROR(w_.wo_a[static_cast<size_t>(g)].run(at(og, g * N * Hg * d, act_), act_, Hg * d,
                                                                       at(z, g * Ro, act_), act_, G * Ro, N, ws));
        SIEVE_RETURN_IF_ERROR(w_.wo_b.run(z, act_, G * Ro, out, DType::f32, D, N, ws));
    }
    return Status::ok();
}

}  // namespace sieve::dsv4
