// The ref backend's functions for DeepSeek-V4's ops (ops/compressor.h). Internal to backends/ref.
#pragma once

#include <cstdint>

#include "sieve/core/status.h"
#include "sieve/ops/compressor.h"

namespace sieve::ref {

Status compressor_state_store(const CompressorStateStoreParams& p);
Status compressor_pool(const CompressorPoolParams& p);

}  // namespace sieve::ref
