// The QSA family's AttentionModel (Qwen3.8-Flash-Next, model_type qwen4_exp / qwen4_exp_text;
// specs/qsa.md). layers() lists the model's QSA layers only: the GatedDeltaNet linear-attention
// layers are not sieve's (§2.1), and the MTP layer (mtp.layers.0, §3, §7) has no transformers
// reference and is not loaded.
//
// Caches (cache_groups(), as models/qsa/layout.cpp describes them, §5):
//   "kv"              one entry per token: [Hkv, 2, D] K|V (K post-norm, post-RoPE), f32 exact / bf16 deployed
//   "compressed_keys" one entry per r tokens (group g = entry g): the pooled, normed, rotated key [Di]
//   "raw_key_ring"    one entry per token, windowed to the last r tokens: the raw index key [Di], the
//                     members of a group that completes in a later step (vLLM's ring, §5.2; here a
//                     windowed paged cache, so a row written in this step is never overwritten before
//                     the group that needs it is pooled)
//
// Selection observer (attention_model.h), once per token and layer, before attention uses it:
//   layer      the model's own layer index (1, 3, … for the fixture; 3, 7, … for the release)
//   selected   [budget + r − 1] request-relative TOKEN positions: whole selected groups, then the
//              open tail, ascending, then −1 (what attention reads; an observer may replace it)
//   scores     [visible] the indexer score of every complete visible GROUP g (index space: groups,
//              token position v belongs to group v / r), or empty when the token took every group
//              without scoring (visible ≤ block_topk: exactly dense, §4.5)
//   tokens_per_score = r
#pragma once

#include <memory>
#include <vector>

#include "sieve/core/status.h"
#include "sieve/io/checkpoint.h"
#include "sieve/io/config.h"
#include "sieve/models/attention_model.h"
#include "sieve/models/model_factory.h"
#include "models/qsa/layer.h"

namespace sieve {

class QsaModel final : public AttentionModel {
public:
    // `options.layers` (model layer indices) must all be QSA layers; empty = every QSA layer.
    static Expected<std::unique_ptr<QsaModel>> load(const ModelConfig& config, const Checkpoint& checkpoint,
                                                    const ModelOptions& options);

    std::string model_type() const override { return model_type_; }
    Backend& backend() const override { return *backend_; }
    int64_t hidden_size() const override { return config_.hidden_size; }
    int64_t max_position_embeddings() const override { return config_.max_position_embeddings; }
    std::vector<int64_t> layers() const override;
    std::vector<CacheGroupDesc> cache_groups() const override;
    Status plan_step(const StepBatch& batch) override;
    Status forward(int64_t layer_pos, const StepBatch& batch, const float* input, float* output,
                   StageTimes* times) override;
    void set_selection_observer(SelectionObserver* observer) override { observer_ = observer; }
    int64_t workspace_bytes() const override { return static_cast<int64_t>(arena_.capacity()) + plan_.bytes(); }

    const QsaConfig& config() const { return config_; }
    NumericsProfile profile() const { return profile_; }

private:
    QsaModel() = default;

    std::string model_type_;
    Backend* backend_ = nullptr;
    QsaConfig config_;
    NumericsProfile profile_ = NumericsProfile::exact;
    std::vector<std::unique_ptr<qsa::AttentionLayer>> layers_;
    qsa::StepPlan plan_;  // the current step's (plan_step)
    WorkspaceBuffer arena_;  // the layers' buffers, carved by qsa::AttentionLayer::forward
    SelectionObserver* observer_ = nullptr;
};

// The cache groups of a QSA model running `layers` (every group holds all of them): names, specs (from
// qsa_attention_layout, so that `sieve inspect` and the runtime agree) and block sizes.
std::vector<CacheGroupDesc> qsa_cache_groups(const QsaConfig& config, NumericsProfile profile,
                                             const std::vector<int64_t>& layers);

}  // namespace sieve
