// The ref backend's DSA-on-MLA op functions (ops/sparse_mla.h,
// ops/dsa_output_gate.h, ops/mla_head_proj.h): scalar, accumulating in double. Internal to backends/ref.
#pragma once

#include <cstdint>

#include "core/status.h"
#include "ops/dsa_output_gate.h"
#include "ops/mla_head_proj.h"
#include "ops/sparse_mla.h"

namespace sieve::ref {

Status sparse_mla_attention(const SparseMlaAttentionParams& p);
Status dsa_output_gate(const DsaOutputGateParams& p);
Status mla_head_proj(const MlaHeadProjParams& p);

}  // namespace sieve::ref
