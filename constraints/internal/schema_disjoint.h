// oneOf needs exactly one branch to match. A grammar can only say "some branch matches",
// so oneOf is compiled as anyOf only when no instance can satisfy two branches; this
// decides that conservatively (false when unsure).
#pragma once

#include <functional>
#include <nlohmann/json.hpp>

namespace tsr::constraints {

using SchemaResolver = std::function<nlohmann::ordered_json(const nlohmann::ordered_json&)>;

// True when no JSON value satisfies both schemas: their types, const/enum values, or (for
// object-only schemas) a property required by both with disjoint schemas, or required by
// one and excluded by the other's additionalProperties: false. `resolve` replaces a
// top-level $ref by its target.
bool provably_disjoint(const nlohmann::ordered_json& a, const nlohmann::ordered_json& b,
                       const SchemaResolver& resolve);

}  // namespace tsr::constraints
