// The ref backend's DSA-on-MLA op functions (ops/dsa_output_gate.h, ops/mla_head_proj.h): scalar,
// accumulating in double. Internal to backends/ref.
#pragma once

#include <cstdint>

#include "sieve/core/status.h"
#include "sieve/ops/dsa_output_gate.h"
#include "sieve/ops/mla_head_proj.h"

namespace sieve::ref {

Status dsa_output_gate(const DsaOutputGateParams& p);
Status mla_head_proj(const MlaHeadProjParams& p);

}  // namespace sieve::ref
