// config: see config.h. This file parses the JSON, dispatches on model_type and loads files; the
// per-family rules live in config_deepseek_v4.cpp, config_dsa_mla.cpp and config_qsa.cpp.
#include "sieve/io/config.h"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <new>
#include <optional>
#include <string>
#include <system_error>

#include <nlohmann/json.hpp>

#include "io/config_json.h"
#include "io/config_parsers.h"

namespace sieve {

namespace {

// Far above any real config.json (a few KB); anything larger is not one.
constexpr std::uintmax_t kMaxConfigBytes = 16u << 20;

template <typename Family>
Expected<ModelConfig> wrap(std::string model_type, Expected<Family> family) {
    if (!family) return family.status();
    ModelConfig config;
    config.model_type = std::move(model_type);
    config.family = std::move(family).value();
    return config;
}

// nlohmann's message without its "[json.exception.parse_error.101] " tag and its "parse error at
// line 1, column 5: " prefix, whose position we report ourselves.
std::string parse_error_detail(const char* what) {
    std::string text(what);
    if (text.rfind("[json.exception", 0) == 0) {
        size_t tag_end = text.find("] ");
        if (tag_end != std::string::npos) text = text.substr(tag_end + 2);
    }
    if (text.rfind("parse error", 0) == 0) {
        size_t colon = text.find(": ");
        if (colon != std::string::npos) text = text.substr(colon + 2);
    }
    return text;
}

Status malformed_json(const std::string& source, std::string_view text, const nlohmann::json::parse_error& e) {
    // e.byte counts from 1 and may point one past the end (unexpected end of input).
    size_t byte = std::min<size_t>(e.byte, text.size() + 1);
    size_t line = 1;
    size_t column = 1;
    for (size_t i = 0; i + 1 < byte; ++i) {
        if (text[i] == '\n') {
            ++line;
            column = 1;
        } else {
            ++column;
        }
    }
    return corrupt_error("{}: malformed JSON at line {}, column {} (byte {}): {}", source, line, column, byte,
                         parse_error_detail(e.what()));
}

Expected<ModelConfig> parse_qwen4_exp(const ConfigObject& top, const std::string& model_type) {
    std::optional<ConfigObject> text_config;
    SIEVE_RETURN_IF_ERROR(top.read_optional_object("text_config", &text_config));
    if (!text_config) return wrap(model_type, parse_qsa_config(top));  // a flat (text-only) qwen4_exp config
    std::optional<std::string> text_type;
    SIEVE_RETURN_IF_ERROR(text_config->read_optional_string("model_type", &text_type));
    if (text_type && *text_type != "qwen4_exp_text")
        return text_config->field_error(StatusCode::invalid_argument, "model_type",
                                        "\"{}\", expected \"qwen4_exp_text\" inside a qwen4_exp config", *text_type);
    Expected<QsaConfig> qsa = parse_qsa_config(*text_config);
    if (qsa) qsa->from_text_config = true;
    return wrap(model_type, std::move(qsa));
}

Expected<ModelConfig> parse_root(const nlohmann::json& root, const std::string& source) {
    if (!root.is_object())
        return invalid_argument_error("{}: the top level is {}, expected a JSON object", source,
                                      config_describe_value(root));
    ConfigObject top(root, source, "");
    if (!top.has("model_type"))
        return top.field_error(StatusCode::not_found, "model_type", "required, but absent or null; supported: {}",
                               config_supported_model_types());
    std::string model_type;
    SIEVE_RETURN_IF_ERROR(top.read_string("model_type", &model_type));
    if (model_type == "deepseek_v4") return wrap(model_type, parse_deepseek_v4_config(top));
    if (model_type == "deepseek_v32") return wrap(model_type, parse_dsa_mla_config(top, DsaMlaModel::deepseek_v32));
    if (model_type == "hy_v4") return wrap(model_type, parse_dsa_mla_config(top, DsaMlaModel::hy_v4));
    if (model_type == "qwen4_exp") return parse_qwen4_exp(top, model_type);
    if (model_type == "qwen4_exp_text") return wrap(model_type, parse_qsa_config(top));
    return top.field_error(StatusCode::unsupported, "model_type", "\"{}\" is not supported; supported: {}", model_type,
                           config_supported_model_types());
}

}  // namespace

const char* config_supported_model_types() { return "deepseek_v4, deepseek_v32, hy_v4, qwen4_exp, qwen4_exp_text"; }

Expected<ModelConfig> parse_model_config(std::string_view json_text, std::string_view source_name) {
    std::string source(source_name);
    // The boundary: nothing thrown below (parse errors, allocation failures) escapes.
    try {
        nlohmann::json root;
        try {
            root = nlohmann::json::parse(json_text.begin(), json_text.end());
        } catch (const nlohmann::json::parse_error& e) {
            return malformed_json(source, json_text, e);
        } catch (const nlohmann::json::out_of_range& e) {
            // A number literal beyond double's range (1e999): nlohmann reports no position.
            return corrupt_error("{}: malformed JSON: {}", source, parse_error_detail(e.what()));
        }
        return parse_root(root, source);
    } catch (const std::bad_alloc&) {
        return out_of_memory_error("{}: out of memory while parsing", source);
    } catch (const std::exception& e) {
        return internal_error("{}: unexpected exception while parsing: {}", source, e.what());
    }
}

Expected<ModelConfig> load_model_config(const std::filesystem::path& config_json_or_dir) {
    std::filesystem::path path = config_json_or_dir;
    std::error_code ec;
    if (std::filesystem::is_directory(path, ec)) path /= "config.json";
    if (!std::filesystem::exists(path, ec))
        return not_found_error("{}: no such file", path.string());
    std::uintmax_t size = std::filesystem::file_size(path, ec);
    if (ec) return io_error("{}: cannot read its size: {}", path.string(), ec.message());
    if (size > kMaxConfigBytes)
        return invalid_argument_error("{}: {} bytes, larger than any config.json ({} bytes at most)", path.string(),
                                      size, kMaxConfigBytes);
    std::ifstream file(path, std::ios::binary);
    if (!file) return io_error("{}: cannot open: {}", path.string(), std::strerror(errno));
    std::string text(static_cast<size_t>(size), '\0');
    file.read(text.data(), static_cast<std::streamsize>(size));
    if (file.gcount() != static_cast<std::streamsize>(size))
        return io_error("{}: read {} of {} bytes", path.string(), file.gcount(), size);
    return parse_model_config(text, path.string());
}

}  // namespace sieve
