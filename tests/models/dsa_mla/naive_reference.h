// An independent, naive (non-absorbed, dsa_mla.md §2.4) DSA-on-MLA attention layer in double precision,
// written from the spec for the model tests: per head k = [k_nope | RoPE(kr)], v from kv_b_proj, full
// softmax over an explicit selected set (or every causal token) with the sink, gate and o_proj. It
// reads the HF-named f32 weights of a checkpoint; it has no indexer (selections come from the caller).
#pragma once

#include <cstdint>
#include <map>
#include <span>
#include <string>
#include <vector>

#include "sieve/io/config_dsa_mla.h"
#include "model_test_util.h"

namespace sieve::model_test {

class NaiveLayer {
public:
    NaiveLayer(const DsaMlaConfig& c, const std::vector<HostTensor>& weights, int64_t layer);
    // x: [T, D] of one request from position 0. selected[p]: the positions token p attends to (entries < 0
    // or > p ignored); empty `selected` = every causal token. Returns [T, D].
    std::vector<float> forward(std::span<const float> x, const std::vector<std::vector<int32_t>>& selected) const;

private:
    const std::vector<float>& w(const std::string& leaf) const;
    DsaMlaConfig c_;
    int64_t layer_;
    std::map<std::string, std::vector<float>> weights_;
    std::vector<double> inv_freq_;
    double attention_factor_ = 1.0;
};

}  // namespace sieve::model_test
