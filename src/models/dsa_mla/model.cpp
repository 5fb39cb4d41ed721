// DSA-on-MLA model: loading (weights, RoPE table, cache specs), the cache groups, the step's plan (slots,
// block tables, candidate counts, uploaded once per step) and the layer dispatch. The layer forward is
// forward.cpp.
#include "models/dsa_mla/model.h"

#include <algorithm>
#include <climits>
#include <cmath>
#include <span>

#include <fmt/format.h>

#include "io/weights.h"
#include "models/allocation.h"
#include "models/dsa_mla/layout.h"
#include "models/dsa_mla/model_impl.h"
#include "models/refused_options.h"
#include "sieve/ops/hadamard.h"
#include "sieve/ops/rope.h"

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

    // Layers to run: the requested ones (ascending, distinct), default all main layers; MTP layers (ids
    // num_hidden_layers + j, each with a full indexer, §1.3) only when requested.
    std::vector<int64_t> layers = requested;
    if (layers.empty())
        for (int64_t l = 0; l < c.num_hidden_layers; ++l) layers.push_back(l);
    for (size_t i = 0; i < layers.size(); ++i) {
        if (layers[i] < 0 || layers[i] >= c.n_layers_with_mtp())
            return invalid_argument_error("{}: layer {} does not exist (the model has {} layers and {} MTP layers "
                                          "after them)",
                                          model_type_, layers[i], c.num_hidden_layers, c.mtp_layers.size());
        if (i > 0 && layers[i] <= layers[i - 1])
            return invalid_argument_error("{}: layers must be ascending and distinct, got {} after {}", model_type_,
                                          layers[i], layers[i - 1]);
        const DsaMlaLayer& l = c.layer(layers[i]);
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
        if (w->kind == DsaLayerKind::shared) source_selections_[w->topk_source_layer];  // kept for it (§1.3)
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
    // Every layer keeps latents; the full-indexer layers keep indexer keys, in layer order (their
    // indexer_slot_).
    CacheGroupDesc latent{kLatentGroup, latent_spec_, cache_block_size_, {}};
    CacheGroupDesc keys{kIndexerGroup, indexer_spec_, cache_block_size_, {}};
    for (const LayerWeights& w : layers_) {
        latent.layers.push_back(w.layer);
        if (w.kind == DsaLayerKind::full) keys.layers.push_back(w.layer);
    }
    std::vector<CacheGroupDesc> groups{std::move(latent)};
    if (n_full_layers_ > 0) groups.push_back(std::move(keys));
    return groups;
}

int64_t Model::workspace_bytes() const {
    size_t b = plan_uploads_.capacity();
    for (const WorkspaceBuffer* s : {&op_workspace_, &q_c_, &ckv_, &q_, &q_mqa_, &o_lat_, &o_, &gate_, &idx_q_,
                                     &idx_kw_, &idx_k_, &idx_q8_, &idx_q_scale_, &scores_, &attn_slots_})
        b += s->capacity();
    for (const auto& entry : source_selections_) b += entry.second.buffer.capacity();
    b += unshared_selection_.buffer.capacity() + observed_shared_selection_.buffer.capacity();
    return static_cast<int64_t>(b);
}

Status Model::plan_step(const StepBatch& batch) {
    return no_bad_alloc([&] { return build_step_plan(batch); }, [&] {
        return fmt::format("{}: the plan of a step of {} tokens", model_type_, batch.n_tokens());
    });
}

Status Model::build_step_plan(const StepBatch& batch) {
    StepPlan& plan = plan_;
    plan.planned = false;  // until this plan is complete
    ++plan.serial;
    plan.signature = batch.signature();
    plan.latent = batch.caches.find(kLatentGroup);
    if (!plan.latent) return internal_error("{}: the step has no '{}' cache group", model_type_, kLatentGroup);
    plan.indexer = nullptr;
    if (n_full_layers_ > 0) {
        plan.indexer = batch.caches.find(kIndexerGroup);
        if (!plan.indexer) return internal_error("{}: the step has no '{}' cache group", model_type_, kIndexerGroup);
    }
    // The cache ops address slots as int32 (as block tables hold blocks).
    for (const CacheGroup* g : {plan.latent, plan.indexer})
        if (g != nullptr && g->n_slots() > INT32_MAX)
            return unsupported_error("{}: the '{}' cache has {} slots; the cache ops address them as int32", model_type_,
                                     g->name(), g->n_slots());
    const int64_t T = batch.n_tokens(), K = config_.index_topk;
    plan.width = std::min(K, batch.max_visible_entries(1));
    plan.n_keys.resize(static_cast<size_t>(T));
    for (int64_t t = 0; t < T; ++t) {
        const int64_t candidates = batch.positions[static_cast<size_t>(t)] + 1;
        plan.n_keys[static_cast<size_t>(t)] = candidates > K ? static_cast<int32_t>(candidates) : 0;
    }
    plan.latent_slots_host.resize(static_cast<size_t>(T));
    SIEVE_RETURN_IF_ERROR(token_slots(batch, *plan.latent, plan.latent_slots_host.data()));
    const int64_t latent_stride = pack_block_tables(batch, *plan.latent, plan.latent_table_host);
    int64_t indexer_stride = 0;
    if (plan.indexer) {
        plan.indexer_slots_host.resize(static_cast<size_t>(T));
        SIEVE_RETURN_IF_ERROR(token_slots(batch, *plan.indexer, plan.indexer_slots_host.data()));
        indexer_stride = pack_block_tables(batch, *plan.indexer, plan.indexer_table_host);
    }

    // One upload of the step's metadata for every layer (host backends: a memcpy per array per step).
    plan.positions = nullptr;
    plan.latent_slots = plan.indexer_slots = plan.n_keys_device = nullptr;
    plan.latent_tables = plan.indexer_tables = BlockTables{};
    if (T > 0) {
        plan_uploads_.reset();
        auto put = [&]<typename V>(const std::vector<V>& values, const char* what) {
            return plan_uploads_.put(backend_, std::span<const V>(values), what);
        };
        SIEVE_ASSIGN_OR_RETURN(plan.positions, put(batch.positions, "the step's positions"));
        SIEVE_ASSIGN_OR_RETURN(const int32_t* token_request, put(batch.token_request, "the step's token requests"));
        SIEVE_ASSIGN_OR_RETURN(plan.n_keys_device, put(plan.n_keys, "the step's indexer candidate counts"));
        SIEVE_ASSIGN_OR_RETURN(plan.latent_slots, put(plan.latent_slots_host, "the step's latent slots"));
        SIEVE_ASSIGN_OR_RETURN(const int32_t* latent_table,
                               put(plan.latent_table_host, "the step's latent block tables"));
        plan.latent_tables = {latent_table, token_request, batch.n_requests(), latent_stride};
        if (plan.indexer) {
            SIEVE_ASSIGN_OR_RETURN(plan.indexer_slots, put(plan.indexer_slots_host, "the step's indexer key slots"));
            SIEVE_ASSIGN_OR_RETURN(const int32_t* indexer_table,
                                   put(plan.indexer_table_host, "the step's indexer block tables"));
            plan.indexer_tables = {indexer_table, token_request, batch.n_requests(), indexer_stride};
        }
    }
    plan.planned = true;
    return Status::ok();
}

