// What only the QSA model tests need: small random QSA checkpoints built in memory (text-only or
// multimodal names, f32 / bf16 / FP8-block weights), random requests and the schedules they run
// under (through the check's runner, tools/check/golden_run.h), and an independent double-precision
// reference of one QSA layer written from specs/qsa.md §4 (full raw-key history, every visible group
// re-pooled for every query, as transformers does).
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "sieve/core/status.h"
#include "sieve/core/tensor.h"
#include "golden_run.h"
#include "sieve/io/checkpoint.h"
#include "sieve/io/config.h"
#include "model_test_util.h"

namespace sieve::model_test {

// ---- random checkpoints ----------------------------------------------------------------------------

struct QsaTestConfig {
    int64_t hidden = 48, heads = 4, kv_heads = 2, head_dim = 16;
    double partial_rotary = 0.5;
    double theta = 10000.0;
    int64_t index_heads = 2, index_dim = 8, budget = 6, ratio = 3;
    double eps = 1e-2;
    std::vector<std::string> layer_types = {"linear_attention", "qwen_sparse_attention"};
    bool multimodal = false;  // qwen4_exp + text_config + model.language_model.* names
    int64_t mtp_layers = 0;   // mtp_num_hidden_layers: QSA layers after the main ones (mtp.layers.J.self_attn)
};

std::string qsa_config_json(const QsaTestConfig& c);
// Random fp32 weights of every QSA layer (MTP layers included), canonical (text-only) names. Norm weights near 0 (Gemma).
std::map<std::string, Tensor> qsa_random_weights(const QsaTestConfig& c, uint64_t seed);

enum class StoredAs { f32, bf16, fp8_block };
// An in-memory checkpoint of `weights` (canonical names; written under model.language_model.* when
// c.multimodal). fp8_block: the rank-2 weights as e4m3 with a 128×128 f32 `weight_scale_inv` sibling.
Expected<std::unique_ptr<Checkpoint>> qsa_checkpoint(const QsaTestConfig& c, const std::map<std::string, Tensor>& weights,
                                                     StoredAs stored = StoredAs::f32);
// What an fp8_block checkpoint's weights dequantize to (so an f32 checkpoint of these is equivalent).
std::map<std::string, Tensor> qsa_fp8_roundtrip(const std::map<std::string, Tensor>& weights);

// ---- requests and schedules ------------------------------------------------------------------------

// Requests of the given lengths with inputs ~ N(0, 1) for a model of `n_layers` layers.
struct RandomRequests {
    std::vector<int64_t> n_tokens;
    std::vector<std::vector<std::vector<float>>> inputs;  // [request][layer_pos] [n_tokens · hidden]
    std::vector<GoldenRunRequest> requests() const;       // views of `inputs`
};
RandomRequests random_requests(const std::vector<int64_t>& lengths, int64_t n_layers, int64_t hidden, uint64_t seed);

// The valid entries of a selection, in the order the layer passed them.
std::vector<int32_t> valid_entries(const SelectionRecord& s);

// golden_schedule's one-shot, chunk:N and decode; "mixed:<seed>" is its mixed schedule of that seed
// under a budget of 7 tokens a step (the short random requests still mix several per step).
GoldenSchedule qsa_schedule(const std::string& name, const std::vector<int64_t>& n_tokens);

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

// output_diff's ‖a − b‖₂ / ‖b‖₂ over the rows `rows` (all rows when empty).
double relative_error(const std::vector<float>& got, const std::vector<double>& want, int64_t hidden,
                      const std::vector<int64_t>& rows = {});

}  // namespace sieve::model_test
