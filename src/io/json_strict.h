// Strict, non-throwing JSON parsing for hostile input (safetensors headers, index files).
// Internal to sieve_io: it exposes nlohmann::json, which is a private dependency of the library.
#pragma once

#include <nlohmann/json.hpp>

#include <string_view>

#include "sieve/core/status.h"

namespace sieve {

// Parses `text` into `out`. Rejects invalid JSON (the message gives the byte position) and any
// object with a repeated key, at any depth: nlohmann keeps one of two equal keys silently, so a
// SAX pass checks for them before the DOM is built. `label` names the file in messages. The
// error code is `corrupt`; no exception escapes (an allocation failure gives out_of_memory).
Status json_parse_strict(std::string_view text, std::string_view label, nlohmann::json& out);

// "object", "array", "string", "number", ...: for messages about a field of the wrong type.
const char* json_type_name(const nlohmann::json& value);

}  // namespace sieve
