// The refusals of the ModelOptions a family does not take (sieve/models/model_factory.h), one wording for
// every family's load.
#pragma once

#include <string_view>

#include "sieve/core/status.h"
#include "sieve/models/model_factory.h"

namespace sieve {

// state_block_size ≠ 0: only deepseek_v4 keeps compressor states.
inline Status refuse_state_block_size(std::string_view model_type, const ModelOptions& options) {
    if (options.state_block_size == 0) return Status::ok();
    return unsupported_error("{}: state_block_size {}: only deepseek_v4 keeps compressor states", model_type,
                             options.state_block_size);
}

// cache_block_size ≠ 0: only DSA on MLA takes another cache block size.
inline Status refuse_cache_block_size(std::string_view model_type, const ModelOptions& options) {
    if (options.cache_block_size == 0) return Status::ok();
    return unsupported_error("{}: cache_block_size {}: only DSA on MLA (deepseek_v32, hy_v4) takes another cache block size",
                             model_type, options.cache_block_size);
}

}  // namespace sieve
