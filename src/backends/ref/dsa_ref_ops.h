// The ref backend's DSA-on-MLA op functions (ops/sparse_mla.h, ops/dsa_indexer.h,
// ops/dsa_output_gate.h, ops/mla_head_proj.h): scalar, accumulating in double. Internal to backends/ref.
#pragma once

#include <cstdint>

#include "core/status.h"
#include "ops/dsa_indexer.h"
#include "ops/dsa_output_gate.h"
#include "ops/mla_head_proj.h"
#include "ops/sparse_mla.h"

namespace sieve::ref {

// One group of n values → e4m3 bytes and its UE8M0 scale, by ops/quant_fp8.h's rule (NaN/inf poisoning
// included). Returns the scale (NaN for a poisoned group).
float quant_group_e4m3(const float* x, int64_t n, uint8_t* q);

Status sparse_mla_cache_write(const SparseMlaCacheWriteParams& p);
Status sparse_mla_attention(const SparseMlaAttentionParams& p);
Status dsa_indexer_key_write(const DsaIndexerKeyWriteParams& p);
Status dsa_indexer_scores(const DsaIndexerScoresParams& p);
Status dsa_output_gate(const DsaOutputGateParams& p);
Status mla_head_proj(const MlaHeadProjParams& p);

}  // namespace sieve::ref
