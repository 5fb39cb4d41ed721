// libFuzzer target: parse_model_config on arbitrary bytes. It must return a value or a Status for
// every input (no crash, no exception, no internal error), and a value must satisfy the invariants
// the parsers promise.
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "core/assert.h"
#include "sieve/io/config.h"

namespace {

void check_rope(const sieve::RopeConfig& rope) {
    SIEVE_ASSERT(rope.theta > 1.0);
    SIEVE_ASSERT(rope.rotated_dims >= 2 && rope.rotated_dims % 2 == 0);
    if (rope.yarn) {
        SIEVE_ASSERT(rope.yarn->factor >= 1.0 && rope.yarn->attention_factor > 0.0);
        sieve::RopeConfigYarnRange range = sieve::rope_config_yarn_range(rope);
        SIEVE_ASSERT(std::isfinite(range.low) && std::isfinite(range.high) && range.low != range.high);
    }
}

void check(const sieve::DeepseekV4Config& c) {
    SIEVE_ASSERT(static_cast<int64_t>(c.layers.size()) == c.num_hidden_layers);
    SIEVE_ASSERT(static_cast<int64_t>(c.mtp_layers.size()) == c.num_nextn_predict_layers);
    SIEVE_ASSERT(c.rope_head_dim <= c.head_dim && c.rope_head_dim <= c.index_head_dim);
    SIEVE_ASSERT(c.heads_per_group * c.o_groups == c.num_attention_heads);
    for (const sieve::DeepseekV4Layer& layer : c.layers) {
        SIEVE_ASSERT((layer.kind == sieve::DeepseekV4LayerKind::swa) == (layer.compress_ratio == 0));
        check_rope(layer.rope);
    }
}

void check(const sieve::DsaMlaConfig& c) {
    SIEVE_ASSERT(static_cast<int64_t>(c.layers.size()) == c.num_hidden_layers);
    for (size_t i = 0; i < c.layers.size(); ++i) {
        int64_t source = c.layers[i].topk_source_layer;
        SIEVE_ASSERT(source >= 0 && source <= static_cast<int64_t>(i));
        SIEVE_ASSERT(c.layers[static_cast<size_t>(source)].kind == sieve::DsaLayerKind::full);
    }
    SIEVE_ASSERT(c.softmax_scale > 0.0);
    check_rope(c.rope_mla);
    check_rope(c.rope_indexer);
}

void check(const sieve::QsaConfig& c) {
    SIEVE_ASSERT(static_cast<int64_t>(c.layers.size()) == c.num_hidden_layers);
    SIEVE_ASSERT(c.has_indexer || (c.num_qsa_layers == 0 && c.mtp_num_hidden_layers == 0));
    if (c.has_indexer) {
        SIEVE_ASSERT(c.indexer_kv_heads == 1 && c.rotary_dim <= c.indexer_head_dim);
        SIEVE_ASSERT(c.block_topk * c.indexer_compress_ratio == c.indexer_budget);
    }
    check_rope(c.rope);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    std::string_view text(reinterpret_cast<const char*>(data), size);
    sieve::Expected<sieve::ModelConfig> config = sieve::parse_model_config(text, "config.json");
    if (!config) {
        SIEVE_ASSERT(config.status().code() != sieve::StatusCode::internal, "an exception reached the boundary");
        SIEVE_ASSERT(config.status().message().rfind("config.json: ", 0) == 0);
        return 0;
    }
    if (const auto* v4 = config->deepseek_v4()) check(*v4);
    if (const auto* dsa = config->dsa_mla()) check(*dsa);
    if (const auto* qsa = config->qsa()) check(*qsa);
    return 0;
}
