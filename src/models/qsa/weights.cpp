#include "models/qsa/weights.h"

#include <cstring>

#include <fmt/format.h>

#include "models/qsa/layout.h"

namespace sieve::qsa {

ProjectionLayout projection_layout(const QsaConfig& c) {
    ProjectionLayout l;
    const int64_t D = c.head_dim;
    l.q_gate = 0;
    l.k = 2 * c.num_attention_heads * D;
    l.v = l.k + c.num_key_value_heads * D;
    l.index_q = l.v + c.num_key_value_heads * D;
    l.index_k = l.index_q + c.indexer_n_heads * c.indexer_head_dim;
    l.total = l.index_k + c.indexer_head_dim;
    return l;
}

Expected<LayerWeights> load_layer_weights(WeightStore& store, const QsaConfig& c, int64_t layer, DType dtype) {
    if (!c.is_qsa_layer(layer)) return invalid_argument_error("layer {} is not a QSA layer of this model", layer);
    if (!c.has_indexer)
        return invalid_argument_error("layer {}: the config has no indexer_* fields; a QSA layer cannot run without "
                                      "its indexer (qsa.md §2.1, §2.2)", layer);
    const int64_t H = c.hidden_size, Hq = c.num_attention_heads, Hkv = c.num_key_value_heads, D = c.head_dim;
    const int64_t Hi = c.indexer_n_heads, Di = c.indexer_head_dim;
    const ProjectionLayout pl = projection_layout(c);
    const WeightScope s = store.scope(qsa_attention_prefix(c, layer));

    LayerWeights w;
    w.layer = layer;
    SIEVE_ASSIGN_OR_RETURN(w.input_proj, Tensor::zeros(dtype, {pl.total, H}));
    struct Part {
        const char* leaf;
        int64_t row0, rows;
    };
    const Part parts[] = {{"q_proj.weight", pl.q_gate, 2 * Hq * D},
                          {"k_proj.weight", pl.k, Hkv * D},
                          {"v_proj.weight", pl.v, Hkv * D},
                          {"indexer.index_qk_proj.weight", pl.index_q, (Hi + 1) * Di}};
    const size_t elem = dtype_size(dtype);
    for (const Part& part : parts) {
        SIEVE_ASSIGN_OR_RETURN(Tensor t, s.get(part.leaf, {part.rows, H}, kWeightFloatOrFp8DTypes, dtype));
        std::memcpy(static_cast<uint8_t*>(w.input_proj.data()) + static_cast<size_t>(part.row0 * H) * elem, t.data(),
                    t.nbytes());
    }
    SIEVE_ASSIGN_OR_RETURN(w.o_proj, s.get("o_proj.weight", {H, Hq * D}, kWeightFloatOrFp8DTypes, dtype));
    SIEVE_ASSIGN_OR_RETURN(w.q_norm, s.get("q_norm.weight", {D}, kWeightFloatDTypes, DType::f32));
    SIEVE_ASSIGN_OR_RETURN(w.k_norm, s.get("k_norm.weight", {D}, kWeightFloatDTypes, DType::f32));
    SIEVE_ASSIGN_OR_RETURN(w.index_q_norm, s.get("indexer.q_layernorm.weight", {Di}, kWeightFloatDTypes, DType::f32));
    SIEVE_ASSIGN_OR_RETURN(w.index_k_norm, s.get("indexer.k_layernorm.weight", {Di}, kWeightFloatDTypes, DType::f32));
    return w;
}

}  // namespace sieve::qsa
