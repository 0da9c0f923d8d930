#include "constraints/json_literal.h"

#include "constraints/internal/json_chars.h"

namespace tsr::constraints {

std::string python_json_dumps(const nlohmann::ordered_json& value) {
  switch (value.type()) {
    case nlohmann::ordered_json::value_t::string:
      return "\"" + json_escape(value.get<std::string>()) + "\"";
    case nlohmann::ordered_json::value_t::array: {
      std::string out = "[";
      for (size_t i = 0; i < value.size(); ++i) out += (i ? ", " : "") + python_json_dumps(value[i]);
      return out + "]";
    }
    case nlohmann::ordered_json::value_t::object: {
      std::string out = "{";
      bool first = true;
      for (const auto& [k, v] : value.items()) {
        out += (first ? "\"" : ", \"") + json_escape(k) + "\": " + python_json_dumps(v);
        first = false;
      }
      return out + "}";
    }
    default:
      return value.dump();
  }
}

}  // namespace tsr::constraints
