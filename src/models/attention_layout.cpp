#include "sieve/models/attention_layout.h"

#include "sieve/models/registry.h"

#include <fmt/format.h>

namespace sieve {

std::string cache_format_text(const CacheRecordLayout& l) {
    if (l.bf16_tail() > 0)
        return fmt::format("{} [{} + {} rope]", cache_record_format_name(l.format), l.quant_dim(), l.bf16_tail());
    return fmt::format("{} [{}]", cache_record_format_name(l.format), l.dim);
}

Expected<AttentionLayout> attention_layout(const ModelConfig& config, NumericsProfile profile) {
    SIEVE_ASSIGN_OR_RETURN(const ModelFamily* family, model_family(config.model_type));
    return family->layout(config, profile);
}

std::vector<int64_t> layers_sieve_runs(const AttentionLayout& layout) {
    std::vector<int64_t> ids;
    for (const AttentionLayerLayout& l : layout.layers)
        if (l.sieve_runs) ids.push_back(l.layer);
    return ids;
}

}  // namespace sieve
