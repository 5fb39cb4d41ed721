// DSA-on-MLA model: loading (weights, RoPE table, cache specs), the cache groups and the per-step
// bookkeeping (slots, block tables, shared top-k). The layer forward is forward.cpp.
#include "models/dsa_mla/model.h"

#include <algorithm>
#include <climits>
#include <cmath>

#include <fmt/format.h>

#include "io/weights.h"
#include "models/allocation.h"
#include "models/dsa_mla/layout.h"
#include "models/dsa_mla/model_impl.h"
#include "ops/hadamard.h"
#include "ops/rope.h"

namespace sieve {

namespace dsa_mla {

Status Model::init(const Checkpoint& checkpoint, const std::vector<int64_t>& requested) {
    const DsaMlaConfig& c = config_;
    const bool deployed = profile_ == NumericsProfile::deployed;
    act_type_ = deployed ? DType::bf16 : DType::f32;
    const DsaMlaCacheLayouts records = dsa_mla_cache_layouts(c, profile_);
    latent_layout_ = records.latent;
    key_layout_ = records.keys;
    hadamard_ = deployed && c.model == DsaMlaModel::deepseek_v32;  // specs/README.md "Open points settled"
    // Geometries the profile's entry formats cannot hold (an fp8_v32 latent needs whole 128-value scale
    // groups, fp8_row_scale keys at most 128 values).
    SIEVE_RETURN_IF_ERROR(validate(latent_layout_)
                              .with_context(fmt::format("{}: latent cache (kv_lora_rank = {}, qk_rope_head_dim = {})",
                                                        model_type_, c.kv_lora_rank, c.qk_rope_head_dim)));
    SIEVE_RETURN_IF_ERROR(validate(key_layout_).with_context(
        fmt::format("{}: indexer key cache (index_head_dim = {})", model_type_, c.index_head_dim)));
    if (hadamard_ && (c.index_head_dim & (c.index_head_dim - 1)) != 0)
        return unsupported_error("{}: the deployed indexer's Hadamard rotation needs a power-of-two index_head_dim, "
                                 "got {} (dsa_mla.md §3.5)",
                                 model_type_, c.index_head_dim);

    // Layers to run: the requested ones (ascending, distinct), default all main layers. MTP layers are
    // not implemented.
    std::vector<int64_t> layers = requested;
    if (layers.empty())
        for (int64_t l = 0; l < c.num_hidden_layers; ++l) layers.push_back(l);
    for (size_t i = 0; i < layers.size(); ++i) {
        if (layers[i] >= c.num_hidden_layers && layers[i] < c.num_hidden_layers + c.num_nextn_predict_layers)
            return unsupported_error("{}: layer {} is an MTP layer; sieve runs the {} main layers only", model_type_,
                                     layers[i], c.num_hidden_layers);
        if (layers[i] < 0 || layers[i] >= c.num_hidden_layers)
            return invalid_argument_error("{}: layer {} does not exist (the model has {} layers)", model_type_,
                                          layers[i], c.num_hidden_layers);
        if (i > 0 && layers[i] <= layers[i - 1])
            return invalid_argument_error("{}: layers must be ascending and distinct, got {} after {}", model_type_,
                                          layers[i], layers[i - 1]);
        const DsaMlaLayer& l = c.layers[static_cast<size_t>(layers[i])];
        if (l.kind == DsaLayerKind::shared &&
            std::find(layers.begin(), layers.end(), l.topk_source_layer) == layers.end())
            return invalid_argument_error("{}: layer {} reuses the top-k of layer {} (dsa_mla.md §1.3), which is not "
                                          "among the layers to run",
                                          model_type_, layers[i], l.topk_source_layer);
    }

    WeightStore store(checkpoint, WeightFamily::dsa_mla);
    for (int64_t l : layers) {
        auto w = load_layer_weights(c, l, store, backend_, profile_);
        if (!w) return w.status().with_context(model_type_);
        indexer_slot_.push_back(w->kind == DsaLayerKind::full ? n_full_layers_++ : -1);
        layers_.push_back(std::move(*w));
    }

    // Cache specs from the attention layout (`sieve inspect` shows the same), checked against the op
    // formats' byte sizes.
    const AttentionLayout layout = dsa_mla_attention_layout(c, profile_);
    for (const AttentionLayerLayout& l : layout.layers)
        for (const CacheSpec& s : l.caches) (s.name == kLatentGroup ? latent_spec_ : indexer_spec_) = s;
    const int64_t latent_bytes = latent_layout_.entry_bytes();
    const int64_t key_bytes = key_layout_.entry_bytes();
    if (latent_spec_.name != kLatentGroup || latent_spec_.entry_bytes != latent_bytes)
        return internal_error("{}: layout cache '{}' has {} bytes per entry, the {} format needs {}", model_type_,
                               latent_spec_.name, latent_spec_.entry_bytes, cache_record_format_name(latent_layout_.format),
                               latent_bytes);
    if (n_full_layers_ > 0 && (indexer_spec_.name != kIndexerGroup || indexer_spec_.entry_bytes != key_bytes))
        return internal_error("{}: layout cache '{}' has {} bytes per entry, the {} format needs {}", model_type_,
                              indexer_spec_.name, indexer_spec_.entry_bytes, cache_record_format_name(key_layout_.format),
                              key_bytes);

    // One RoPE table of width Dr for the MLA and the indexer slices (§2.2), YaRN from the config.
    // YaRN's attention_factor is the cos/sin magnitude ("Decisions", V3.2).
    SIEVE_ASSIGN_OR_RETURN(rope_, make_rope_table(backend_, c.rope_mla, c.qk_rope_head_dim, model_type_));
    return Status::ok();
}

std::vector<int64_t> Model::layers() const {
    std::vector<int64_t> out;
    for (const LayerWeights& w : layers_) out.push_back(w.layer);
    return out;
}

std::vector<CacheGroupDesc> Model::cache_groups() const {
    std::vector<CacheGroupDesc> groups;
    groups.push_back({kLatentGroup, latent_spec_, kCacheBlockSize, static_cast<int64_t>(layers_.size())});
    if (n_full_layers_ > 0) groups.push_back({kIndexerGroup, indexer_spec_, kCacheBlockSize, n_full_layers_});
    return groups;
}

Expected<StepCacheInfo> Model::step_cache_info(const StepBatch& batch) const {
    StepCacheInfo info;
    info.latent = batch.caches.find(kLatentGroup);
    if (!info.latent) return internal_error("{}: the step has no '{}' cache group", model_type_, kLatentGroup);
    if (n_full_layers_ > 0) {
        info.indexer = batch.caches.find(kIndexerGroup);
        if (!info.indexer) return internal_error("{}: the step has no '{}' cache group", model_type_, kIndexerGroup);
    }
    const int64_t T = batch.n_tokens();
    info.token_seq.assign(batch.token_request.begin(), batch.token_request.end());
    info.latent_slots.resize(static_cast<size_t>(T));
    if (info.indexer) info.indexer_slots.resize(static_cast<size_t>(T));
    // The cache ops address slots as int32 (as block tables hold blocks).
    for (const CacheGroup* g : {info.latent, info.indexer})
        if (g != nullptr && g->n_slots() > INT32_MAX)
            return unsupported_error("{}: the '{}' cache has {} slots; the cache ops address them as int32", model_type_,
                                     g->name(), g->n_slots());
    for (int64_t t = 0; t < T; ++t) {
        const RequestId id = batch.request_of_token(t);
        const int64_t pos = batch.positions[static_cast<size_t>(t)];
        const int64_t latent_slot = info.latent->slot(id, pos);
        if (latent_slot < 0)
            return internal_error("{}: request {} position {} has no '{}' cache slot (not reserved)", model_type_, id,
                                  pos, kLatentGroup);
        info.latent_slots[static_cast<size_t>(t)] = static_cast<int32_t>(latent_slot);
        if (info.indexer) {
            const int64_t key_slot = info.indexer->slot(id, pos);
            if (key_slot < 0)
                return internal_error("{}: request {} position {} has no '{}' cache slot (not reserved)", model_type_,
                                      id, pos, kIndexerGroup);
            info.indexer_slots[static_cast<size_t>(t)] = static_cast<int32_t>(key_slot);
        }
    }
    for (const StepRequest& r : batch.requests) {
        info.table_stride = std::max<int64_t>(info.table_stride, static_cast<int64_t>(info.latent->block_table(r.id).size()));
        if (info.indexer)
            info.table_stride =
                std::max<int64_t>(info.table_stride, static_cast<int64_t>(info.indexer->block_table(r.id).size()));
    }
    const size_t n = batch.requests.size() * static_cast<size_t>(info.table_stride);
    info.latent_tables.assign(n, -1);
    if (info.indexer) info.indexer_tables.assign(n, -1);
    for (size_t r = 0; r < batch.requests.size(); ++r) {
        const std::vector<int32_t>& lt = info.latent->block_table(batch.requests[r].id);
        std::copy(lt.begin(), lt.end(), info.latent_tables.begin() + static_cast<ptrdiff_t>(r * info.table_stride));
        if (info.indexer) {
            const std::vector<int32_t>& it = info.indexer->block_table(batch.requests[r].id);
            std::copy(it.begin(), it.end(), info.indexer_tables.begin() + static_cast<ptrdiff_t>(r * info.table_stride));
        }
    }
    return info;
}

Status Model::forward(int64_t layer_pos, const StepBatch& batch, const float* input, float* output, StageTimes* times) {
    if (layer_pos < 0 || layer_pos >= static_cast<int64_t>(layers_.size()))
        return invalid_argument_error("{}: layer position {} out of range (the model runs {} layers)", model_type_,
                                      layer_pos, layers_.size());
    const LayerWeights& w = layers_[static_cast<size_t>(layer_pos)];
    if (batch.n_tokens() == 0) return Status::ok();
    return no_bad_alloc([&] { return forward_layer(w, layer_pos, batch, input, output, times); }, [&] {
        return fmt::format("{} layer {}, a step of {} tokens", model_type_, w.layer, batch.n_tokens());
    });
}

Status Model::forward_layer(const LayerWeights& w, int64_t layer_pos, const StepBatch& batch, const float* input,
                            float* output, StageTimes* times) {
    SIEVE_ASSIGN_OR_RETURN(StepCacheInfo info, step_cache_info(batch));
    {
        ScopedStageTimer timer(times, Stage::projections);
        SIEVE_RETURN_IF_ERROR(project(w, batch, info, layer_pos, input));
    }
    if (w.kind == DsaLayerKind::full) {
        StepSelection& selection = selections_[w.layer];
        SIEVE_RETURN_IF_ERROR(run_indexer(w, batch, info, layer_pos, input, selection, times));
        ScopedStageTimer timer(times, Stage::attention);
        SIEVE_RETURN_IF_ERROR(attend(w, batch, info, layer_pos, selection));
    } else {
        StepSelection selection;
        {
            ScopedStageTimer timer(times, Stage::topk);
            SIEVE_RETURN_IF_ERROR(reuse_selection(w, batch, selection));
        }
        ScopedStageTimer timer(times, Stage::attention);
        SIEVE_RETURN_IF_ERROR(attend(w, batch, info, layer_pos, selection));
    }
    ScopedStageTimer timer(times, Stage::output);
    return output_projection(w, batch.n_tokens(), input, output);
}

}  // namespace dsa_mla

Expected<std::unique_ptr<AttentionModel>> load_dsa_mla_model(const ModelConfig& config, const Checkpoint& checkpoint,
                                                              const ModelOptions& options) {
    const DsaMlaConfig* c = config.dsa_mla();
    if (!c) return invalid_argument_error("load_dsa_mla_model: model_type {} is not deepseek_v32 or hy_v4", config.model_type);
    if (!options.backend) return invalid_argument_error("load_dsa_mla_model: no backend given");
    auto model = std::make_unique<dsa_mla::Model>(*c, config.model_type, options.profile, *options.backend);
    SIEVE_RETURN_IF_ERROR(model->init(checkpoint, options.layers));
    return std::unique_ptr<AttentionModel>(std::move(model));
}

}  // namespace sieve
