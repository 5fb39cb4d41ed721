// One DeepSeek-V4 attention layer over a step (deepseek_v4.md §3; the exact profile is §3.10):
//   query path    wq_a → q_norm → wq_b → per-head weight-free RMSNorm → RoPE on the last r dims (§3.1)
//   K = V path    wkv → kv_norm → RoPE → the sliding-window cache (§3.2)
//   compressors   state rows → softmax-gated pooling → RMSNorm → RoPE at k·m → compressed caches (§3.4)
//   selection     SWA: none; HCA: every visible entry (§3.5); CSA: Lightning Indexer top-k (§3.6)
//   attention     sparse MQA over window ∪ compressed rows with the per-head sink (§3.8)
//   output        inverse RoPE, grouped wo_a, wo_b (§3.9)
// in the order of §5 "Order of operations inside one layer": every token's rows are stored before any
// token attends, and an entry completed in this step is visible to the token completing it.
//
// Device rules (DESIGN.md "Layers of the code"): the forward only enqueues ops on device memory — the
// step's metadata from the StepPlan (step_plan.h), its buffers carved from the model's arena (scratch.h) —
// and reads nothing back, except the selection rows an observer is shown.
//
// Numerics by profile ("Decisions for sieve"):
//   exact     fp32 activations and linears, f32 cache rows, fp32 indexer keys.
//   deployed  bf16 activations between ops (vLLM CPU: bf16 GEMM outputs, fp32 norm / RoPE math rounded
//             once), W8A16 / bf16 linears, fp8_model1 records for the window and compressed caches
//             (§4.1), FP8 indexer keys with an fp32 scale (§4.3), fp32 compressor state (§4.4); the
//             compressor projections, pooling, norm and RoPE stay fp32 (vLLM GPU, §3.4), the indexer
//             q stays bf16 (its FP8 quantization in vLLM is not simulated), indexer scores fp32; the
//             attention weights are cast to bf16 for P·V (§3.8, ops/attention_math.h).
#pragma once

#include <cstdint>
#include <vector>

#include "sieve/core/stage_timer.h"
#include "sieve/core/status.h"
#include "sieve/io/config_deepseek_v4.h"
#include "sieve/kv/step_batch.h"
#include "sieve/models/attention_model.h"
#include "models/deepseek_v4/scratch.h"
#include "models/deepseek_v4/step_plan.h"
#include "models/deepseek_v4/step_slots.h"
#include "models/deepseek_v4/weights.h"
#include "models/rope_table.h"
#include "sieve/ops/cache_record.h"
#include "sieve/ops/indexer_scores.h"
#include "sieve/ops/sparse_attention.h"
#include "sieve/ops/topk.h"

namespace sieve::dsv4 {

// Where a layer's caches live (model.cpp assigns them from the cache groups).
struct LayerCaches {
    CacheBinding swa;            // window rows, every layer
    CacheBinding compressed;     // compressed rows (CSA, HCA)
    CacheBinding state;          // main compressor state rows (CSA, HCA)
    CacheBinding indexer_keys;   // indexer keys (CSA)
    CacheBinding indexer_state;  // indexer compressor state rows (CSA)
};

class AttentionLayer {
public:
    AttentionLayer(const DeepseekV4Config& config, int64_t layer, LayerWeights weights, LayerCaches caches,
                   NumericsProfile profile, Backend& backend);
    // Builds the layer's RoPE table (§1.3: main for SWA-only layers, compress with YaRN for CSA / HCA).
    Status init();

    int64_t layer() const { return layer_; }
    // Adds the cache-group lists the layer reads to what a step's plan builds.
    void add_plan_needs(StepPlanNeeds& needs) const;
    // The layer's sub-buffers for the planned step (with the score rows an observer reads when `observed`).
    Expected<ScratchShape> scratch_shape(const StepBatch& batch, const StepPlan& plan, bool observed) const;
    // x, out: [batch.n_tokens(), hidden_size] f32. `plan` is the batch's plan, and s.arena holds at least the
    // bytes of scratch_shape().
    Status forward(const StepBatch& batch, const StepPlan& plan, const float* x, float* out, StageTimes* times,
                   SelectionObserver* observer, Scratch& s);

    CacheRecordLayout kv_layout() const { return kv_layout_; }    // window and compressed rows
    CacheRecordLayout key_layout() const { return key_layout_; }  // indexer keys

private:
    // Pooled entries of the tokens that complete one (§3.4), stored in `dest`. x: [N, D] f32.
    Status run_compressor(const StepBatch& batch, const StepPlan& plan, const float* x, const CompressorWeights& w,
                          const CacheBinding& state, const CacheBinding& dest, const CacheRecordLayout& dest_layout,
                          const LayerScratch& b);
    // CSA selection (§3.6) into b.selected [N, W]: local entry ids, ascending then −1. *rows is b.selected, or
    // nullptr for the short-context fallback without an observer: every visible entry (ops/selected_slots.h).
    Status select_top_k(const StepBatch& batch, const StepPlan& plan, const PlannedIndexer& ix, const float* x,
                        StageTimes* times, SelectionObserver* observer, const LayerScratch& b, Scratch& s,
                        const int32_t** rows);
    // Shows the observer each token's selection row and its scores (the one readback), then puts the rows it
    // may have changed back; the short-context fallback shows every causal entry, unscored.
    Status observe_selection(const StepBatch& batch, const PlannedIndexer& ix, SelectionObserver& observer,
                             const LayerScratch& b, Scratch& s);
    // The compressed slots each token reads (§3.5, §3.7) into b.compressed_slots [N, n_compressed]: the
    // entries of `rows` (nullptr: every visible entry) through the group's block tables.
    Status compressed_slots(const StepPlan& plan, const PlannedCompressed& c, const int32_t* rows, int64_t width,
                            const LayerScratch& b);
    // The ops' params whose workspace the scratch sizes (pointers from `b`, null while counting).
    IndexerScoresParams indexer_params(const StepPlan& plan, const PlannedIndexer& ix, const BoundCache& keys, bool fused,
                                       const LayerScratch& b) const;
    TopkParams topk_params(const StepPlan& plan, const PlannedIndexer& ix, const LayerScratch& b) const;
    SparseAttentionParams attention_params(const StepPlan& plan, const BoundCache& window, const BoundCache* compressed,
                                     int64_t n_compressed, const LayerScratch& b) const;
    Status rope(void* x, DType x_type, void* y, DType y_type, const int64_t* positions, int64_t n_tokens,
                int64_t n_heads, int64_t head_dim, bool inverse);

    const DeepseekV4Config& config_;
    const DeepseekV4Layer& spec_;
    int64_t layer_;
    LayerWeights w_;
    LayerCaches caches_;
    NumericsProfile profile_;
    Backend& backend_;
    DType act_;  // activations between ops: f32 (exact) or bf16 (deployed)
    CacheRecordLayout kv_layout_, key_layout_;
    RopeTable rope_;  // [r/2] the layer's RoPE table
};

}  // namespace sieve::dsv4
