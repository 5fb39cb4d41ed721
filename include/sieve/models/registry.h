// The registered model families (models/family.h), and the lookup by a config's model_type.
#pragma once

#include <span>
#include <string_view>

#include "sieve/core/status.h"
#include "sieve/models/family.h"

namespace sieve {

std::span<const ModelFamily* const> model_families();
// The family running `model_type`; unsupported naming the model_types sieve runs otherwise.
Expected<const ModelFamily*> model_family(std::string_view model_type);

}  // namespace sieve
