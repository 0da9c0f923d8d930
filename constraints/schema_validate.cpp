#include "constraints/schema_validate.h"

#include <cmath>
#include <set>

#include "constraints/codepoint_set.h"
#include "constraints/errors.h"
#include "constraints/internal/json_chars.h"
#include "constraints/internal/json_formats.h"
#include "constraints/internal/regex.h"

namespace tsr::constraints {
namespace {

using Json = nlohmann::ordered_json;

bool has_type(const Json& v, const std::string& t) {
  if (t == "integer") {
    return v.is_number_integer() || (v.is_number_float() && std::floor(v.get<double>()) == v.get<double>());
  }
  if (t == "number") return v.is_number();
  if (t == "string") return v.is_string();
  if (t == "boolean") return v.is_boolean();
  if (t == "null") return v.is_null();
  if (t == "array") return v.is_array();
  if (t == "object") return v.is_object();
  return false;
}

// Python compares ints and floats exactly; long double holds every int64 exactly.
long double number(const Json& v) {
  if (v.is_number_unsigned()) return static_cast<long double>(v.get<uint64_t>());
  if (v.is_number_integer()) return static_cast<long double>(v.get<int64_t>());
  return static_cast<long double>(v.get<double>());
}

size_t codepoints(const std::string& s) {
  size_t n = 0;
  for (size_t pos = 0; pos < s.size(); ++n) decode_utf8(s, pos);
  return n;
}

// Keywords that constrain instances but that this validator does not implement.
const std::set<std::string> kUndecidable = {"unevaluatedProperties", "unevaluatedItems",
                                            "$dynamicRef", "$recursiveRef"};

}  // namespace

bool json_equal(const Json& a, const Json& b) {
  if (a.is_number() && b.is_number()) return number(a) == number(b);
  if (a.type() != b.type()) return false;
  if (a.is_array()) {
    if (a.size() != b.size()) return false;
    for (size_t i = 0; i < a.size(); ++i) {
      if (!json_equal(a[i], b[i])) return false;
    }
    return true;
  }
  if (a.is_object()) {
    if (a.size() != b.size()) return false;
    for (const auto& [k, v] : a.items()) {
      if (!b.contains(k) || !json_equal(v, b[k])) return false;
    }
    return true;
  }
  return a == b;
}

void SchemaValidator::unsupported(const std::string& what) const {
  throw CompileError("unsupported JSON Schema " + what + " in a schema with enum/const at " +
                     (path_.empty() ? "/" : path_));
}

bool SchemaValidator::valid(const Json& instance, const Json& schema, const std::string& path) {
  path_ = path;
  return valid_at(instance, schema, 0);
}

bool SchemaValidator::valid_at(const Json& inst, const Json& s, int depth) {
  if (depth > 64) unsupported("nesting or $ref recursion deeper than 64");
  if (s.is_boolean()) return s.get<bool>();
  if (!s.is_object()) unsupported("schema that is not an object");
  for (const auto& [key, v] : s.items()) {
    if (kUndecidable.count(key)) unsupported("keyword '" + key + "'");
    if (!check(key, v, inst, s, depth)) return false;
  }
  return true;
}

bool SchemaValidator::check(const std::string& key, const Json& v, const Json& inst, const Json& s, int depth) {
  if (key == "$ref") {
    const std::string ref = v.get<std::string>();
    if (ref != "#" && !ref.starts_with("#/")) unsupported("$ref '" + ref + "'");
    try {
      return valid_at(inst, root_.at(Json::json_pointer(ref.substr(1))), depth + 1);
    } catch (const nlohmann::json::exception&) {
      throw CompileError("JSON Schema $ref '" + ref + "' does not resolve at " + path_);
    }
  }
  if (key == "type") {
    if (s.value("nullable", false) && inst.is_null()) return true;
    for (const Json& t : v.is_array() ? v : Json::array({v})) {
      if (has_type(inst, t.get<std::string>())) return true;
    }
    return false;
  }
  if (key == "enum") {
    for (const Json& e : v) {
      if (json_equal(inst, e)) return true;
    }
    return false;
  }
  if (key == "const") return json_equal(inst, v);
  if (key == "not") return !valid_at(inst, v, depth + 1);
  if (key == "allOf" || key == "anyOf" || key == "oneOf") {
    size_t n = 0;
    for (const Json& sub : v) n += valid_at(inst, sub, depth + 1);
    return key == "allOf" ? n == v.size() : key == "anyOf" ? n > 0 : n == 1;
  }
  if (key == "if") {
    const char* branch = valid_at(inst, v, depth + 1) ? "then" : "else";
    return !s.contains(branch) || valid_at(inst, s[branch], depth + 1);
  }
  if (inst.is_object()) return check_object(key, v, inst, s, depth);
  if (inst.is_array()) return check_array(key, v, inst, s, depth);
  if (inst.is_string()) return check_string(key, v, inst.get<std::string>());
  if (inst.is_number()) return check_number(key, v, inst, s);
  return true;
}

bool SchemaValidator::check_object(const std::string& key, const Json& v, const Json& inst, const Json& s, int depth) {
  auto pattern_matches = [&](const std::string& pattern, const std::string& name) {
    return matches("pattern", pattern, name);
  };
  if (key == "properties") {
    for (const auto& [name, sub] : v.items()) {
      if (inst.contains(name) && !valid_at(inst[name], sub, depth + 1)) return false;
    }
  } else if (key == "patternProperties") {
    for (const auto& [pattern, sub] : v.items()) {
      for (const auto& [name, value] : inst.items()) {
        if (pattern_matches(pattern, name) && !valid_at(value, sub, depth + 1)) return false;
      }
    }
  } else if (key == "additionalProperties") {
    const Json patterns = s.value("patternProperties", Json::object());
    for (const auto& [name, value] : inst.items()) {
      if (s.contains("properties") && s["properties"].contains(name)) continue;
      bool patterned = false;
      for (const auto& [pattern, sub] : patterns.items()) {
        patterned |= pattern_matches(pattern, name);
      }
      if (!patterned && !valid_at(value, v, depth + 1)) return false;
    }
  } else if (key == "required") {
    for (const Json& r : v) {
      if (!inst.contains(r.get<std::string>())) return false;
    }
  } else if (key == "minProperties") {
    return inst.size() >= v.get<size_t>();
  } else if (key == "maxProperties") {
    return inst.size() <= v.get<size_t>();
  } else if (key == "propertyNames") {
    for (const auto& [name, value] : inst.items()) {
      if (!valid_at(Json(name), v, depth + 1)) return false;
    }
  } else if (key == "dependencies" || key == "dependentRequired" || key == "dependentSchemas") {
    for (const auto& [name, dep] : v.items()) {
      if (!inst.contains(name)) continue;
      if (dep.is_array()) {
        for (const Json& r : dep) {
          if (!inst.contains(r.get<std::string>())) return false;
        }
      } else if (!valid_at(inst, dep, depth + 1)) {
        return false;
      }
    }
  }
  return true;
}

bool SchemaValidator::check_array(const std::string& key, const Json& v, const Json& inst, const Json& s, int depth) {
  // Items covered by a tuple (prefixItems, or draft-4 array-form items) come first.
  const Json* tuple = s.contains("prefixItems") ? &s["prefixItems"]
                      : (s.contains("items") && s["items"].is_array()) ? &s["items"] : nullptr;
  size_t prefix = tuple ? tuple->size() : 0;
  auto all_from = [&](size_t start, const Json& sub) {
    for (size_t i = start; i < inst.size(); ++i) {
      if (!valid_at(inst[i], sub, depth + 1)) return false;
    }
    return true;
  };
  if (key == "prefixItems" || (key == "items" && v.is_array())) {
    for (size_t i = 0; i < v.size() && i < inst.size(); ++i) {
      if (!valid_at(inst[i], v[i], depth + 1)) return false;
    }
  } else if (key == "items") {
    return all_from(prefix, v);
  } else if (key == "additionalItems") {
    return !s.contains("items") || !s["items"].is_array() || all_from(prefix, v);
  } else if (key == "minItems") {
    return inst.size() >= v.get<size_t>();
  } else if (key == "maxItems") {
    return inst.size() <= v.get<size_t>();
  } else if (key == "uniqueItems") {
    if (v != Json(true)) return true;
    for (size_t i = 0; i < inst.size(); ++i) {
      for (size_t j = i + 1; j < inst.size(); ++j) {
        if (json_equal(inst[i], inst[j])) return false;
      }
    }
  } else if (key == "contains") {
    size_t n = 0;
    for (const Json& item : inst) n += valid_at(item, v, depth + 1);
    return n >= s.value("minContains", size_t{1}) && (!s.contains("maxContains") || n <= s["maxContains"].get<size_t>());
  }
  return true;
}

bool SchemaValidator::check_string(const std::string& key, const Json& v, const std::string& str) {
  if (key == "minLength") return codepoints(str) >= v.get<size_t>();
  if (key == "maxLength") return codepoints(str) <= v.get<size_t>();
  if (key == "pattern") return matches("pattern", v.get<std::string>(), str);
  if (key == "format") {
    try {
      if (!format_gbnf(v.get<std::string>())) return true;  // an annotation
    } catch (const CompileError&) {
      unsupported("format '" + v.get<std::string>() + "'");
    }
    return matches("format", v.get<std::string>(), str);
  }
  return true;
}

bool SchemaValidator::check_number(const std::string& key, const Json& v, const Json& inst, const Json& s) {
  const long double x = number(inst);
  if ((key == "minimum" || key == "maximum") && v.is_number()) {
    const long double b = number(v);
    const bool lower = key == "minimum";
    const bool strict = s.value(lower ? "exclusiveMinimum" : "exclusiveMaximum", Json(false)) == Json(true);
    if (lower) return strict ? x > b : x >= b;
    return strict ? x < b : x <= b;
  }
  if (key == "exclusiveMinimum" && v.is_number()) return x > number(v);
  if (key == "exclusiveMaximum" && v.is_number()) return x < number(v);
  if (key == "multipleOf") {
    // As Python's jsonschema: a float divisor divides when the quotient is integral;
    // an integer one by the remainder.
    if (v.is_number_float()) {
      const double q = inst.get<double>() / v.get<double>();
      return std::isfinite(q) && std::trunc(q) == q;
    }
    if (inst.is_number_float()) return std::fmod(inst.get<double>(), v.get<double>()) == 0;
    return number(inst) == 0 || std::fmod(number(inst), number(v)) == 0;
  }
  return true;
}

// `kind` "pattern": ECMAScript search over the string; "format": the format's grammar.
// Both see the string JSON-encoded, exactly as the generated grammar does.
bool SchemaValidator::matches(const std::string& kind, const std::string& source, const std::string& text) {
  const std::string key = kind + ":" + source;
  auto it = matchers_.find(key);
  if (it == matchers_.end()) {
    std::string expr = kind == "pattern" ? regex_to_gbnf(source, RegexMode::json_string_search)
                                         : *format_gbnf(source);
    it = matchers_.emplace(key, GbnfMatcher(expr)).first;
  }
  return it->second.matches(json_escape(text));
}

}  // namespace tsr::constraints
