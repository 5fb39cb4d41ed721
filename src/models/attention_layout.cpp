#include "models/attention_layout.h"

#include "models/registry.h"

namespace sieve {

Expected<AttentionLayout> attention_layout(const ModelConfig& config, NumericsProfile profile) {
    SIEVE_ASSIGN_OR_RETURN(const ModelFamily* family, model_family(config.model_type));
    return family->layout(config, profile);
}

}  // namespace sieve
