// config_json: see config_json.h
#include "io/config_json.h"

#include <cmath>
#include <utility>

namespace sieve {

namespace {

const char* value_type_name(const nlohmann::json& value) {
    switch (value.type()) {
        case nlohmann::json::value_t::null: return "null";
        case nlohmann::json::value_t::object: return "object";
        case nlohmann::json::value_t::array: return "array";
        case nlohmann::json::value_t::string: return "string";
        case nlohmann::json::value_t::boolean: return "boolean";
        case nlohmann::json::value_t::number_integer:
        case nlohmann::json::value_t::number_unsigned:
        case nlohmann::json::value_t::number_float: return "number";
        default: return "value";
    }
}

// `below`: the value is under range.min (else over range.max).
std::string range_violation(ConfigIntRange range, bool below, const std::string& value) {
    if (below && range.min == 1) return fmt::format("must be positive, got {}", value);
    return fmt::format("must be in [{}, {}], got {}", range.min, range.max, value);
}

}  // namespace

std::string config_describe_value(const nlohmann::json& value) {
    if (value.is_object()) return "an object";
    if (value.is_array()) return fmt::format("an array of {} entries", value.size());
    // error_handler_t::replace: dump never throws, whatever bytes a string holds.
    std::string text = value.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
    constexpr size_t kMaxChars = 48;
    if (text.size() > kMaxChars) text = text.substr(0, kMaxChars) + "...";
    return fmt::format("{} ({})", text, value_type_name(value));
}

ConfigObject::ConfigObject(const nlohmann::json& object, std::string source, std::string path)
    : object_(&object), source_(std::move(source)), path_(std::move(path)) {}

std::string ConfigObject::field_path(std::string_view key) const {
    if (path_.empty()) return std::string(key);
    return fmt::format("{}.{}", path_, key);
}

Status ConfigObject::check_within_context(std::string_view key, int64_t value, int64_t max_position_embeddings,
                                          std::string_view why) const {
    if (value <= max_position_embeddings) return Status::ok();
    return error(StatusCode::invalid_argument, "{} = {} exceeds {} = {}: {}", field_name(key), value,
                 field_name("max_position_embeddings"), max_position_embeddings, why);
}

std::string ConfigObject::field_name(std::string_view key) const {
    return fmt::format("field \"{}\"", field_path(key));
}

const nlohmann::json* ConfigObject::find(std::string_view key) const {
    auto it = object_->find(key);
    if (it == object_->end() || it->is_null()) return nullptr;
    return &*it;
}

Status ConfigObject::missing(std::string_view key) const {
    return field_error(StatusCode::not_found, key, "required, but absent or null");
}

Status ConfigObject::int_from(const nlohmann::json& value, std::string_view key, ConfigIntRange range,
                              int64_t* out) const {
    if (value.is_number_unsigned()) {
        uint64_t u = value.get<uint64_t>();
        if (u > static_cast<uint64_t>(range.max))
            return field_error(StatusCode::invalid_argument, key, "{}", range_violation(range, false, std::to_string(u)));
        *out = static_cast<int64_t>(u);
    } else if (value.is_number_integer()) {
        *out = value.get<int64_t>();
    } else if (value.is_number_float()) {
        double d = value.get<double>();
        if (!std::isfinite(d) || d != std::floor(d))
            return field_error(StatusCode::invalid_argument, key, "expected an integer, got {}",
                               config_describe_value(value));
        if (d < static_cast<double>(range.min) || d > static_cast<double>(range.max))
            return field_error(StatusCode::invalid_argument, key, "{}",
                               range_violation(range, d < static_cast<double>(range.min), fmt::format("{}", d)));
        *out = static_cast<int64_t>(d);
    } else {
        return field_error(StatusCode::invalid_argument, key, "expected an integer, got {}",
                           config_describe_value(value));
    }
    if (*out < range.min || *out > range.max)
        return field_error(StatusCode::invalid_argument, key, "{}",
                           range_violation(range, *out < range.min, std::to_string(*out)));
    return Status::ok();
}

Status ConfigObject::read_int(std::string_view key, ConfigIntRange range, int64_t* out) const {
    const nlohmann::json* value = find(key);
    if (value == nullptr) return missing(key);
    return int_from(*value, key, range, out);
}

Status ConfigObject::read_int_or(std::string_view key, int64_t fallback, ConfigIntRange range,
                                 int64_t* out) const {
    const nlohmann::json* value = find(key);
    if (value == nullptr) {
        *out = fallback;
        return Status::ok();
    }
    return int_from(*value, key, range, out);
}

Status ConfigObject::read_optional_int(std::string_view key, ConfigIntRange range,
                                       std::optional<int64_t>* out) const {
    out->reset();
    const nlohmann::json* value = find(key);
    if (value == nullptr) return Status::ok();
    int64_t v = 0;
    SIEVE_RETURN_IF_ERROR(int_from(*value, key, range, &v));
    *out = v;
    return Status::ok();
}

Status ConfigObject::read_real(std::string_view key, ConfigRealRange range, double* out) const {
    const nlohmann::json* value = find(key);
    if (value == nullptr) return missing(key);
    if (!value->is_number())
        return field_error(StatusCode::invalid_argument, key, "expected a number, got {}", config_describe_value(*value));
    double d = value->get<double>();
    if (!std::isfinite(d))
        return field_error(StatusCode::invalid_argument, key, "must be finite, got {}", d);
    bool below = range.min_exclusive ? !(d > range.min) : !(d >= range.min);
    if (below || d > range.max) {
        if (range.min == 0.0 && range.min_exclusive && std::isinf(range.max))
            return field_error(StatusCode::invalid_argument, key, "must be > 0, got {}", d);
        return field_error(StatusCode::invalid_argument, key, "must be in {}{}, {}], got {}",
                           range.min_exclusive ? "(" : "[", range.min, range.max, d);
    }
    *out = d;
    return Status::ok();
}

Status ConfigObject::read_real_or(std::string_view key, double fallback, ConfigRealRange range,
                                  double* out) const {
    if (!has(key)) {
        *out = fallback;
        return Status::ok();
    }
    return read_real(key, range, out);
}

Status ConfigObject::read_optional_real(std::string_view key, ConfigRealRange range,
                                        std::optional<double>* out) const {
    out->reset();
    if (!has(key)) return Status::ok();
    double d = 0.0;
    SIEVE_RETURN_IF_ERROR(read_real(key, range, &d));
    *out = d;
    return Status::ok();
}

Status ConfigObject::read_bool_or(std::string_view key, bool fallback, bool* out) const {
    const nlohmann::json* value = find(key);
    if (value == nullptr) {
        *out = fallback;
        return Status::ok();
    }
    if (!value->is_boolean())
        return field_error(StatusCode::invalid_argument, key, "expected true or false, got {}",
                           config_describe_value(*value));
    *out = value->get<bool>();
    return Status::ok();
}

Status ConfigObject::read_string(std::string_view key, std::string* out) const {
    const nlohmann::json* value = find(key);
    if (value == nullptr) return missing(key);
    if (!value->is_string())
        return field_error(StatusCode::invalid_argument, key, "expected a string, got {}", config_describe_value(*value));
    *out = value->get<std::string>();
    return Status::ok();
}

Status ConfigObject::read_optional_string(std::string_view key, std::optional<std::string>* out) const {
    out->reset();
    if (!has(key)) return Status::ok();
    std::string s;
    SIEVE_RETURN_IF_ERROR(read_string(key, &s));
    *out = std::move(s);
    return Status::ok();
}

Status ConfigObject::read_optional_object(std::string_view key, std::optional<ConfigObject>* out) const {
    out->reset();
    const nlohmann::json* value = find(key);
    if (value == nullptr) return Status::ok();
    if (!value->is_object())
        return field_error(StatusCode::invalid_argument, key, "expected an object, got {}", config_describe_value(*value));
    out->emplace(*value, source_, field_path(key));
    return Status::ok();
}

Status ConfigObject::read_optional_string_list(std::string_view key,
                                               std::optional<std::vector<std::string>>* out) const {
    out->reset();
    const nlohmann::json* value = find(key);
    if (value == nullptr) return Status::ok();
    if (!value->is_array())
        return field_error(StatusCode::invalid_argument, key, "expected a list of strings, got {}",
                           config_describe_value(*value));
    std::vector<std::string> list;
    list.reserve(value->size());
    for (size_t i = 0; i < value->size(); ++i) {
        const nlohmann::json& item = (*value)[i];
        if (!item.is_string())
            return field_error(StatusCode::invalid_argument, fmt::format("{}[{}]", key, i),
                               "expected a string, got {}", config_describe_value(item));
        list.push_back(item.get<std::string>());
    }
    *out = std::move(list);
    return Status::ok();
}

Status ConfigObject::read_optional_int_list(std::string_view key, ConfigIntRange range,
                                            std::optional<std::vector<int64_t>>* out) const {
    out->reset();
    const nlohmann::json* value = find(key);
    if (value == nullptr) return Status::ok();
    if (!value->is_array())
        return field_error(StatusCode::invalid_argument, key, "expected a list of integers, got {}",
                           config_describe_value(*value));
    std::vector<int64_t> list(value->size());
    for (size_t i = 0; i < value->size(); ++i)
        SIEVE_RETURN_IF_ERROR(int_from((*value)[i], fmt::format("{}[{}]", key, i), range, &list[i]));
    *out = std::move(list);
    return Status::ok();
}

}  // namespace sieve
