#include "sieve/models/model_factory.h"

#include <fmt/format.h>

#include "models/allocation.h"
#include "sieve/models/registry.h"

namespace sieve {

Expected<std::unique_ptr<AttentionModel>> load_attention_model(const ModelConfig& config, const Checkpoint& checkpoint,
                                                               const ModelOptions& options) {
    if (!options.backend) return invalid_argument_error("load_attention_model: no backend given");
    // Loading allocates weights, packed copies and tables: a failure is out_of_memory, not an exception.
    SIEVE_ASSIGN_OR_RETURN(const ModelFamily* family, model_family(config.model_type));
    if (options.state_block_size != 0 && config.model_type != "deepseek_v4")
        return unsupported_error("load_attention_model: state_block_size {}: only deepseek_v4 keeps compressor states",
                                 options.state_block_size);
    if (options.cache_block_size < 0)
        return invalid_argument_error("load_attention_model: cache_block_size {}: a number of entries, or 0 for the family's own",
                                      options.cache_block_size);
    if (options.cache_block_size != 0 && config.model_type != "deepseek_v32" && config.model_type != "hy_v4")
        return unsupported_error("load_attention_model: cache_block_size {}: only DSA on MLA (deepseek_v32, hy_v4) takes "
                                 "another cache block size, not {}",
                                 options.cache_block_size, config.model_type);
    return no_bad_alloc([&] { return family->load(config, checkpoint, options); },
                        [&] { return fmt::format("loading the {} model", config.model_type); });
}

}  // namespace sieve
