// The DSA-on-MLA model class behind load_dsa_mla_model (model.h). Internal to models/dsa_mla:
// model.cpp holds loading, caches and per-step bookkeeping; forward.cpp the layer forward.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "backends/backend.h"
#include "io/config_dsa_mla.h"
#include "models/attention_model.h"
#include "models/planned_linear.h"
#include "models/dsa_mla/weights.h"
#include "models/rope_table.h"
#include "ops/dsa_indexer.h"
#include "ops/mla_head_proj.h"
#include "ops/sparse_mla.h"

namespace sieve::dsa_mla {

inline constexpr int64_t kCacheBlockSize = 64;  // FLASHMLA_SPARSE block size (dsa_mla.md §4.1)
inline constexpr const char* kLatentGroup = "latent_kv";
inline constexpr const char* kIndexerGroup = "indexer_keys";

// Where the step's tokens live in the two cache groups (built once per forward call).
struct StepCacheInfo {
    CacheGroup* latent = nullptr;
    CacheGroup* indexer = nullptr;           // null when no full layer is loaded
    std::vector<int32_t> latent_slots;       // [T]
    std::vector<int32_t> indexer_slots;      // [T] (empty without indexer group)
    std::vector<int32_t> latent_tables;      // [n_requests, table_stride], −1 padded
    std::vector<int32_t> indexer_tables;     // [n_requests, table_stride]
    int64_t table_stride = 0;
    std::vector<int32_t> token_seq;          // [T] index into batch.requests
};

// The top-k a full layer selected in the current step, for the shared layers after it (§1.3).
struct StepSelection {
    std::vector<int64_t> signature;  // (id, start, n_tokens) per request of the step that produced it
    int64_t width = 0;               // W = min(index_topk, most positions a token of the step sees)
    std::vector<int32_t> topk;       // [T, W] request-local positions, −1 padded
    // Observer support (kept only while an observer is set): each token's candidate scores.
    std::vector<float> scores;       // concatenated rows
    std::vector<int64_t> score_begin;  // [T + 1] offsets into scores (empty row: not scored)
};

class Model final : public AttentionModel {
public:
    Model(const DsaMlaConfig& config, std::string model_type, NumericsProfile profile, Backend& backend)
        : config_(config), model_type_(std::move(model_type)), profile_(profile), backend_(backend) {}

    Status init(const Checkpoint& checkpoint, const std::vector<int64_t>& layers);

    std::string model_type() const override { return model_type_; }
    Backend& backend() const override { return backend_; }
    int64_t hidden_size() const override { return config_.hidden_size; }
    int64_t max_position_embeddings() const override { return config_.max_position_embeddings; }
    std::vector<int64_t> layers() const override;
    std::vector<CacheGroupDesc> cache_groups() const override;
    Status forward(int64_t layer_pos, const StepBatch& batch, const float* input, float* output,
                   StageTimes* times) override;
    void set_selection_observer(SelectionObserver* observer) override { observer_ = observer; }
    int64_t workspace_bytes() const override {
        int64_t b = 0;
        for (const WorkspaceBuffer* s : {&op_workspace_, &q_c_, &ckv_, &q_, &q_mqa_, &o_lat_, &o_, &gate_, &idx_q_, &idx_kw_,
                                 &idx_k_, &idx_q8_, &idx_q_scale_, &scores_, &n_keys_, &attn_slots_})
            b += static_cast<int64_t>(s->capacity());
        return b;
    }

private:
    Expected<StepCacheInfo> step_cache_info(const StepBatch& batch) const;
    // forward() of one loaded layer, inside its out-of-memory boundary.
    Status forward_layer(const LayerWeights& w, int64_t layer_pos, const StepBatch& batch, const float* input,
                         float* output, StageTimes* times);
    // Stages of forward (forward.cpp).
    Status project(const LayerWeights& w, const StepBatch& batch, const StepCacheInfo& info, int64_t layer_pos,
                   const float* input);
    Status run_indexer(const LayerWeights& w, const StepBatch& batch, const StepCacheInfo& info, int64_t layer_pos,
                       const float* input, StepSelection& selection, StageTimes* times);
    Status reuse_selection(const LayerWeights& w, const StepBatch& batch, StepSelection& selection);
    Status attend(const LayerWeights& w, const StepBatch& batch, const StepCacheInfo& info, int64_t layer_pos,
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
    DType act_type_ = DType::f32;  // exact f32, deployed bf16
    CacheRecordLayout latent_layout_, key_layout_;  // dsa_mla_cache_layouts of the profile
    bool hadamard_ = false;        // deployed deepseek_v32 (specs/README.md "Open points settled")
    std::vector<LayerWeights> layers_;           // loaded layers, in model order
    std::vector<int64_t> indexer_slot_;          // [layers_] layer slot in the indexer group, −1 for shared
    int64_t n_full_layers_ = 0;
    CacheSpec latent_spec_, indexer_spec_;       // from dsa_mla_attention_layout (layout.cpp)
    RopeTable rope_;                             // [Dr / 2], one table for both slices (§2.2)
    SelectionObserver* observer_ = nullptr;
    std::map<int64_t, StepSelection> selections_;  // by full (source) layer index

    // Scratch (grown on demand; ops allocate nothing themselves).
    WorkspaceBuffer op_workspace_;
    WorkspaceBuffer q_c_, ckv_, q_, q_mqa_, o_lat_, o_, gate_;
    WorkspaceBuffer idx_q_, idx_kw_, idx_k_, idx_q8_, idx_q_scale_, scores_, n_keys_, attn_slots_;
};

}  // namespace sieve::dsa_mla
