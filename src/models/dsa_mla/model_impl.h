// The DSA-on-MLA model class behind load_dsa_mla_model (model.h). Internal to models/dsa_mla:
// model.cpp holds loading, caches and the step's plan; forward.cpp the layer forward.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "sieve/backends/backend.h"
#include "sieve/io/config_dsa_mla.h"
#include "sieve/models/attention_model.h"
#include "models/planned_linear.h"
#include "models/dsa_mla/weights.h"
#include "models/rope_table.h"
#include "models/step_uploads.h"
#include "models/workspace_buffer.h"
#include "sieve/ops/block_tables.h"
#include "sieve/ops/indexer_scores.h"
#include "sieve/ops/mla_head_proj.h"
#include "sieve/ops/sparse_attention.h"

namespace sieve::dsa_mla {

inline constexpr int64_t kCacheBlockSize = 64;  // FLASHMLA_SPARSE block size (dsa_mla.md §4.1)
inline constexpr const char* kLatentGroup = "latent_kv";
inline constexpr const char* kIndexerGroup = "indexer_keys";

// The step's metadata, built on the host once per step by plan_step and uploaded (DESIGN.md "a step is
// planned once"); every layer's ops read the device copies, so a layer only enqueues ops.
struct StepPlan {
    uint64_t serial = 0;              // counts the planned steps: a selection of an earlier step is stale
    bool planned = false;             // false until a plan_step succeeds
    std::vector<int64_t> signature;   // (id, start, n_tokens) per request: which batch was planned
    CacheGroup* latent = nullptr;
    CacheGroup* indexer = nullptr;    // null when no full layer is loaded
    // W = min(index_topk, the most positions a token of the step sees): a row never holds more than its
    // p + 1 causal positions (§2.7), and index_topk may be far above any context (up to
    // max_position_embeddings), so rows, slot lists and top-k outputs are sized by what the step can use.
    int64_t width = 0;
    // [T] candidates the indexer scores per token: p + 1, or 0 when p + 1 ≤ index_topk (every causal
    // token is selected without scoring: sparse = dense, §2.7). The host copy chunks the scoring.
    std::vector<int32_t> n_keys;
    // Host staging of the uploads below (kept to reuse their memory).
    std::vector<int32_t> latent_slots_host, indexer_slots_host, latent_table_host, indexer_table_host;

    // Device copies (plan_uploads_), valid until the next plan_step.
    const int64_t* positions = nullptr;      // [T]
    const int32_t* latent_slots = nullptr;   // [T] each token's own latent-cache slot
    const int32_t* indexer_slots = nullptr;  // [T] each token's own indexer-key slot (null without indexer group)
    const int32_t* n_keys_device = nullptr;  // [T] n_keys
    BlockTables latent_tables, indexer_tables;  // packed per request; token_request = each token's request row
};

// The top-k rows a full layer selected in the current step, for its attention and for the shared layers
// after it (§1.3): device memory, read in place by every layer that uses them.
struct StepSelection {
    uint64_t step = 0;          // StepPlan::serial of the step that wrote the rows
    WorkspaceBuffer buffer;     // holds the rows
    int32_t* rows = nullptr;    // [T, W] request-local positions, ascending, −1 padded
    // Rows of unscored tokens (n_keys == 0) list every causal position explicitly (written for an
    // observer); otherwise they are undefined and selected_slots takes every visible entry for them
    // (n_scored = n_keys, ops/selected_slots.h).
    bool explicit_unscored = false;
    // Observer support (kept only while an observer is set): each token's candidate scores.
    std::vector<float> scores;         // concatenated rows
    std::vector<int64_t> score_begin;  // [T + 1] offsets into scores (empty row: not scored)
};

class Model final : public AttentionModel {
public:
    // cache_block_size: entries per block of the latent and indexer-key caches (ModelOptions::cache_block_size).
    Model(const DsaMlaConfig& config, std::string model_type, NumericsProfile profile, Backend& backend,
          int64_t cache_block_size = kCacheBlockSize)
        : config_(config), model_type_(std::move(model_type)), profile_(profile), backend_(backend),
          cache_block_size_(cache_block_size) {}

