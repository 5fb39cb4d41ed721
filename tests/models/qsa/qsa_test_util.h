// Helpers of the QSA model tests: small random QSA checkpoints built in memory (text-only or
// multimodal names, f32 / bf16 / FP8-block weights), an engine driver that runs requests under a
// schedule and records every layer output and selection, and an independent double-precision
// reference of one QSA layer written from specs/qsa.md §4 (full raw-key history, every visible group
// re-pooled for every query, as transformers does).
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <set>
#include <span>
#include <string>
#include <vector>

#include "core/status.h"
#include "core/tensor.h"
#include "io/checkpoint.h"
#include "io/config.h"
#include "models/attention_model.h"
#include "runtime/engine.h"

namespace sieve::qsa_test {

std::string data_dir();  // SIEVE_TEST_DATA_DIR
std::string fixture_dir();  // <data>/qwen4_exp

// ---- random checkpoints ----------------------------------------------------------------------------

struct QsaTestConfig {
    int64_t hidden = 48, heads = 4, kv_heads = 2, head_dim = 16;
    double partial_rotary = 0.5;
    double theta = 10000.0;
    int64_t index_heads = 2, index_dim = 8, budget = 6, ratio = 3;
    double eps = 1e-2;
    std::vector<std::string> layer_types = {"linear_attention", "qwen_sparse_attention"};
    bool multimodal = false;  // qwen4_exp + text_config + model.language_model.* names
};

std::string qsa_config_json(const QsaTestConfig& c);
// Random fp32 weights of every QSA layer, canonical (text-only) names. Norm weights near 0 (Gemma).
std::map<std::string, Tensor> qsa_random_weights(const QsaTestConfig& c, uint64_t seed);

enum class StoredAs { f32, bf16, fp8_block };
// An in-memory checkpoint of `weights` (canonical names; written under model.language_model.* when
// c.multimodal). fp8_block: the rank-2 weights as e4m3 with a 128×128 f32 `weight_scale_inv` sibling.
Expected<std::unique_ptr<Checkpoint>> qsa_checkpoint(const QsaTestConfig& c, const std::map<std::string, Tensor>& weights,
                                                     StoredAs stored = StoredAs::f32);
// What an fp8_block checkpoint's weights dequantize to (so an f32 checkpoint of these is equivalent).
std::map<std::string, Tensor> qsa_fp8_roundtrip(const std::map<std::string, Tensor>& weights);

// ---- engine driver ---------------------------------------------------------------------------------

struct RequestInput {
    int64_t n_tokens = 0;
    int64_t prompt_tokens = 0;         // the rest decode one token per step
    std::vector<std::vector<float>> inputs;  // [layer_pos] [n_tokens · hidden]
};

struct Selection {
    std::vector<int32_t> tokens;  // the selected row as the layer passed it (valid entries, in order)
    std::vector<float> scores;    // group scores, empty when dense
    int64_t tokens_per_score = 0;
};

struct RunResult {
    std::vector<std::vector<std::vector<float>>> outputs;  // [request][layer_pos] [n_tokens · hidden]
    // [request][layer_pos][position]
    std::vector<std::vector<std::vector<Selection>>> selections;
    EngineStats stats;
};

// Optionally rewrites a selection before attention uses it (tests of the observer contract).
// scores: the layer's group scores for that token (empty when it took every group).
using SelectionRewrite = std::function<void(int64_t layer, RequestId, int64_t position, std::span<int32_t> selected,
                                            std::span<const float> scores)>;

// observe = false: no observer at all (nothing recorded, `selections` stay empty), so the layers take
// the fused selection of indexer_scores instead of scores + topk.
Expected<RunResult> run_requests(AttentionModel& model, const std::vector<RequestInput>& requests,
                                 const EngineOptions& options, const SelectionRewrite& rewrite = {},
                                 bool observe = true);

// Engine options of the usual schedules: "one-shot", "chunk:N", "decode", "mixed:<seed>" (random
// prompt/decode splits, random chunks under a budget of 7 tokens).
EngineOptions schedule(const std::string& name, std::vector<RequestInput>& requests);

// ---- the double-precision reference layer -------------------------------------------------------------

struct ReferenceWeights {  // double copies of one layer's tensors, [out, in] row-major
    std::vector<double> q_proj, k_proj, v_proj, o_proj, index_qk_proj;
    std::vector<double> q_norm, k_norm, index_q_norm, index_k_norm;
};
Expected<ReferenceWeights> reference_weights(const Checkpoint& checkpoint, const ModelConfig& config, int64_t layer);

struct ReferenceToken {
    std::set<int32_t> tokens;   // the positions attention reads
    std::vector<double> scores;  // group scores (every visible group), empty when not scored
    bool boundary_tie = false;   // the block_topk-th and next scores within 1e-6 relative: implementations may differ
};
struct ReferenceResult {
    std::vector<double> out;  // [T, hidden]
    std::vector<ReferenceToken> tokens;
};
// One request of T tokens at positions 0..T−1 through one QSA layer (qsa.md §4.1–§4.8).
ReferenceResult reference_layer(const QsaConfig& c, const ReferenceWeights& w, const float* x, int64_t T);
// Plain causal dense attention with the same projections, norms, RoPE and gate (no indexer).
std::vector<double> reference_dense_layer(const QsaConfig& c, const ReferenceWeights& w, const float* x, int64_t T);

// ‖a − b‖₂ / ‖b‖₂ over the rows of `tokens` (all rows when empty).
double relative_error(const std::vector<float>& got, const std::vector<double>& want, int64_t hidden,
                      const std::vector<int64_t>& rows = {});

}  // namespace sieve::qsa_test
