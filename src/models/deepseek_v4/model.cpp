#include "models/deepseek_v4/model.h"

#include <algorithm>
#include <map>

#include <fmt/format.h>

#include "sieve/backends/backend.h"
#include "io/weights.h"
#include "models/allocation.h"
#include "models/deepseek_v4/layout.h"
#include "models/deepseek_v4/layer.h"
#include "models/deepseek_v4/scratch.h"
#include "models/deepseek_v4/step_plan.h"

namespace sieve {

namespace {

bool same_spec(const CacheSpec& a, const CacheSpec& b) {
    return a.name == b.name && a.format == b.format && a.entry_bytes == b.entry_bytes &&
           a.tokens_per_entry == b.tokens_per_entry && a.window_tokens == b.window_tokens;
}

class DeepseekV4Model final : public AttentionModel {
public:
    explicit DeepseekV4Model(const DeepseekV4Config& config) : config_(config) {}

    std::string model_type() const override { return "deepseek_v4"; }
    Backend& backend() const override { return *backend_; }
    int64_t hidden_size() const override { return config_.hidden_size; }
    int64_t max_position_embeddings() const override { return config_.max_position_embeddings; }
    std::vector<int64_t> layers() const override { return layer_ids_; }
    std::vector<CacheGroupDesc> cache_groups() const override { return groups_; }

    Status plan_step(const StepBatch& batch) override {
        return no_bad_alloc([&] { return plan(batch); },
                            [&] { return fmt::format("deepseek_v4: the plan of a step of {} tokens", batch.n_tokens()); });
    }
    Status forward(int64_t layer_pos, const StepBatch& batch, const float* input, float* output,
                   StageTimes* times) override {
        if (layer_pos < 0 || layer_pos >= static_cast<int64_t>(layers_.size()))
            return invalid_argument_error("deepseek_v4: layer position {} out of range [0, {})", layer_pos, layers_.size());
        dsv4::AttentionLayer& layer = *layers_[static_cast<size_t>(layer_pos)];
        if (!plan_.planned(batch))
            return internal_error("deepseek_v4 layer {}: a step of {} tokens that plan_step did not plan", layer.layer(),
                                  batch.n_tokens());
        return no_bad_alloc([&] { return layer.forward(batch, plan_, input, output, times, observer_, scratch_); }, [&] {
            return fmt::format("deepseek_v4 layer {}, a step of {} tokens", layer.layer(), batch.n_tokens());
        });
    }
    void set_selection_observer(SelectionObserver* observer) override { observer_ = observer; }
    int64_t workspace_bytes() const override { return scratch_.bytes() + plan_.bytes(); }

    Status load(const Checkpoint& checkpoint, const DeepseekV4Options& options);

private:
    // The step's metadata (uploaded once) and its scratch arena, reserved for the largest layer.
    Status plan(const StepBatch& batch);
    // The group a layer's cache of `spec` joins (created on first use); returns the layer's slot in it.
    Expected<dsv4::CacheBinding> join_group(int64_t layer, const CacheSpec& spec, int64_t ratio,
                                            const DeepseekV4Options& options);
    // kFitStateBlocks: each compressor-state group's blocks hold as many rows as the largest block of the
    // other groups has bytes (at least one row, at most the window).
    void fit_state_blocks();

