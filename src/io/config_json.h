// Typed access to the fields of one config.json object, with errors that name the source, the
// field path and the value found. Internal to src/io (nlohmann::json stays out of public headers).
//
// JSON null counts as absent (Python writes None as null). Integers may be written as integral
// floats (4096.0); a fractional value, a string or a boolean where a number is expected is an error.
#pragma once

#include <nlohmann/json.hpp>

#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <fmt/format.h>

#include "sieve/core/status.h"

namespace sieve {

struct ConfigIntRange {
    int64_t min = 0;
    int64_t max = 0;
};

// Upper bound of sizes and counts: keeps every product of two fields inside int64 and every
// double -> int conversion defined, whatever a hostile config says.
inline constexpr int64_t kConfigMaxValue = std::numeric_limits<int32_t>::max();
// Upper bound of layer counts: per-layer tables are allocated from them.
inline constexpr int64_t kConfigMaxLayers = 1 << 16;

inline constexpr ConfigIntRange kConfigPositive{1, kConfigMaxValue};
inline constexpr ConfigIntRange kConfigNonNegative{0, kConfigMaxValue};
inline constexpr ConfigIntRange kConfigLayerCount{1, kConfigMaxLayers};
inline constexpr ConfigIntRange kConfigExtraLayerCount{0, kConfigMaxLayers};
inline constexpr ConfigIntRange kConfigSigned{-kConfigMaxValue, kConfigMaxValue};

struct ConfigRealRange {
    double min = -std::numeric_limits<double>::infinity();
    bool   min_exclusive = false;
    double max = std::numeric_limits<double>::infinity();
};
inline constexpr ConfigRealRange kConfigAnyReal{};
inline constexpr ConfigRealRange kConfigPositiveReal{0.0, true};

class ConfigObject {
public:
    // `object` must be a JSON object and outlive this view. `path` is the dotted prefix of its
    // fields in messages ("" for the top level, "text_config", "rope_parameters.compress").
    ConfigObject(const nlohmann::json& object, std::string source, std::string path);

    const std::string& source() const { return source_; }
    // `field "rope_parameters.compress.factor"` names used in messages.
    std::string field_name(std::string_view key) const;
    // The value of `key`, or nullptr when the key is absent or null.
    const nlohmann::json* find(std::string_view key) const;
    bool has(std::string_view key) const { return find(key) != nullptr; }

    Status read_int(std::string_view key, ConfigIntRange range, int64_t* out) const;
    Status read_int_or(std::string_view key, int64_t fallback, ConfigIntRange range, int64_t* out) const;
    Status read_optional_int(std::string_view key, ConfigIntRange range, std::optional<int64_t>* out) const;

    Status read_real(std::string_view key, ConfigRealRange range, double* out) const;
    Status read_real_or(std::string_view key, double fallback, ConfigRealRange range, double* out) const;
    Status read_optional_real(std::string_view key, ConfigRealRange range, std::optional<double>* out) const;

    Status read_bool_or(std::string_view key, bool fallback, bool* out) const;
    Status read_string(std::string_view key, std::string* out) const;
    Status read_optional_string(std::string_view key, std::optional<std::string>* out) const;

    Status read_optional_object(std::string_view key, std::optional<ConfigObject>* out) const;
    Status read_optional_string_list(std::string_view key, std::optional<std::vector<std::string>>* out) const;
    Status read_optional_int_list(std::string_view key, ConfigIntRange range,
                                  std::optional<std::vector<int64_t>>* out) const;

    // `<source>: field "<path.key>": <message>`.
    template <typename... Args>
    Status field_error(StatusCode code, std::string_view key, fmt::format_string<Args...> format,
                       Args&&... args) const {
        return Status(code, fmt::format("{}: field \"{}\": {}", source_, field_path(key),
                                        fmt::format(format, std::forward<Args>(args)...)));
    }
    // `<source>: <message>`, for errors that involve several fields.
    template <typename... Args>
    Status error(StatusCode code, fmt::format_string<Args...> format, Args&&... args) const {
        return Status(code, fmt::format("{}: {}", source_, fmt::format(format, std::forward<Args>(args)...)));
    }
    // "rope_parameters.compress.factor" (without quotes).
    std::string field_path(std::string_view key) const;

    // A size that counts positions of one request (a window, a top-k, a budget) must not exceed
    // max_position_embeddings, the longest request the model runs: `<source>: field "<key>" = <value>
    // exceeds field "max_position_embeddings" = <limit>: <why>`. Rows, lists and caches are sized by such
    // fields; one far above any context is a mistake, not a model.
    Status check_within_context(std::string_view key, int64_t value, int64_t max_position_embeddings,
                                std::string_view why) const;

private:
    Status missing(std::string_view key) const;
    Status int_from(const nlohmann::json& value, std::string_view what, ConfigIntRange range, int64_t* out) const;

    const nlohmann::json* object_;
    std::string source_;
    std::string path_;
};

// "\"abc\" (string)", "3.5 (number)", "an array", ...: a short description of a JSON value for
// error messages, cut to a few dozen characters.
std::string config_describe_value(const nlohmann::json& value);

}  // namespace sieve
