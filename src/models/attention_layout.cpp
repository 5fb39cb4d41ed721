#include "models/attention_layout.h"

#include <type_traits>

#include <fmt/format.h>

namespace sieve {

std::string cache_format_text(const CacheRecordLayout& l) {
    if (l.bf16_tail() > 0)
        return fmt::format("{} [{} + {} rope]", cache_record_format_name(l.format), l.quant_dim(), l.bf16_tail());
    return fmt::format("{} [{}]", cache_record_format_name(l.format), l.dim);
}

Expected<AttentionLayout> attention_layout(const ModelConfig& config, NumericsProfile profile) {
    return std::visit(
        [&](const auto& family) -> AttentionLayout {
            using T = std::decay_t<decltype(family)>;
            if constexpr (std::is_same_v<T, DeepseekV4Config>) return deepseek_v4_attention_layout(family, profile);
            else if constexpr (std::is_same_v<T, DsaMlaConfig>) return dsa_mla_attention_layout(family, profile);
            else return qsa_attention_layout(family, profile);
        },
        config.family);
}

}  // namespace sieve
