// A JSON Schema validator for single instances, used at compile time where a schema
// allows finitely many values (enum or const, possibly beside other keywords or inside
// allOf): the grammar is then exactly the listed values that pass every keyword, which
// makes keywords like `not` or `patternProperties` exact there.
#pragma once

#include <map>
#include <nlohmann/json.hpp>
#include <string>

#include "constraints/gbnf_match.h"

namespace tsr::constraints {

// JSON Schema equality: numbers by value (1 == 1.0), objects regardless of member order.
bool json_equal(const nlohmann::ordered_json& a, const nlohmann::ordered_json& b);

class SchemaValidator {
 public:
  explicit SchemaValidator(const nlohmann::ordered_json& root) : root_(root) {}

  // Whether `instance` satisfies `schema`. Throws CompileError (starting "unsupported")
  // for keywords it cannot decide, so that a caller never guesses.
  bool valid(const nlohmann::ordered_json& instance, const nlohmann::ordered_json& schema,
             const std::string& path);

 private:
  using Json = nlohmann::ordered_json;

  bool check(const std::string& key, const Json& v, const Json& inst, const Json& s, int depth);
  bool check_object(const std::string& key, const Json& v, const Json& inst, const Json& s, int depth);
  bool check_array(const std::string& key, const Json& v, const Json& inst, const Json& s, int depth);
  bool check_string(const std::string& key, const Json& v, const std::string& str);
  bool check_number(const std::string& key, const Json& v, const Json& inst, const Json& s);
  bool valid_at(const Json& inst, const Json& s, int depth);
  bool matches(const std::string& kind, const std::string& expr_source, const std::string& text);
  [[noreturn]] void unsupported(const std::string& what) const;

  const Json& root_;
  std::string path_;
  std::map<std::string, GbnfMatcher> matchers_;
};

}  // namespace tsr::constraints
