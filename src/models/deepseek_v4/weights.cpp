#include "models/deepseek_v4/weights.h"

#include <cstring>

#include <fmt/format.h>

#include "models/deepseek_v4/layout.h"

namespace sieve::dsv4 {

namespace {

class LayerLoader {
public:
    LayerLoader(WeightScope scope, NumericsProfile profile, Backend& backend)
        : scope_(scope), profile_(profile), backend_(backend) {}

    // exact: fp32 math (FP8 weights act as dequantized once to fp32: "Decisions for sieve");
    // deployed: vLLM CPU's W8A16 / bf16 math (§2.7 [vllm-cpu]).
    LinearMath math() const { return profile_ == NumericsProfile::exact ? LinearMath::f32 : LinearMath::bf16; }
    // Dense weights are held as f32 (exact) or bf16 (deployed: bf16 math rounds W to bf16 anyway, so the
    // values are the same and the memory half).
    DType dense_type() const { return profile_ == NumericsProfile::exact ? DType::f32 : DType::bf16; }

    // A [rows, cols] weight as a linear; `groups` > 1: a grouped one (ops/linear.h "Groups").
    Expected<PlannedLinear> linear(std::string_view leaf, int64_t rows, int64_t cols, int64_t groups = 1) {
        SIEVE_ASSIGN_OR_RETURN(SafetensorsTensorView view, scope_.raw(leaf));
        const std::string name = scope_.canonical_name(leaf);
        if (view.dtype == DType::f8_e4m3) {
            SIEVE_ASSIGN_OR_RETURN(Fp8BlockWeight w, scope_.get_fp8_block(leaf, rows, cols));
            if (w.block_rows != kLinearFp8Block || w.block_cols != kLinearFp8Block)
                return unsupported_error("tensor {}: FP8 blocks of {}×{}, the linear op takes {}×{} (§2.7)", name,
                                         w.block_rows, w.block_cols, kLinearFp8Block, kLinearFp8Block);
            LinearWeights lw;
            lw.weight = w.weight.data();
            lw.block_scale = w.scale.as<float>();
            lw.out_features = rows;
            lw.in_features = cols;
            lw.groups = groups;
            lw.weight_row_stride = cols;
            lw.weight_type = DType::f8_e4m3;
            lw.math = math();
            return PlannedLinear::prepare(backend_, lw, name);
        }
        SIEVE_ASSIGN_OR_RETURN(Tensor t, scope_.get(leaf, {rows, cols}, kWeightFloatDTypes, dense_type()));
        return dense_linear(t, 0, rows, name, groups);
    }

    // Rows [row0, row0 + rows) of a dense [*, cols] tensor as a linear (of `groups` groups).
    Expected<PlannedLinear> dense_linear(const Tensor& t, int64_t row0, int64_t rows, const std::string& name,
                                         int64_t groups = 1) {
        const int64_t cols = t.dim(1);
        LinearWeights lw;
        lw.weight = static_cast<const uint8_t*>(t.data()) + row0 * cols * static_cast<int64_t>(dtype_size(t.dtype()));
        lw.out_features = rows;
        lw.in_features = cols;
        lw.groups = groups;
        lw.weight_row_stride = cols;
        lw.weight_type = t.dtype();
        lw.math = math();
        return PlannedLinear::prepare(backend_, lw, name);
    }

    // A small f32 tensor (norm weights, sinks, position biases), uploaded to the backend.
    Expected<DeviceTensor> small_f32(std::string_view leaf, Shape shape) const {
        SIEVE_ASSIGN_OR_RETURN(Tensor t, scope_.get(leaf, std::move(shape), kWeightFloatDTypes, DType::f32));
        return DeviceTensor::upload(backend_, t, scope_.canonical_name(leaf));
    }

    Expected<CompressorWeights> compressor(std::string_view prefix, int64_t ratio, int64_t head_dim, bool overlap,
                                           int64_t hidden) {
        CompressorWeights c;
        c.ratio = ratio;
        c.head_dim = head_dim;
        c.overlap = overlap;
        const int64_t width = c.width();
        const LayerLoader sub(scope_.sub(prefix), profile_, backend_);
        // wkv and wgate stacked into one [2·width, D] linear: output row [a_s | b_s] (vLLM fused_wkv_wgate).
        SIEVE_ASSIGN_OR_RETURN(Tensor wkv, sub.scope_.get("wkv.weight", {width, hidden}, kWeightFloatOrFp8DTypes, dense_type()));
        SIEVE_ASSIGN_OR_RETURN(Tensor wgate,
                               sub.scope_.get("wgate.weight", {width, hidden}, kWeightFloatOrFp8DTypes, dense_type()));
        SIEVE_ASSIGN_OR_RETURN(Tensor fused, Tensor::zeros(dense_type(), {2 * width, hidden}));
        std::memcpy(fused.data(), wkv.data(), wkv.nbytes());
        std::memcpy(static_cast<uint8_t*>(fused.data()) + wkv.nbytes(), wgate.data(), wgate.nbytes());
        const std::string name = fmt::format("{}.{{wkv,wgate}}.weight", sub.scope_.prefix());
        SIEVE_ASSIGN_OR_RETURN(c.wkv_gate, dense_linear(fused, 0, 2 * width, name));
        SIEVE_ASSIGN_OR_RETURN(c.ape, sub.small_f32("ape", {ratio, width}));
        SIEVE_ASSIGN_OR_RETURN(c.norm, sub.small_f32("norm.weight", {head_dim}));
        return c;
    }

