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
    // Each family's load refuses the options it does not take (ModelOptions: state_block_size, cache_block_size).
    return no_bad_alloc([&] { return family->load(config, checkpoint, options); },
                        [&] { return fmt::format("loading the {} model", config.model_type); });
}

}  // namespace sieve
