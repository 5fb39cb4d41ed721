#include "models/model_factory.h"

#include <fmt/format.h>

#include "models/allocation.h"
#include "models/deepseek_v4/model.h"
#include "models/dsa_mla/model.h"
#include "models/qsa/model.h"

namespace sieve {

namespace {

Expected<std::unique_ptr<AttentionModel>> load_family(const ModelConfig& config, const Checkpoint& checkpoint,
                                                      const ModelOptions& options) {
    if (config.dsa_mla()) return load_dsa_mla_model(config, checkpoint, options);
    if (config.qsa()) {
        SIEVE_ASSIGN_OR_RETURN(auto qsa, QsaModel::load(config, checkpoint, options));
        return std::unique_ptr<AttentionModel>(std::move(qsa));
    }
    // Each family registers here once its model exists (models/<family>/model.h).
    if (const DeepseekV4Config* c = config.deepseek_v4()) {
        DeepseekV4Options o;
        o.profile = options.profile;
        o.backend = options.backend;
        o.layers = options.layers;
        return load_deepseek_v4_model(*c, checkpoint, o);
    }
    return unsupported_error("model_type {}: sieve cannot run its attention layers yet", config.model_type);
}

}  // namespace

Expected<std::unique_ptr<AttentionModel>> load_attention_model(const ModelConfig& config, const Checkpoint& checkpoint,
                                                               const ModelOptions& options) {
    if (!options.backend) return invalid_argument_error("load_attention_model: no backend given");
    // Loading allocates weights, packed copies and tables: a failure is out_of_memory, not an exception.
    return no_bad_alloc([&] { return load_family(config, checkpoint, options); },
                        [&] { return fmt::format("loading the {} model", config.model_type); });
}

}  // namespace sieve