Status Model::forward(int64_t layer_pos, const StepBatch& batch, const float* input, float* output, StageTimes* times) {
    if (layer_pos < 0 || layer_pos >= static_cast<int64_t>(layers_.size()))
        return invalid_argument_error("{}: layer position {} out of range (the model runs {} layers)", model_type_,
                                      layer_pos, layers_.size());
    const LayerWeights& w = layers_[static_cast<size_t>(layer_pos)];
    if (!plan_.planned || plan_.signature != batch.signature())
        return internal_error("{}: layer {} runs a step that was not planned (plan_step(batch) comes first, "
                              "attention_model.h)",
                              model_type_, w.layer);
    if (batch.n_tokens() == 0) return Status::ok();
    return no_bad_alloc([&] { return forward_layer(w, layer_pos, batch, input, output, times); }, [&] {
        return fmt::format("{} layer {}, a step of {} tokens", model_type_, w.layer, batch.n_tokens());
    });
}

Status Model::forward_layer(const LayerWeights& w, int64_t layer_pos, const StepBatch& batch, const float* input,
                            float* output, StageTimes* times) {
    const StepPlan& plan = plan_;
    const int64_t T = batch.n_tokens();
    {
        ScopedStageTimer timer(times, Stage::projections);
        SIEVE_RETURN_IF_ERROR(project(w, plan, T, layer_pos, input));
    }
    const StepSelection* selection = nullptr;
    if (w.kind == DsaLayerKind::full) {
        auto source = source_selections_.find(w.layer);
        StepSelection& own = source != source_selections_.end() ? source->second : unshared_selection_;
        SIEVE_RETURN_IF_ERROR(run_indexer(w, batch, plan, layer_pos, input, own, times));
        selection = &own;
    } else {
        ScopedStageTimer timer(times, Stage::topk);
        SIEVE_ASSIGN_OR_RETURN(selection, reuse_selection(w, batch, plan));
    }
    {
        ScopedStageTimer timer(times, Stage::attention);
        SIEVE_RETURN_IF_ERROR(attend(w, plan, T, layer_pos, *selection));
    }
    ScopedStageTimer timer(times, Stage::output);
    return output_projection(w, T, input, output);
}

}  // namespace dsa_mla

Expected<std::unique_ptr<AttentionModel>> load_dsa_mla_model(const ModelConfig& config, const Checkpoint& checkpoint,
                                                              const ModelOptions& options) {
    const DsaMlaConfig* c = config.dsa_mla();
    if (!c) return invalid_argument_error("load_dsa_mla_model: model_type {} is not deepseek_v32 or hy_v4", config.model_type);
    if (!options.backend) return invalid_argument_error("load_dsa_mla_model: no backend given");
    SIEVE_RETURN_IF_ERROR(refuse_state_block_size(config.model_type, options));
    if (options.cache_block_size < 0)
        return invalid_argument_error("{}: cache_block_size {}: a number of entries, or 0 for the family's own ({})",
                                      config.model_type, options.cache_block_size, dsa_mla::kCacheBlockSize);
    auto model = std::make_unique<dsa_mla::Model>(*c, config.model_type, options.profile, *options.backend,
                                                  options.cache_block_size > 0 ? options.cache_block_size : dsa_mla::kCacheBlockSize);
    SIEVE_RETURN_IF_ERROR(model->init(checkpoint, options.layers));
    return std::unique_ptr<AttentionModel>(std::move(model));
}

}  // namespace sieve
