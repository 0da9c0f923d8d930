// allOf: combining subschemas into one schema where that is exact.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

namespace tsr::constraints {

// Keywords that never constrain an instance.
bool is_annotation_keyword(const std::string& key);

// `into` ∧ `from` as one schema (both objects, $refs already resolved at top level).
// Throws CompileError naming the keyword where the combination is not exact.
void merge_schema(nlohmann::ordered_json& into, const nlohmann::ordered_json& from,
                  const std::string& path);

}  // namespace tsr::constraints
