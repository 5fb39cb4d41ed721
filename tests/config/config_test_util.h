// Helpers of the config tests: parse a JSON text, patch a base config (RFC 7386 merge patch: a
// null removes a key), and check that an error has the expected code and names what it should.
#pragma once

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <initializer_list>
#include <string>
#include <string_view>

#include "sieve/io/config.h"

namespace sieve::config_test {

inline ModelConfig parse_ok(std::string_view json) {
    Expected<ModelConfig> config = parse_model_config(json, "config.json");
    if (!config) ADD_FAILURE() << config.status().to_string();
    return config ? *config : ModelConfig{};
}

// `base` with `patch` merged in (objects merge recursively; arrays and scalars are replaced).
inline std::string patched(std::string_view base, std::string_view patch) {
    nlohmann::json doc = nlohmann::json::parse(base);
    doc.merge_patch(nlohmann::json::parse(patch));
    return doc.dump();
}

// Fails unless parsing `json` gives `code` with a message holding every one of `parts`.
inline void expect_error(std::string_view json, StatusCode code, std::initializer_list<std::string_view> parts) {
    Expected<ModelConfig> config = parse_model_config(json, "config.json");
    ASSERT_FALSE(config.has_value()) << "parsed, but expected an error holding " << *parts.begin();
    Status s = config.status();
    EXPECT_EQ(s.code(), code) << s.to_string();
    EXPECT_EQ(s.message().rfind("config.json: ", 0), 0u) << s.message();
    for (std::string_view part : parts)
        EXPECT_NE(s.message().find(part), std::string::npos) << "missing \"" << part << "\" in: " << s.message();
}

}  // namespace sieve::config_test
