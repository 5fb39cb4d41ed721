#include "models/model_factory.h"

namespace sieve {

Expected<std::unique_ptr<AttentionModel>> load_attention_model(const ModelConfig& config, const Checkpoint& checkpoint,
                                                               const ModelOptions& options) {
    (void)checkpoint;
    if (!options.backend) return invalid_argument_error("load_attention_model: no backend given");
    // Each family registers here once its model exists (models/<family>/model.h).
    return unsupported_error("model_type {}: sieve cannot run its attention layers yet", config.model_type);
}

}  // namespace sieve