    WeightScope scope_;

private:
    NumericsProfile profile_;
    Backend& backend_;
};

Expected<LayerWeights> load(WeightStore& store, const DeepseekV4Config& c, int64_t layer, NumericsProfile profile,
                            Backend& backend) {
    const DeepseekV4Layer& l = c.layer(layer);
    const int64_t D = c.hidden_size, H = c.num_attention_heads, d = c.head_dim, G = c.o_groups;
    const int64_t Rq = c.q_lora_rank, Ro = c.o_lora_rank;
    LayerLoader ld(store.scope(deepseek_v4_attention_prefix(c, layer)), profile, backend);
    LayerWeights w;
    SIEVE_ASSIGN_OR_RETURN(w.sink, ld.small_f32("attn_sink", {H}));
    SIEVE_ASSIGN_OR_RETURN(w.wq_a, ld.linear("wq_a.weight", Rq, D));
    SIEVE_ASSIGN_OR_RETURN(w.q_norm, ld.small_f32("q_norm.weight", {Rq}));
    SIEVE_ASSIGN_OR_RETURN(w.wq_b, ld.linear("wq_b.weight", H * d, Rq));
    SIEVE_ASSIGN_OR_RETURN(w.wkv, ld.linear("wkv.weight", d, D));
    SIEVE_ASSIGN_OR_RETURN(w.kv_norm, ld.small_f32("kv_norm.weight", {d}));
    // wo_a rows g·R_o + r, columns (h − g·H/G)·d + i (§6 layout conventions): one grouped linear of G groups
    // of [R_o, (H/G)·d] (ops/linear.h "Groups"). FP8 with R_o a multiple of 128 (the release: 1024): each
    // group's rows are whole 128-row scale blocks, kept packed; otherwise dequantized like [ref] convert.py
    // (fp32 in exact, bf16 in deployed — the same values, e4m3 · 2^k being exact in bf16).
    {
        SIEVE_ASSIGN_OR_RETURN(SafetensorsTensorView view, ld.scope_.raw("wo_a.weight"));
        if (view.dtype == DType::f8_e4m3 && Ro % kLinearFp8Block == 0) {
            SIEVE_ASSIGN_OR_RETURN(w.wo_a, ld.linear("wo_a.weight", G * Ro, H / G * d, G));
        } else {
            SIEVE_ASSIGN_OR_RETURN(Tensor wo_a, ld.scope_.get("wo_a.weight", {G * Ro, H / G * d},
                                                              kWeightFloatOrFp8DTypes, ld.dense_type()));
            SIEVE_ASSIGN_OR_RETURN(w.wo_a, ld.dense_linear(wo_a, 0, G * Ro, ld.scope_.canonical_name("wo_a.weight"), G));
        }
    }
    SIEVE_ASSIGN_OR_RETURN(w.wo_b, ld.linear("wo_b.weight", D, G * Ro));
    if (l.kind != DeepseekV4LayerKind::swa) {
        SIEVE_ASSIGN_OR_RETURN(w.compressor, ld.compressor("compressor", l.compress_ratio, d, l.compressor_overlap, D));
    }
    if (l.has_indexer) {
        SIEVE_ASSIGN_OR_RETURN(w.indexer_wq_b, ld.linear("indexer.wq_b.weight", c.index_n_heads * c.index_head_dim, Rq));
        SIEVE_ASSIGN_OR_RETURN(w.indexer_weights_proj, ld.linear("indexer.weights_proj.weight", c.index_n_heads, D));
        // The indexer's compressor always overlaps (ratio 4 in the release, §3.6).
        SIEVE_ASSIGN_OR_RETURN(w.indexer_compressor,
                               ld.compressor("indexer.compressor", l.compress_ratio, c.index_head_dim, true, D));
    }
    return w;
}

}  // namespace

Expected<LayerWeights> load_layer_weights(WeightStore& store, const DeepseekV4Config& config, int64_t layer,
                                          NumericsProfile profile, Backend& backend) {
    auto w = load(store, config, layer, profile, backend);
    if (!w.has_value())
        return w.status().with_context(fmt::format(
            "deepseek_v4 layer {} ({}{})", layer, config.is_mtp_layer(layer) ? "MTP, " : "",
            deepseek_v4_layer_kind_name(config.layer(layer).kind)));
    return w;
}

}  // namespace sieve::dsv4
