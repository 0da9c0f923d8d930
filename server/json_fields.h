// Typed access to request-body fields. A field that is absent or null is "not given"
// (OpenAI accepts null for every optional field); a field of the wrong type or out of
// range is a 400 ApiError that names it.
#pragma once

#include <nlohmann/json.hpp>

#include <cstdint>
#include <initializer_list>
#include <optional>
#include <string>
#include <string_view>

namespace tsr::server {

// The field, or nullptr when absent or null. Throws when `object` is not an object.
const nlohmann::json* field(const nlohmann::json& object, const std::string& key);

std::optional<bool> get_bool(const nlohmann::json& object, const std::string& key);
std::optional<std::string> get_string(const nlohmann::json& object, const std::string& key);
// Integers may be written as integral numbers (16.0), as JSON serializers sometimes do.
std::optional<int64_t> get_int(const nlohmann::json& object, const std::string& key, int64_t lo, int64_t hi);
std::optional<double> get_number(const nlohmann::json& object, const std::string& key, double lo, double hi);

// The same checks for a value already at hand; `param` names it in errors.
int64_t as_int(const nlohmann::json& value, const std::string& param, int64_t lo, int64_t hi);
double as_number(const nlohmann::json& value, const std::string& param, double lo, double hi);

// Fields outside `known` are accepted, as OpenAI's servers accept them, and each name is
// logged once per process at debug level (the first 1,024 names: a client sending endless
// new ones grows nothing).
void log_unknown_fields(const nlohmann::json& body, std::initializer_list<std::string_view> known,
                        std::string_view endpoint);

}  // namespace tsr::server
