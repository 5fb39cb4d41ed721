// The model families sieve runs: one line per family (models/<family>/family.cpp defines it).
#include "sieve/models/registry.h"

#include <string>

namespace sieve {

extern const ModelFamily kDeepseekV4Family;
extern const ModelFamily kDsaMlaFamily;
extern const ModelFamily kQsaFamily;

std::span<const ModelFamily* const> model_families() {
    static const ModelFamily* const families[] = {&kDeepseekV4Family, &kDsaMlaFamily, &kQsaFamily};
    return families;
}

Expected<const ModelFamily*> model_family(std::string_view model_type) {
    std::string known;
    for (const ModelFamily* f : model_families())
        for (std::string_view t : f->model_types) {
            if (t == model_type) return f;
            known += fmt::format("{}{}", known.empty() ? "" : ", ", t);
        }
    return unsupported_error("model_type {}: sieve runs the attention layers of {}", model_type, known);
}

double layout_entry_bytes(const AttentionLayerLayout& layer, std::string_view cache) {
    for (const CacheSpec& c : layer.caches)
        if (c.name == cache) return static_cast<double>(c.entry_bytes);
    return 0.0;
}

}  // namespace sieve
