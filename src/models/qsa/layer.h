// One QSA layer (specs/qsa.md §4): gated GQA whose weight-free indexer mean-pools raw index keys in
// groups of r tokens and selects a token budget. The layer orchestrates backend ops and the three
// caches of one step (§4.9 order):
//   1. fused projection [q_gate | k | v | index_q | index_k]; Gemma (1 + w) RMSNorm on q, k (per head
//      of D) and the index queries (per head of Di); partial NeoX RoPE on the first R dims of each
//      (positions are 1-D: text-only MRoPE is plain RoPE, §4.1);
//   2. K|V → main KV cache, the raw (unnormalized, unrotated) index key → the raw-key ring (§5.1, §5.2),
//      through cache_store (the kv entry [Hkv, 2, D] takes each head's K and V as a sub-row);
//   3. every token that completes a group g (p + 1 ≡ 0 mod r) pools its r ring entries (mean), then
//      k_layernorm and RoPE at position g·r, into compressed-key entry g (§4.3, §5.3);
//   4. selection: a token with visible = (p + 1) / r complete groups takes all of them when
//      visible ≤ block_topk (exactly dense, §4.5), else scores them (indexer_scores), keeps the top
//      block_topk (ties to the lower group: indexer_scores's fused selection, or with a SelectionObserver,
//      which also sees the scores, the topk op) and expands to token positions plus its open
//      tail (qsa_expand; width budget + r − 1, −1 padded, §4.6); the SelectionObserver sees each row;
//   5. sparse GQA over those positions, × sigmoid(gate) (qsa_sparse_gqa), then o_proj (§4.7, §4.8).
//
// Profiles: `exact` computes and caches in fp32 (matches transformers); `deployed` uses bf16
// activations (bf16 GEMM inputs with fp32 accumulation), bf16 caches (main KV, ring and compressed
// keys: QSA's production formats, qsa.md "Decisions for sieve"), bf16 P for PV and the bf16 gate
// (§9). RoPE uses fp32 cos/sin in both (§9 item 4: within BF16 noise of the BF16 table).
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "sieve/backends/backend.h"
#include "sieve/core/stage_timer.h"
#include "sieve/io/config_qsa.h"
#include "sieve/kv/cache_spec.h"
#include "sieve/kv/step_batch.h"
#include "sieve/models/attention_model.h"
#include "models/planned_linear.h"
#include "models/qsa/weights.h"
#include "models/rope_table.h"
#include "models/qsa/step_plan.h"
#include "models/workspace_buffer.h"

namespace sieve::qsa {

class AttentionLayer {
public:
    // `weights` are consumed (prepared by `backend`; the source tensors are dropped).
    static Expected<std::unique_ptr<AttentionLayer>> create(const QsaConfig& config, LayerWeights weights,
                                                      NumericsProfile profile, Backend& backend, int64_t layer_slot);

    int64_t layer() const { return layer_; }
    int64_t layer_slot() const { return layer_slot_; }

    // Grows `arena` to the layer's scratch for the step planned in `plan` (the counting pass of plan_step;
    // `fused`: no observer, the selection runs inside the scoring).
    Status reserve_scratch(const StepBatch& batch, const StepPlan& plan, bool fused, WorkspaceBuffer& arena);
    // The layer for every token of the step planned in `plan`. input, output: [n_tokens, hidden] f32;
    // `arena` holds the layer's buffers (shared by the layers, which run one after another), reserved by
    // reserve_scratch for this step and observer; an arena too small is an internal error.
    Status forward(const StepBatch& batch, const StepPlan& plan, const float* input, float* output,
                   WorkspaceBuffer& arena, SelectionObserver* observer, StageTimes* times);

private:
    struct StepOps;
    Expected<StepOps> step_ops(const StepBatch& batch, const StepPlan& plan, bool fused);

    AttentionLayer(const QsaConfig& c, NumericsProfile profile, Backend& backend) : c_(c), profile_(profile), backend_(backend) {}

    const QsaConfig& c_;
    NumericsProfile profile_;
    Backend& backend_;
    int64_t layer_ = 0;
    int64_t layer_slot_ = 0;
    ProjectionLayout pl_;
    PlannedLinear input_proj_, o_proj_;
    DeviceTensor q_norm_, k_norm_, index_q_norm_, index_k_norm_;  // [D], [D], [Di], [Di] f32
    RopeTable rope_;  // [R / 2]: the one table of q, k, index q, pooled k (§4.2)
};

}  // namespace sieve::qsa
