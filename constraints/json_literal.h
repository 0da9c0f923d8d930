// JSON values written exactly as Python's json.dumps(value, ensure_ascii=False) does
// (", " and ": " separators, key order kept), for enum and const grammars.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

namespace tsr::constraints {

std::string python_json_dumps(const nlohmann::ordered_json& value);

}  // namespace tsr::constraints
