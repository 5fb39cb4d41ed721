#include "models/dsa_mla/weights.h"

#include <cstring>
#include <string>

#include <fmt/format.h>

#include "models/dsa_mla/layout.h"

namespace sieve::dsa_mla {

namespace {

// A [rows, cols] weight as read: f32 (float checkpoints widened exactly) or packed FP8 with its
// [⌈rows/128⌉, ⌈cols/128⌉] f32 block multipliers (ops/linear.h).
struct HostMatrix {
    std::string name;
    int64_t rows = 0, cols = 0;
    DType type = DType::f32;  // f32 | f8_e4m3
    Tensor data;              // [rows, cols]
    Tensor scale;             // f8_e4m3 only
};

int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

// What a layer load needs besides the tensors.
struct LoadContext {
    Backend& backend;
    LinearMath math;
    bool keep_fp8;  // FP8 stays packed only with the 128×128 blocks the linear op knows (ops/linear.h)
};

Expected<HostMatrix> read_matrix(const LoadContext& lc, const WeightScope& scope, std::string_view leaf, int64_t rows,
                                 int64_t cols) {
    HostMatrix m;
    m.name = scope.canonical_name(leaf);
    m.rows = rows;
    m.cols = cols;
    SIEVE_ASSIGN_OR_RETURN(SafetensorsTensorView raw, scope.raw(leaf));
    const bool fp8 = raw.dtype && *raw.dtype == DType::f8_e4m3;
    if (fp8 && lc.keep_fp8) {
        SIEVE_ASSIGN_OR_RETURN(Fp8BlockWeight w, scope.get_fp8_block(leaf, rows, cols));
        SIEVE_ASSIGN_OR_RETURN(m.data, Tensor::zeros(DType::u8, {rows, cols}));
        std::memcpy(m.data.data(), w.weight.data(), w.weight.size());
        m.scale = std::move(w.scale);
        m.type = DType::f8_e4m3;
        return m;
    }
    // Float weights, or FP8 with another block geometry (dequantized by the store, dsa_mla.md §3.6).
    SIEVE_ASSIGN_OR_RETURN(m.data, scope.get(leaf, {rows, cols}, kWeightFloatOrFp8DTypes, DType::f32));
    return m;
}

// W as f32 (FP8: e4m3 · block multiplier, ops/linear.h).
Expected<Tensor> to_f32(const HostMatrix& m) {
    if (m.type == DType::f32) {
        SIEVE_ASSIGN_OR_RETURN(Tensor copy, Tensor::zeros(DType::f32, {m.rows, m.cols}));
        std::memcpy(copy.data(), m.data.data(), copy.nbytes());
        return copy;
    }
    SIEVE_ASSIGN_OR_RETURN(Tensor out, Tensor::zeros(DType::f32, {m.rows, m.cols}));
    const uint8_t* w = m.data.as<uint8_t>();      // [rows, cols]
    const float* s = m.scale.as<float>();         // [⌈rows/128⌉, ⌈cols/128⌉]
    float* y = out.as<float>();                   // [rows, cols]
    const int64_t scale_cols = ceil_div(m.cols, kLinearFp8Block);
    for (int64_t o = 0; o < m.rows; ++o)
        for (int64_t i = 0; i < m.cols; ++i)
            y[o * m.cols + i] =
                fp8_e4m3_to_f32(w[o * m.cols + i]) * s[(o / kLinearFp8Block) * scale_cols + i / kLinearFp8Block];
    return out;
}

// [a ; b] stacked by rows. FP8 stays packed when a's rows end on a 128-row block boundary (the block
// scales then stack too); otherwise both are widened to f32.
Expected<HostMatrix> concat_rows(const HostMatrix& a, const HostMatrix& b) {
    HostMatrix m;
    m.name = a.name + " ; " + b.name;
    m.rows = a.rows + b.rows;
    m.cols = a.cols;
    if (a.cols != b.cols)
        return internal_error("concat {}: {} and {} columns differ", m.name, a.cols, b.cols);
    if (a.type == DType::f8_e4m3 && b.type == DType::f8_e4m3 && a.rows % kLinearFp8Block == 0) {
        m.type = DType::f8_e4m3;
        SIEVE_ASSIGN_OR_RETURN(m.data, Tensor::zeros(DType::u8, {m.rows, m.cols}));
        std::memcpy(m.data.data(), a.data.data(), a.data.nbytes());
        std::memcpy(m.data.as<uint8_t>() + a.data.nbytes(), b.data.data(), b.data.nbytes());
        const int64_t sc = ceil_div(m.cols, kLinearFp8Block);
        SIEVE_ASSIGN_OR_RETURN(m.scale, Tensor::zeros(DType::f32, {ceil_div(m.rows, kLinearFp8Block), sc}));
        std::memcpy(m.scale.data(), a.scale.data(), a.scale.nbytes());
        std::memcpy(m.scale.as<uint8_t>() + a.scale.nbytes(), b.scale.data(), b.scale.nbytes());
        return m;
    }
    SIEVE_ASSIGN_OR_RETURN(Tensor fa, to_f32(a));
    SIEVE_ASSIGN_OR_RETURN(Tensor fb, to_f32(b));
    SIEVE_ASSIGN_OR_RETURN(m.data, Tensor::zeros(DType::f32, {m.rows, m.cols}));
    std::memcpy(m.data.data(), fa.data(), fa.nbytes());
    std::memcpy(m.data.as<uint8_t>() + fa.nbytes(), fb.data(), fb.nbytes());
    return m;
}

Expected<PlannedLinear> prepare(Backend& backend, const void* weight, const float* block_scale, DType type,
                               int64_t rows, int64_t cols, int64_t row_stride, LinearMath math, std::string_view name) {
    LinearWeights w;
    w.weight = weight;
    w.block_scale = block_scale;
    w.out_features = rows;
    w.in_features = cols;
    w.weight_row_stride = row_stride;
    w.weight_type = type;
    w.math = math;
    return PlannedLinear::prepare(backend, w, fmt::format("weight {}", name));
}

Expected<PlannedLinear> prepare(const LoadContext& lc, const HostMatrix& m) {
    return prepare(lc.backend, m.data.data(), m.type == DType::f8_e4m3 ? m.scale.as<float>() : nullptr, m.type, m.rows,
                   m.cols, m.cols, lc.math, m.name);
}

// A small f32 vector (norm weights, biases, sinks), uploaded to the backend.
Expected<DeviceTensor> read_vector(const LoadContext& lc, const WeightScope& scope, std::string_view leaf, int64_t n) {
    SIEVE_ASSIGN_OR_RETURN(Tensor t, scope.get(leaf, {n}, kWeightFloatDTypes, DType::f32));
    return DeviceTensor::upload(lc.backend, t, scope.canonical_name(leaf));
}

// Leaf names of the two checkpoint layouts (weights.h).
struct LayoutNames {
    const char* q_a_proj;
    const char* q_a_norm;
    const char* q_b_proj;
    const char* kv_a_proj;
    const char* kv_a_norm;
    const char* kv_b_proj;
    const char* o_proj;
};
constexpr LayoutNames kHfNames{"q_a_proj.weight",          "q_a_layernorm.weight",  "q_b_proj.weight",
                               "kv_a_proj_with_mqa.weight", "kv_a_layernorm.weight", "kv_b_proj.weight",
                               "o_proj.weight"};
constexpr LayoutNames kDeepseekNames{"wq_a.weight",  "q_norm.weight", "wq_b.weight", "wkv_a.weight",
                                     "kv_norm.weight", "wkv_b.weight", "wo.weight"};

// The layer's scope and leaf names: the HF layout or the DeepSeek one, exactly one present.
Expected<std::pair<WeightScope, const LayoutNames*>> layer_scope(WeightStore& store, const DsaMlaConfig& c,
                                                                 int64_t layer) {
    const WeightScope hf = store.scope(dsa_mla_attention_prefix(c, layer));
    const WeightScope ds = store.scope(fmt::format("layers.{}.attn", layer));
    SIEVE_ASSIGN_OR_RETURN(bool has_hf, hf.has(kHfNames.q_a_proj));
    SIEVE_ASSIGN_OR_RETURN(bool has_ds, ds.has(kDeepseekNames.q_a_proj));
    if (has_hf && has_ds)
        return corrupt_error("layer {}: the checkpoint holds both {} and {}; expected one name layout", layer,
                             hf.canonical_name(kHfNames.q_a_proj), ds.canonical_name(kDeepseekNames.q_a_proj));
    if (!has_hf && !has_ds)
        return not_found_error("layer {}: neither {} (HF layout) nor {} (DeepSeek layout) is in the checkpoint", layer,
                               hf.canonical_name(kHfNames.q_a_proj), ds.canonical_name(kDeepseekNames.q_a_proj));
    if (has_hf) return std::make_pair(hf, &kHfNames);
    return std::make_pair(ds, &kDeepseekNames);
}

Status load_gate_and_sink(const LoadContext& lc, const DsaMlaConfig& c, const WeightScope& scope, LayerWeights& w) {
    const int64_t H = c.num_attention_heads, Dv = c.v_head_dim, D = c.hidden_size;
    SIEVE_ASSIGN_OR_RETURN(bool has_gate, scope.has("linear_gate.weight"));
    SIEVE_ASSIGN_OR_RETURN(bool has_sink, scope.has("learnable_sink_param"));
    if (c.model == DsaMlaModel::deepseek_v32) return Status::ok();  // no gate, no sink (§1.1); extra tensors stay unused
    // "Decisions for sieve" (HY V4): the checkpoint decides; the config must agree with it.
    if (has_gate != (c.output_gate != DsaOutputGate::none))
        return invalid_argument_error("layer {}: the config announces output gate '{}' but {} is {}", w.layer,
                                      dsa_output_gate_name(c.output_gate), scope.canonical_name("linear_gate.weight"),
                                      has_gate ? "present" : "absent");
    if (has_sink != c.has_attention_sink)
        return invalid_argument_error("layer {}: the config says learnable_sink = {} but {} is {}", w.layer,
                                      c.has_attention_sink, scope.canonical_name("learnable_sink_param"),
                                      has_sink ? "present" : "absent");
    if (has_gate) {
        const int64_t width = c.output_gate == DsaOutputGate::elementwise ? H * Dv : H;  // §2.9
        SIEVE_ASSIGN_OR_RETURN(HostMatrix g, read_matrix(lc, scope, "linear_gate.weight", width, D));
        SIEVE_ASSIGN_OR_RETURN(w.gate, prepare(lc, g));
        w.gate_mode = c.output_gate;
    }
    if (has_sink) {
        SIEVE_ASSIGN_OR_RETURN(w.sink, read_vector(lc, scope, "learnable_sink_param", H));
    }
    return Status::ok();
}

Status load_indexer(const LoadContext& lc, const DsaMlaConfig& c, const WeightScope& attn, LayerWeights& w) {
    const WeightScope scope = attn.sub("indexer");
    const int64_t D = c.hidden_size, Rq = c.q_lora_rank, Hi = c.index_n_heads, Di = c.index_head_dim;
    SIEVE_ASSIGN_OR_RETURN(HostMatrix wq_b, read_matrix(lc, scope, "wq_b.weight", Hi * Di, Rq));
    SIEVE_ASSIGN_OR_RETURN(w.indexer_wq_b, prepare(lc, wq_b));
    SIEVE_ASSIGN_OR_RETURN(HostMatrix wk, read_matrix(lc, scope, "wk.weight", Di, D));
    SIEVE_ASSIGN_OR_RETURN(HostMatrix wp, read_matrix(lc, scope, "weights_proj.weight", Hi, D));
    SIEVE_ASSIGN_OR_RETURN(HostMatrix fused, concat_rows(wk, wp));
    SIEVE_ASSIGN_OR_RETURN(w.indexer_wk_weights, prepare(lc, fused));
    SIEVE_ASSIGN_OR_RETURN(w.k_norm_weight, read_vector(lc, scope, "k_norm.weight", Di));
    SIEVE_ASSIGN_OR_RETURN(w.k_norm_bias, read_vector(lc, scope, "k_norm.bias", Di));
    return Status::ok();
}

}  // namespace

Expected<LayerWeights> load_layer_weights(const DsaMlaConfig& c, int64_t layer, WeightStore& store, Backend& backend,
                                          NumericsProfile profile) {
    if (layer < 0 || layer >= c.n_layers_with_mtp())
        return invalid_argument_error("layer {} is not a layer of this {} model ({} layers, {} MTP layers after them)",
                                      layer, dsa_mla_model_name(c.model), c.num_hidden_layers, c.mtp_layers.size());
    const LoadContext lc{backend, profile == NumericsProfile::exact ? LinearMath::f32 : LinearMath::bf16,
                         store.options().fp8_block_rows == kLinearFp8Block &&
                             store.options().fp8_block_cols == kLinearFp8Block};
    const int64_t D = c.hidden_size, H = c.num_attention_heads, Rq = c.q_lora_rank, R = c.kv_lora_rank;
    const int64_t Dr = c.qk_rope_head_dim, Dn = c.qk_nope_head_dim, Dv = c.v_head_dim, Dqk = c.qk_head_dim;
    LayerWeights w;
    w.layer = layer;
    w.kind = c.layer(layer).kind;
    w.topk_source_layer = c.layer(layer).topk_source_layer;
    SIEVE_ASSIGN_OR_RETURN(auto found, layer_scope(store, c, layer));
    const WeightScope& scope = found.first;
    const LayoutNames& n = *found.second;

    SIEVE_ASSIGN_OR_RETURN(HostMatrix q_a, read_matrix(lc, scope, n.q_a_proj, Rq, D));
    SIEVE_ASSIGN_OR_RETURN(HostMatrix kv_a, read_matrix(lc, scope, n.kv_a_proj, R + Dr, D));
    SIEVE_ASSIGN_OR_RETURN(w.q_a, prepare(lc, q_a));
    SIEVE_ASSIGN_OR_RETURN(w.kv_a, prepare(lc, kv_a));
    SIEVE_ASSIGN_OR_RETURN(w.q_a_norm, read_vector(lc, scope, n.q_a_norm, Rq));
    SIEVE_ASSIGN_OR_RETURN(w.kv_a_norm, read_vector(lc, scope, n.kv_a_norm, R));
    SIEVE_ASSIGN_OR_RETURN(HostMatrix q_b, read_matrix(lc, scope, n.q_b_proj, H * Dqk, Rq));
    SIEVE_ASSIGN_OR_RETURN(w.q_b, prepare(lc, q_b));
    SIEVE_ASSIGN_OR_RETURN(HostMatrix o, read_matrix(lc, scope, n.o_proj, D, H * Dv));
    SIEVE_ASSIGN_OR_RETURN(w.o_proj, prepare(lc, o));

    // kv_b_proj [H·(Dn + Dv), R], viewed [H, Dn + Dv, R]: W_UK[h] = rows [0, Dn), W_UV[h] = rows [Dn, Dn + Dv)
    // of head h (§2.5), dequantized once (§3.6).
    SIEVE_ASSIGN_OR_RETURN(HostMatrix kv_b_host, read_matrix(lc, scope, n.kv_b_proj, H * (Dn + Dv), R));
    SIEVE_ASSIGN_OR_RETURN(Tensor kv_b, to_f32(kv_b_host));
    const DType absorbed = lc.math == LinearMath::bf16 ? DType::bf16 : DType::f32;  // ops/mla_head_proj.h
    SIEVE_ASSIGN_OR_RETURN(Tensor w_uk, Tensor::zeros(absorbed, {H, Dn, R}));
    SIEVE_ASSIGN_OR_RETURN(Tensor w_uv, Tensor::zeros(absorbed, {H, R, Dv}));
    auto put = [&](Tensor& t, int64_t i, float v) {
        if (absorbed == DType::bf16)
            t.as<uint16_t>()[i] = f32_to_bf16(v);  // bf16 math: W rounded once at load (ops/linear.h)
        else
            t.as<float>()[i] = v;
    };
    for (int64_t h = 0; h < H; ++h) {
        const float* head = kv_b.as<float>() + h * (Dn + Dv) * R;  // [Dn + Dv, R]
        for (int64_t d = 0; d < Dn; ++d)
            for (int64_t r = 0; r < R; ++r) put(w_uk, (h * Dn + d) * R + r, head[d * R + r]);
        for (int64_t v = 0; v < Dv; ++v)
            for (int64_t r = 0; r < R; ++r) put(w_uv, (h * R + r) * Dv + v, head[(Dn + v) * R + r]);
    }
    SIEVE_ASSIGN_OR_RETURN(w.w_uk, DeviceTensor::upload(backend, w_uk, scope.canonical_name(n.kv_b_proj) + " (W_UK)"));
    SIEVE_ASSIGN_OR_RETURN(w.w_uv, DeviceTensor::upload(backend, w_uv, scope.canonical_name(n.kv_b_proj) + " (W_UV)"));
    SIEVE_RETURN_IF_ERROR(load_gate_and_sink(lc, c, scope, w));
    if (w.kind == DsaLayerKind::full) SIEVE_RETURN_IF_ERROR(load_indexer(lc, c, scope, w));
    return w;
}

}  // namespace sieve::dsa_mla
