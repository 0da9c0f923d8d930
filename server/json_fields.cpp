#include "server/json_fields.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <cmath>
#include <mutex>
#include <set>

#include "server/api_error.h"

namespace tsr::server {

const nlohmann::json* field(const nlohmann::json& object, const std::string& key) {
  if (!object.is_object()) throw ApiError(400, "the request body must be a JSON object", "invalid_request_error");
  const auto it = object.find(key);
  return it == object.end() || it->is_null() ? nullptr : &*it;
}

std::optional<bool> get_bool(const nlohmann::json& object, const std::string& key) {
  const nlohmann::json* v = field(object, key);
  if (!v) return std::nullopt;
  if (!v->is_boolean()) throw bad_param(key, "'" + key + "' must be a boolean");
  return v->get<bool>();
}

std::optional<std::string> get_string(const nlohmann::json& object, const std::string& key) {
  const nlohmann::json* v = field(object, key);
  if (!v) return std::nullopt;
  if (!v->is_string()) throw bad_param(key, "'" + key + "' must be a string");
  return v->get<std::string>();
}

int64_t as_int(const nlohmann::json& value, const std::string& param, int64_t lo, int64_t hi) {
  const bool integral_float = value.is_number_float() && std::isfinite(value.get<double>()) &&
                              std::floor(value.get<double>()) == value.get<double>() &&
                              std::fabs(value.get<double>()) < 9e15;
  if (!value.is_number_integer() && !integral_float) throw bad_param(param, "'" + param + "' must be an integer");
  if (value.is_number_unsigned() && value.get<uint64_t>() > uint64_t(INT64_MAX)) {
    throw bad_param(param, "'" + param + "' is out of range");
  }
  const int64_t x = integral_float ? static_cast<int64_t>(value.get<double>()) : value.get<int64_t>();
  if (x < lo || x > hi) {
    throw bad_param(param, "'" + param + "' must be between " + std::to_string(lo) + " and " + std::to_string(hi) +
                               ", got " + std::to_string(x));
  }
  return x;
}

double as_number(const nlohmann::json& value, const std::string& param, double lo, double hi) {
  if (!value.is_number()) throw bad_param(param, "'" + param + "' must be a number");
  const double x = value.get<double>();
  if (!(x >= lo && x <= hi)) {
    throw bad_param(param, "'" + param + "' must be between " + nlohmann::json(lo).dump() + " and " +
                               nlohmann::json(hi).dump() + ", got " + value.dump());
  }
  return x;
}

std::optional<int64_t> get_int(const nlohmann::json& object, const std::string& key, int64_t lo, int64_t hi) {
  const nlohmann::json* v = field(object, key);
  return v ? std::optional(as_int(*v, key, lo, hi)) : std::nullopt;
}

std::optional<double> get_number(const nlohmann::json& object, const std::string& key, double lo, double hi) {
  const nlohmann::json* v = field(object, key);
  return v ? std::optional(as_number(*v, key, lo, hi)) : std::nullopt;
}

void log_unknown_fields(const nlohmann::json& body, std::initializer_list<std::string_view> known,
                        std::string_view endpoint) {
  constexpr size_t kMaxLogged = 1024;
  static std::mutex mutex;
  static std::set<std::string, std::less<>> logged;
  for (const auto& [key, value] : body.items()) {
    if (std::find(known.begin(), known.end(), key) != known.end()) continue;
    std::lock_guard lock(mutex);
    if (logged.size() >= kMaxLogged || !logged.insert(key.substr(0, 64)).second) continue;
    // dump() escapes control characters, so a field name cannot forge log lines.
    spdlog::debug("{}: ignoring the unknown field {} (logged once)", endpoint, nlohmann::json(key.substr(0, 64)).dump());
  }
}

}  // namespace tsr::server
