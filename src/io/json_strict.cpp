#include "io/json_strict.h"

#include <exception>
#include <new>
#include <set>
#include <string>
#include <vector>

namespace sieve {
namespace {

using json = nlohmann::json;

// A SAX consumer that only checks: syntax errors (with their position) and duplicate keys.
// One set of keys per open object; arrays need no state.
class StrictChecker {
public:
    bool null() { return true; }
    bool boolean(bool) { return true; }
    bool number_integer(json::number_integer_t) { return true; }
    bool number_unsigned(json::number_unsigned_t) { return true; }
    bool number_float(json::number_float_t, const json::string_t&) { return true; }
    bool string(json::string_t&) { return true; }
    bool binary(json::binary_t&) { return true; }
    bool start_object(std::size_t) {
        keys_.emplace_back();
        return true;
    }
    bool key(json::string_t& k) {
        if (keys_.size() == 1) top_key_ = k;
        if (!keys_.back().insert(k).second) {
            if (keys_.size() == 1)
                error_ = "duplicate key '" + k + "' at the top level";
            else
                error_ = "duplicate key '" + k + "' inside the value of top-level key '" + top_key_ + "'";
            return false;
        }
        return true;
    }
    bool end_object() {
        keys_.pop_back();
        return true;
    }
    bool start_array(std::size_t) { return true; }
    bool end_array() { return true; }
    bool parse_error(std::size_t, const std::string&, const json::exception& ex) {
        error_ = ex.what();
        return false;
    }

    const std::string& error() const { return error_; }

private:
    std::vector<std::set<std::string>> keys_;
    std::string top_key_;
    std::string error_;
};

}  // namespace

Status json_parse_strict(std::string_view text, std::string_view label, nlohmann::json& out) {
    try {
        StrictChecker checker;
        const char* first = text.data();
        const char* last = text.data() + text.size();
        if (!json::sax_parse(first, last, &checker, json::input_format_t::json, /*strict=*/true,
                             /*ignore_comments=*/false)) {
            return corrupt_error("{}: invalid JSON: {}", label,
                                 checker.error().empty() ? std::string("parse failed") : checker.error());
        }
        out = json::parse(first, last, /*cb=*/nullptr, /*allow_exceptions=*/false, /*ignore_comments=*/false);
        if (out.is_discarded()) return corrupt_error("{}: invalid JSON", label);
        return Status::ok();
    } catch (const std::bad_alloc&) {
        return out_of_memory_error("{}: out of memory while parsing {} bytes of JSON", label, text.size());
    } catch (const std::exception& e) {  // not expected with the non-throwing API; never escapes
        return corrupt_error("{}: invalid JSON: {}", label, e.what());
    }
}

const char* json_type_name(const nlohmann::json& value) { return value.type_name(); }

}  // namespace sieve