    Status init(const Checkpoint& checkpoint, const std::vector<int64_t>& layers);

    std::string model_type() const override { return model_type_; }
    Backend& backend() const override { return backend_; }
    int64_t hidden_size() const override { return config_.hidden_size; }
    int64_t max_position_embeddings() const override { return config_.max_position_embeddings; }
    std::vector<int64_t> layers() const override;
    std::vector<CacheGroupDesc> cache_groups() const override;
    Status plan_step(const StepBatch& batch) override;
    Status forward(int64_t layer_pos, const StepBatch& batch, const float* input, float* output,
                   StageTimes* times) override;
    void set_selection_observer(SelectionObserver* observer) override { observer_ = observer; }
    int64_t workspace_bytes() const override;

private:
    Status build_step_plan(const StepBatch& batch);
    // forward() of one loaded layer, inside its out-of-memory boundary.
    Status forward_layer(const LayerWeights& w, int64_t layer_pos, const StepBatch& batch, const float* input,
                         float* output, StageTimes* times);
    // Stages of forward (forward.cpp).
    Status project(const LayerWeights& w, const StepPlan& plan, int64_t n_tokens, int64_t layer_pos,
                   const float* input);
    Status run_indexer(const LayerWeights& w, const StepBatch& batch, const StepPlan& plan, int64_t layer_pos,
                       const float* input, StepSelection& selection, StageTimes* times);
    // The selection a shared layer attends with: its source layer's rows, or (with an observer) the
    // observer's copy of them.
    Expected<const StepSelection*> reuse_selection(const LayerWeights& w, const StepBatch& batch, const StepPlan& plan);
    Status attend(const LayerWeights& w, const StepPlan& plan, int64_t n_tokens, int64_t layer_pos,
                  const StepSelection& selection);
    Status output_projection(const LayerWeights& w, int64_t n_tokens, const float* input, float* output);
    // ops/mla_head_proj.h over [n_tokens, n_heads, in] → [n_tokens, n_heads, out] in the activation type.
    Status head_proj(const DeviceTensor& weight, const void* x, int64_t x_token_stride, int64_t x_head_stride, void* y,
                     int64_t y_token_stride, int64_t y_head_stride, int64_t n_tokens, int64_t n_heads, int64_t in,
                     int64_t out);

    DsaMlaConfig config_;
    std::string model_type_;
    NumericsProfile profile_;
    Backend& backend_;
    int64_t cache_block_size_ = kCacheBlockSize;
    DType act_type_ = DType::f32;  // exact f32, deployed bf16
    CacheRecordLayout latent_layout_, key_layout_;  // dsa_mla_cache_layouts of the profile
    bool hadamard_ = false;        // deployed deepseek_v32 (specs/README.md "Open points settled")
    std::vector<LayerWeights> layers_;           // loaded layers, in model order
    std::vector<int64_t> indexer_slot_;          // [layers_] layer slot in the indexer group, −1 for shared
    int64_t n_full_layers_ = 0;
    CacheSpec latent_spec_, indexer_spec_;       // from dsa_mla_attention_layout (layout.cpp)
    RopeTable rope_;                             // [Dr / 2], one table for both slices (§2.2)
    SelectionObserver* observer_ = nullptr;

    // The step's plan (plan_step) and the device memory of its uploads.
    StepPlan plan_;
    StepUploads plan_uploads_;
    // Selections of the step: one per full layer that a loaded shared layer reuses (by layer index, §1.3),
    // one for every other full layer, and the copy an observer sees of a shared layer's.
    std::map<int64_t, StepSelection> source_selections_;
    StepSelection unshared_selection_, observed_shared_selection_;
    std::vector<int32_t> observed_rows_;   // host copies of what an observer sees: rows,
    std::vector<float> observed_scores_;   // and the scores of one indexer chunk

    // Scratch (grown on demand; ops allocate nothing themselves).
    WorkspaceBuffer op_workspace_;
    WorkspaceBuffer q_c_, ckv_, q_, q_mqa_, o_lat_, o_, gate_;
    WorkspaceBuffer idx_q_, idx_kw_, idx_k_, idx_q8_, idx_q_scale_, scores_, attn_slots_;
};

}  // namespace sieve::dsa_mla