    Backend* backend_ = nullptr;
    DeepseekV4Config config_;  // owned: the layers keep references into it (the model is never moved)
    std::vector<int64_t> layer_ids_;
    std::vector<std::unique_ptr<dsv4::AttentionLayer>> layers_;
    std::vector<CacheGroupDesc> groups_;
    dsv4::StepPlanNeeds plan_needs_;  // what the layers read from a step's plan
    SelectionObserver* observer_ = nullptr;
    dsv4::StepPlan plan_;
    dsv4::Scratch scratch_;
};

Status DeepseekV4Model::plan(const StepBatch& batch) {
    SIEVE_RETURN_IF_ERROR(plan_.build(*backend_, batch, plan_needs_));
    // The counting pass: the largest layer's sub-buffers, reserved before any layer runs.
    size_t bytes = 0;
    for (const auto& layer : layers_) {
        SIEVE_ASSIGN_OR_RETURN(const dsv4::ScratchShape shape, layer->scratch_shape(batch, plan_, observer_ != nullptr));
        bytes = std::max(bytes, dsv4::layer_scratch_bytes(shape));
    }
    return scratch_.arena.reserve(*backend_, bytes, "the deepseek_v4 step's scratch").status();
}

Expected<dsv4::CacheBinding> DeepseekV4Model::join_group(int64_t layer, const CacheSpec& spec, int64_t ratio,
                                                         const DeepseekV4Options& options) {
    const std::string name = spec.name == "swa_kv" ? spec.name : fmt::format("{}.m{}", spec.name, ratio);
    for (CacheGroupDesc& g : groups_) {
        if (g.name != name) continue;
        if (!same_spec(g.spec, spec))
            return internal_error("deepseek_v4: cache group {} holds {} B entries ({}), a layer needs {} B ({})", name,
                                  g.spec.entry_bytes, g.spec.format, spec.entry_bytes, spec.format);
        g.layers.push_back(layer);
        return dsv4::CacheBinding{name, g.n_layers() - 1};
    }
    CacheGroupDesc g;
    g.name = name;
    g.spec = spec;
    if (spec.name == "swa_kv")
        g.block_size = options.swa_block_size;
    else if (spec.window_tokens > 0)  // compressor state rows
        g.block_size = options.state_block_size > 0 ? options.state_block_size : spec.window_tokens;
    else  // one entry per m tokens: blocks of block_tokens tokens
        g.block_size = std::max<int64_t>(1, options.block_tokens / spec.tokens_per_entry);
    g.layers = {layer};
    groups_.push_back(g);
    return dsv4::CacheBinding{name, 0};
}

Status DeepseekV4Model::load(const Checkpoint& checkpoint, const DeepseekV4Options& options) {
    const DeepseekV4Config& c = config_;
    if (options.backend == nullptr) return invalid_argument_error("deepseek_v4: no backend given");
    backend_ = options.backend;
    if (options.swa_block_size < 1 || options.block_tokens < 1 ||
        (options.state_block_size < 0 && options.state_block_size != kFitStateBlocks))
        return invalid_argument_error("deepseek_v4: block sizes swa {}, tokens {}, state {}: swa and tokens must be "
                                      "positive, state ≥ 0 or −1 (fit)",
                                      options.swa_block_size, options.block_tokens, options.state_block_size);
    // What the layer code relies on beyond the config parser's checks.
    if (c.num_key_value_heads != 1)
        return unsupported_error("deepseek_v4: num_key_value_heads = {}; the attention shares one K=V head (§1.1)",
                                 c.num_key_value_heads);
    if (c.o_groups < 1 || c.num_attention_heads % c.o_groups != 0 || c.heads_per_group * c.o_groups != c.num_attention_heads)
        return unsupported_error("deepseek_v4: {} heads do not split into o_groups = {} groups (§3.9)",
                                 c.num_attention_heads, c.o_groups);
    if (c.rope_head_dim > c.head_dim || c.rope_head_dim > c.index_head_dim)
        return unsupported_error("deepseek_v4: rotated width {} exceeds head_dim {} or index_head_dim {} (§1.3)",
                                 c.rope_head_dim, c.head_dim, c.index_head_dim);
    if (c.sliding_window < 1) return unsupported_error("deepseek_v4: sliding_window = {}", c.sliding_window);

    if (options.layers.empty()) {
        for (size_t i = 0; i < c.layers.size(); ++i) layer_ids_.push_back(static_cast<int64_t>(i));
    } else {
        layer_ids_ = options.layers;
        for (size_t i = 0; i < layer_ids_.size(); ++i) {
            if (layer_ids_[i] < 0 || layer_ids_[i] >= c.n_layers_with_mtp())
                return invalid_argument_error("deepseek_v4: layer {} does not exist (the model has {} layers and {} MTP "
                                              "layers after them)",
                                              layer_ids_[i], c.layers.size(), c.mtp_layers.size());
            if (i > 0 && layer_ids_[i] <= layer_ids_[i - 1])
                return invalid_argument_error("deepseek_v4: layers must be ascending and distinct, got {} after {}",
                                              layer_ids_[i], layer_ids_[i - 1]);
        }
    }

    const AttentionLayout layout = deepseek_v4_attention_layout(c, options.profile);
    WeightStore store(checkpoint, WeightFamily::deepseek_v4);
    for (int64_t layer : layer_ids_) {
        const DeepseekV4Layer& spec = c.layer(layer);
        if (spec.kind == DeepseekV4LayerKind::csa && !spec.compressor_overlap)
            return unsupported_error("deepseek_v4 layer {}: a CSA layer without the overlapping compressor", layer);
        dsv4::LayerCaches caches;
        for (const CacheSpec& cs : layout.layers[static_cast<size_t>(layer)].caches) {
            SIEVE_ASSIGN_OR_RETURN(dsv4::CacheBinding b, join_group(layer, cs, spec.compress_ratio, options));
            if (cs.name == "swa_kv")
                caches.swa = b;
            else if (cs.name == "compressed_kv")
                caches.compressed = b;
            else if (cs.name == "compressor_state")
                caches.state = b;
            else if (cs.name == "indexer_keys")
                caches.indexer_keys = b;
            else if (cs.name == "indexer_compressor_state")
                caches.indexer_state = b;
            else
                return internal_error("deepseek_v4 layer {}: unknown cache {} in the layout", layer, cs.name);
        }
        SIEVE_ASSIGN_OR_RETURN(dsv4::LayerWeights w,
                               dsv4::load_layer_weights(store, c, layer, options.profile, *options.backend));
        auto l = std::make_unique<dsv4::AttentionLayer>(c, layer, std::move(w), caches, options.profile, *options.backend);
        SIEVE_RETURN_IF_ERROR(l->init());
        // The layer's row formats must be what the layout (and `sieve inspect`) promise.
        for (const CacheSpec& cs : layout.layers[static_cast<size_t>(layer)].caches) {
            int64_t want = 0;
            if (cs.name == "swa_kv" || cs.name == "compressed_kv") want = l->kv_layout().entry_bytes();
            if (cs.name == "indexer_keys") want = l->key_layout().entry_bytes();
            if (cs.name == "compressor_state") want = 8 * (spec.compressor_overlap ? 2 : 1) * c.head_dim;
            if (cs.name == "indexer_compressor_state") want = 8 * 2 * c.index_head_dim;
            if (want != cs.entry_bytes)
                return internal_error("deepseek_v4 layer {}: cache {} has {} B entries in the layout, the layer writes {} B",
                                      layer, cs.name, cs.entry_bytes, want);
        }
        l->add_plan_needs(plan_needs_);
        layers_.push_back(std::move(l));
    }
    if (options.state_block_size == kFitStateBlocks) fit_state_blocks();
    return Status::ok();
}

void DeepseekV4Model::fit_state_blocks() {
    const auto is_state = [](const CacheGroupDesc& g) { return g.name != "swa_kv" && g.spec.window_tokens > 0; };
    int64_t largest = 0;
    for (const CacheGroupDesc& g : groups_)
        if (!is_state(g)) largest = std::max(largest, g.block_size * g.spec.entry_bytes);
    for (CacheGroupDesc& g : groups_)
        if (is_state(g)) g.block_size = std::clamp<int64_t>(largest / g.spec.entry_bytes, 1, g.block_size);
}

}  // namespace

Expected<std::unique_ptr<AttentionModel>> load_deepseek_v4_model(const DeepseekV4Config& config,
                                                                 const Checkpoint& checkpoint,
                                                                 const DeepseekV4Options& options) {
    auto model = std::make_unique<DeepseekV4Model>(config);
    SIEVE_RETURN_IF_ERROR(model->load(checkpoint, options));
    return std::unique_ptr<AttentionModel>(std::move(model));
}

}  // namespace sieve
