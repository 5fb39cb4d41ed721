#include "models/qsa/model.h"

#include <algorithm>

#include <fmt/format.h>

#include "models/allocation.h"
#include "models/qsa/layout.h"

namespace sieve {

std::vector<CacheGroupDesc> qsa_cache_groups(const QsaConfig& c, NumericsProfile profile, const std::vector<int64_t>& layers) {
    const AttentionLayout layout = qsa_attention_layout(c, profile);
    std::vector<CacheGroupDesc> out;
    for (const AttentionLayerLayout& l : layout.layers) {
        if (!l.sieve_runs) continue;
        for (const CacheSpec& spec : l.caches) {
            CacheGroupDesc d;
            d.name = spec.name;
            d.spec = spec;
            d.layers = layers;
            if (spec.name == qsa::kKvCache) {
                d.block_size = 64;  // a multiple of 16, as vLLM's kernels need (§5.1)
            } else if (spec.name == qsa::kCompressedCache) {
                d.block_size = std::max<int64_t>(1, 64 / c.indexer_compress_ratio);  // one page per 64-token KV page (§5.3)
            } else {
                d.block_size = c.indexer_compress_ratio;  // the ring: the window is r tokens (§5.2)
            }
            out.push_back(std::move(d));
        }
        break;  // every QSA layer has the same caches
    }
    return out;
}

Expected<std::unique_ptr<QsaModel>> QsaModel::load(const ModelConfig& config, const Checkpoint& checkpoint,
                                                   const ModelOptions& options) {
    const QsaConfig* c = config.qsa();
    if (!c) return invalid_argument_error("model_type {} is not a QSA model", config.model_type);
    if (!options.backend) return invalid_argument_error("QSA model: no backend given");
    if (c->num_qsa_layers == 0)
        return unsupported_error("model_type {}: the config has no qwen_sparse_attention layer, nothing for sieve to run",
                                 config.model_type);
    if (!c->has_indexer)
        return invalid_argument_error("model_type {}: QSA layers without the indexer_* fields (qsa.md §2.1, §2.2)",
                                      config.model_type);
    std::unique_ptr<QsaModel> m(new QsaModel());
    m->model_type_ = config.model_type;
    m->backend_ = options.backend;
    m->config_ = *c;
    m->profile_ = options.profile;

    std::vector<int64_t> wanted = options.layers;
    if (wanted.empty()) {
        for (size_t i = 0; i < c->layers.size(); ++i)
            if (c->layers[i] == QsaLayerKind::qsa) wanted.push_back(static_cast<int64_t>(i));
    }
    for (size_t i = 0; i < wanted.size(); ++i) {
        const int64_t l = wanted[i];
        if (l < 0 || l >= c->n_layers_with_mtp())
            return invalid_argument_error("layer {} is out of range: the model has {} layers and {} MTP layers after them",
                                          l, c->num_hidden_layers, c->mtp_num_hidden_layers);
        if (!c->is_qsa_layer(l))
            return unsupported_error("layer {} is a {} layer; sieve runs only the QSA layers of {}", l,
                                     qsa_layer_kind_name(c->layers[static_cast<size_t>(l)]), config.model_type);
        if (std::count(wanted.begin(), wanted.end(), l) > 1)
            return invalid_argument_error("layer {} is listed twice", l);
    }
    WeightStore store(checkpoint, WeightFamily::qsa);
    const DType weight_dtype = options.profile == NumericsProfile::exact ? DType::f32 : DType::bf16;
    for (size_t i = 0; i < wanted.size(); ++i) {
        auto w = qsa::load_layer_weights(store, m->config_, wanted[i], weight_dtype);
        if (!w) return w.status().with_context(fmt::format("{} layer {}", config.model_type, wanted[i]));
        SIEVE_ASSIGN_OR_RETURN(auto layer, qsa::AttentionLayer::create(m->config_, std::move(*w), options.profile,
                                                            *options.backend, static_cast<int64_t>(i)));
        m->layers_.push_back(std::move(layer));
    }
    return m;
}

std::vector<int64_t> QsaModel::layers() const {
    std::vector<int64_t> out;
    for (const auto& l : layers_) out.push_back(l->layer());
    return out;
}

std::vector<CacheGroupDesc> QsaModel::cache_groups() const {
    return qsa_cache_groups(config_, profile_, layers());
}

Status QsaModel::plan_step(const StepBatch& batch) {
    return no_bad_alloc(
        [&]() -> Status {
            SIEVE_RETURN_IF_ERROR(qsa::build_step_plan(config_, *backend_, batch, plan_));
            // One scratch for the step, reserved before the first layer runs (the layers share it).
            for (const auto& layer : layers_)
                SIEVE_RETURN_IF_ERROR(layer->reserve_scratch(batch, plan_, observer_ == nullptr, arena_));
            return Status::ok();
        },
        [&] { return fmt::format("{}: planning a step of {} tokens", model_type_, batch.n_tokens()); });
}

Status QsaModel::forward(int64_t layer_pos, const StepBatch& batch, const float* input, float* output,
                         StageTimes* times) {
    if (layer_pos < 0 || layer_pos >= static_cast<int64_t>(layers_.size()))
        return invalid_argument_error("QSA model: layer position {} out of range [0, {})", layer_pos, layers_.size());
    if (plan_.signature != batch.signature())
        return internal_error("{}: forward of a step that plan_step did not plan", model_type_);
    qsa::AttentionLayer& layer = *layers_[static_cast<size_t>(layer_pos)];
    return no_bad_alloc([&] { return layer.forward(batch, plan_, input, output, arena_, observer_, times); }, [&] {
        return fmt::format("{} layer {}, a step of {} tokens", model_type_, layer.layer(), batch.n_tokens());
    });
}

}  // namespace sieve
