// Reading a golden fixture's golden.safetensors (specs/golden_format.md) for `sieve check` and the
// model tests. Every tensor the check compares against is validated here, so that a degenerate
// fixture is an error naming the tensor (exit 2), never a check that passes because it compared
// nothing: a fixture without requests or layers, an empty request, a reference input or output that
// is non-finite or all zero, a .topk of the wrong dtype, shape or contents, a tensor the check would
// not read.
#pragma once

#include <cstdint>
#include <filesystem>
#include <span>
#include <string>
#include <vector>

#include "sieve/core/status.h"
#include "sieve/core/tensor.h"
#include "sieve/io/config.h"

namespace sieve {

// The index space of a layer's .topk (golden_format.md): token positions for DSA and QSA, one
// index per token; compressed-entry ids for DeepSeek-V4 CSA, one entry per `tokens_per_entry`
// source tokens.
struct TopkIndexSpace {
    int64_t tokens_per_entry = 1;
    // How many candidates the token at `position` may select: positions 0..p (DSA: dsa_mla.md §2.7;
    // QSA: whole groups ending at or before p plus the open tail, qsa.md §4.5–§4.6), or the CSA
    // entries k < ⌊(p + 1)/m⌋, each visible from its last source token on (deepseek_v4.md §3.6).
    int64_t causal_candidates(int64_t position) const { return (position + 1) / tokens_per_entry; }
    // The width of the score row the reference's top-k ran over for a request of `n_tokens`
    // tokens: every index a reference can emit lies in [0, range).
    int64_t range(int64_t n_tokens) const { return n_tokens / tokens_per_entry; }
};

// The index space of the reference's top-k of model layer `layer`; an error when the layer
// selects nothing (a DeepSeek-V4 sliding-window or HCA layer).
Expected<TopkIndexSpace> topk_index_space(const ModelConfig& config, int64_t layer);

// The reference's selection of one layer of one request.
struct GoldenTopk {
    TopkIndexSpace space;
    // [T] the selected set of each token: its valid entries, ascending (golden_format.md: compare as sets).
    std::vector<std::vector<int32_t>> sets;
    // Entries that lie past their token's causal range and so mean "none" (golden_format.md
    // .topk): what torch.topk returns over a masked row with fewer candidates than k.
    int64_t none_entries = 0;
};

struct GoldenLayer {
    Tensor input;   // [T, hidden] f32: the attention module's captured input
    Tensor output;  // [T, hidden] f32: its captured output
    bool has_topk = false;
    GoldenTopk topk;  // when has_topk
};

struct GoldenRequest {
    int64_t n_tokens = 0;
    std::vector<GoldenLayer> layers;  // [layer_pos]: one per entry of the model's layers()
};

struct GoldenFixture {
    std::string family;          // metadata "family" (= the checkpoint's model_type)
    std::vector<int64_t> layers;  // the model layer of each GoldenRequest::layers entry
    std::vector<GoldenRequest> requests;
};

// Reads and validates `golden_path` for a model of `config` that runs `layers` (the model's layer
// indices, in order) with hidden size `hidden`.
Expected<GoldenFixture> read_golden_fixture(const std::filesystem::path& golden_path, const ModelConfig& config,
                                            std::span<const int64_t> layers, int64_t hidden);

}  // namespace sieve
