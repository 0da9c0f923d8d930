#include "constraints/internal/json_schema.h"

#include <cmath>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <vector>

#include "constraints/compile_budget.h"
#include "base/json_depth.h"
#include "constraints/errors.h"
#include "constraints/internal/gbnf.h"
#include "constraints/internal/integer_range.h"
#include "constraints/internal/json_chars.h"
#include "constraints/internal/json_formats.h"
#include "constraints/json_literal.h"
#include "constraints/internal/number_range.h"
#include "constraints/internal/regex.h"
#include "constraints/internal/schema_disjoint.h"
#include "constraints/internal/schema_merge.h"
#include "constraints/schema_validate.h"

namespace tsr::constraints {
namespace {

using Json = nlohmann::ordered_json;

// Whitespace as llama.cpp's json-schema-to-grammar allows it: one space, or a newline and
// an indent. Any JSON layout a serializer writes (compact, Python's, pretty-printed up to
// 20 columns of indent) fits; a model cannot pad the output with runs of blank lines.
// Exponents stop at 308, the double range (Python's repr never writes more), so that
// parsers of the output do not overflow on "1e44021685".
// json-char: see json_chars.h.
const char* const kBaseRules = R"(
ws ::= ( " " | "\n" [ \t]{0,20} )?
json-char ::= )" TSR_JSON_CHAR_GBNF R"(
string-tail ::= json-char* "\""
string ::= "\"" string-tail
integer ::= "-"? ( "0" | [1-9] [0-9]* )
number ::= "-"? ( "0" | [1-9] [0-9]* ) ( "." [0-9]+ )? ( [eE] [-+]? exponent )?
exponent ::= "0"* ( [0-9] [0-9]? | [1-2] [0-9] [0-9] | "30" [0-8] )
boolean ::= "true" | "false"
null ::= "null"
value ::= object | array | string | number | boolean | null
object ::= "{" ws ( string ws ":" ws value ws ( "," ws string ws ":" ws value ws )* )? "}"
array ::= "[" ws ( value ws ( "," ws value ws )* )? "]"
)";

const std::vector<std::string> kAllTypes = {"object", "array", "string", "number", "boolean", "null"};

// Validation keywords this compiler does not implement: their presence is an error.
const std::set<std::string> kUnsupported = {
    "patternProperties", "dependencies", "dependentRequired", "dependentSchemas",
    "propertyNames", "minProperties", "maxProperties", "contains", "minContains",
    "maxContains", "if", "not", "multipleOf", "unevaluatedProperties", "unevaluatedItems",
    "$dynamicRef", "$recursiveRef"};

// A subschema no value satisfies (e.g. `"type": "object"` with string enum values): a
// property with it may not appear, an anyOf branch with it drops out.
struct Unsatisfiable {
  std::string path;
};

std::string pointer_escape(const std::string& key) {
  std::string out;
  for (char c : key) out += c == '~' ? "~0" : c == '/' ? "~1" : std::string(1, c);
  return out;
}

// What each keyword's value must be (JSON Schema 2020-12, with draft 4's boolean
// exclusiveMinimum/Maximum and array `items`). A keyword of another type is a malformed
// schema: ignoring it would let through values the author meant to exclude.
enum class KeywordType { schema_array, array, object, string, string_or_array, number, number_or_bool, count, schema, schema_or_array };

const std::map<std::string, KeywordType, std::less<>>& keyword_types() {
  using K = KeywordType;
  static const std::map<std::string, KeywordType, std::less<>> types = {
      {"allOf", K::schema_array}, {"anyOf", K::schema_array}, {"oneOf", K::schema_array},
      {"enum", K::array}, {"required", K::array}, {"prefixItems", K::array},
      {"properties", K::object}, {"patternProperties", K::object}, {"$defs", K::object}, {"definitions", K::object},
      {"dependentRequired", K::object}, {"dependentSchemas", K::object},
      {"$ref", K::string}, {"pattern", K::string}, {"format", K::string}, {"type", K::string_or_array},
      {"minimum", K::number}, {"maximum", K::number}, {"multipleOf", K::number},
      {"exclusiveMinimum", K::number_or_bool}, {"exclusiveMaximum", K::number_or_bool},
      {"minLength", K::count}, {"maxLength", K::count}, {"minItems", K::count}, {"maxItems", K::count},
      {"minProperties", K::count}, {"maxProperties", K::count}, {"minContains", K::count}, {"maxContains", K::count},
      {"not", K::schema}, {"additionalProperties", K::schema}, {"additionalItems", K::schema},
      {"unevaluatedProperties", K::schema}, {"unevaluatedItems", K::schema}, {"contains", K::schema},
      {"propertyNames", K::schema}, {"if", K::schema}, {"then", K::schema}, {"else", K::schema},
      {"items", K::schema_or_array},
  };
  return types;
}

bool has_type(const Json& v, KeywordType t) {
  using K = KeywordType;
  const bool schema = v.is_object() || v.is_boolean();
  switch (t) {
    case K::schema_array: return v.is_array() && !v.empty();
    case K::array: return v.is_array();
    case K::object: return v.is_object();
    case K::string: return v.is_string();
    case K::string_or_array: return v.is_string() || v.is_array();
    case K::number: return v.is_number();
    case K::number_or_bool: return v.is_number() || v.is_boolean();
    case K::count: return v.is_number() && v.get<double>() >= 0 && v.get<double>() == std::floor(v.get<double>());
    case K::schema: return schema;
    case K::schema_or_array: return schema || v.is_array();
  }
  return false;
}

const char* type_wanted(KeywordType t) {
  using K = KeywordType;
  switch (t) {
    case K::schema_array: return "a non-empty array of schemas";
    case K::array: return "an array";
    case K::object: return "an object";
    case K::string: return "a string";
    case K::string_or_array: return "a string or an array";
    case K::number: return "a number";
    case K::number_or_bool: return "a number";
    case K::count: return "a non-negative integer";
    case K::schema: return "a schema (an object or a boolean)";
    case K::schema_or_array: return "a schema or an array of schemas";
  }
  return "";
}

void check_keyword_types(const Json& s, const std::string& path) {
  for (const auto& [key, v] : s.items()) {
    const auto it = keyword_types().find(key);
    if (it != keyword_types().end() && !has_type(v, it->second)) {
      throw CompileError("invalid JSON Schema: '" + key + "' must be " + type_wanted(it->second) + " at " +
                         (path.empty() ? "/" : path));
    }
  }
}

class SchemaCompiler {
 public:
  explicit SchemaCompiler(const Json& root) : root_(root), validator_(root) {}

  std::string compile() {
    std::string root_expr;
    try {
      root_expr = visit(root_, "");
    } catch (const Unsatisfiable& u) {
      unsupported("schema that no value satisfies", u.path);
    }
    std::string out = "root ::= ws " + root_expr + " ws\n" + kBaseRules;
    for (const auto& [name, body] : rules_) out += name + " ::= " + body + "\n";
    return out;
  }

 private:
  [[noreturn]] static void unsupported(const std::string& what, const std::string& path) {
    throw CompileError("unsupported JSON Schema " + what + " at " + (path.empty() ? "/" : path));
  }

  std::string new_rule(const std::string& body) {
    std::string name = "r" + std::to_string(rules_.size());
    rules_.emplace_back(name, body);
    return name;
  }
  std::string reserve_rule() { return new_rule(""); }
  void set_rule(const std::string& name, const std::string& body) {
    rules_[std::stoul(name.substr(1))].second = body;
  }

  std::string visit(const Json& s, const std::string& path) {
    struct DepthGuard {
      int& d;
      explicit DepthGuard(int& depth) : d(++depth) {}
      ~DepthGuard() { --d; }
    } guard(depth_);
    if (depth_ > 256) unsupported("nesting deeper than 256 subschemas", path);
    if (s.is_boolean()) {
      if (s.get<bool>()) return "value";
      unsupported("schema 'false'", path);
    }
    if (!s.is_object()) unsupported("schema that is not an object", path);
    check_keyword_types(s, path);
    if (std::optional<Json> values = candidate_values(s, path)) return visit_values(s, *values, path);
    for (const auto& [key, v] : s.items()) {
      if (kUnsupported.count(key)) unsupported("keyword '" + key + "'", path);
      if (key == "uniqueItems" && v == Json(true)) unsupported("keyword 'uniqueItems'", path);
    }
    if (s.contains("$ref")) return visit_ref(s, path);
    if (s.contains("allOf")) return visit_all_of(s, path);
    if (s.contains("anyOf") || s.contains("oneOf")) return visit_any_of(s, path);
    return visit_types(s, path);
  }

  // The schema at a "#/..." pointer of this document.
  const Json& resolve(const std::string& ref, const std::string& path) {
    if (ref != "#" && !ref.starts_with("#/")) unsupported("$ref '" + ref + "'", path);
    try {
      return root_.at(Json::json_pointer(ref.substr(1)));
    } catch (const std::exception&) {
      throw CompileError("JSON Schema $ref '" + ref + "' does not resolve at " + path);
    }
  }

  static bool only_annotations(const Json& s, const std::set<std::string>& except) {
    for (const auto& [key, v] : s.items()) {
      if (!except.count(key) && !is_annotation_keyword(key)) return false;
    }
    return true;
  }

  std::string visit_ref(const Json& s, const std::string& path) {
    const std::string ref = s["$ref"].get<std::string>();
    if (!only_annotations(s, {"$ref"})) {
      // Siblings of $ref constrain too (2019-09 on); as an allOf they merge exactly or fail.
      Json rest = s;
      rest.erase("$ref");
      return visit(Json{{"allOf", Json::array({Json{{"$ref", ref}}, rest})}}, path);
    }
    auto it = refs_.find(ref);
    if (it != refs_.end()) return it->second;
    std::string name = reserve_rule();
    refs_[ref] = name;  // before visiting, so recursive references find it
    set_rule(name, visit_or_nothing(name, resolve(ref, path), ref.substr(1)));
    return name;
  }

  // For memoized rules: an unsatisfiable body becomes the empty language ([]) before the
  // error propagates, so other references to the rule match nothing rather than "".
  std::string visit_or_nothing(const std::string& name, const Json& s, const std::string& path) {
    try {
      return visit(s, path);
    } catch (const Unsatisfiable&) {
      set_rule(name, "[]");
      throw;
    }
  }

  // A subschema with its top-level plain $refs replaced by their targets.
  Json dereferenced(Json s, const std::string& path) {
    for (int depth = 0; s.is_object() && s.contains("$ref"); ++depth) {
      if (depth > 32) unsupported("$ref chain", path);
      Json target = resolve(s["$ref"].get<std::string>(), path);
      s.erase("$ref");
      if (!target.is_object()) return target;
      merge_schema(target, s, path);
      s = std::move(target);
    }
    return s;
  }

  std::string visit_all_of(const Json& s, const std::string& path) {
    Json merged = s;
    merged.erase("allOf");
    merged = dereferenced(std::move(merged), path);
    const Json& parts = s["allOf"];
    for (size_t i = 0; i < parts.size(); ++i) {
      Json part = dereferenced(parts[i], path + "/allOf/" + std::to_string(i));
      if (part == Json(true)) continue;
      if (!part.is_object()) unsupported("allOf member", path);
      if (part.contains("allOf")) {
        Json nested = part["allOf"];
        part.erase("allOf");
        for (const Json& n : nested) merge_schema(merged, dereferenced(n, path), path);
      }
      merge_schema(merged, part, path + "/allOf/" + std::to_string(i));
    }
    // Merged schemas are memoized like $refs: an allOf reaching itself through a $ref
    // becomes a recursive rule instead of an endless expansion.
    std::string key = merged.dump();
    auto it = merged_.find(key);
    if (it != merged_.end()) return it->second;
    std::string name = reserve_rule();
    merged_[key] = name;
    set_rule(name, visit_or_nothing(name, merged, path));
    return name;
  }

  std::string visit_any_of(const Json& s, const std::string& path) {
    const char* key = s.contains("anyOf") ? "anyOf" : "oneOf";
    Json siblings = s;
    siblings.erase(key);
    bool plain = only_annotations(siblings, {});
    if (std::string(key) == "oneOf") check_one_of(s["oneOf"], siblings, plain, path);
    std::string out;
    for (size_t i = 0; i < s[key].size(); ++i) {
      std::string sub = path + "/" + key + "/" + std::to_string(i);
      const Json& branch = s[key][i];
      std::string expr;
      try {
        expr = plain ? visit(branch, sub) : visit_with_siblings(branch, siblings, sub);
      } catch (const Unsatisfiable&) {
        continue;
      }
      if (expr.empty()) continue;
      out += (out.empty() ? "" : " | ") + expr;
    }
    if (out.empty()) throw Unsatisfiable{path};
    return new_rule(out);
  }

  // An anyOf branch combined with the keywords beside the anyOf; "" for a false branch.
  std::string visit_with_siblings(const Json& branch, const Json& siblings, const std::string& path) {
    Json merged = siblings;
    Json b = dereferenced(branch, path);
    if (b.is_boolean()) {
      if (!b.get<bool>()) return "";
    } else {
      merge_schema(merged, b, path);
    }
    return visit(merged, path);
  }

  // oneOf compiles as anyOf, which is exact only when no value satisfies two branches.
  void check_one_of(const Json& branches, const Json& siblings, bool plain, const std::string& path) {
    auto resolve = [&](const Json& b) {
      Json r = dereferenced(b, path);
      if (!plain && r.is_object()) {
        Json merged = siblings;
        merge_schema(merged, r, path);
        r = std::move(merged);
      }
      return r;
    };
    for (size_t i = 0; i < branches.size(); ++i) {
      for (size_t j = i + 1; j < branches.size(); ++j) {
        if (!provably_disjoint(branches[i], branches[j], resolve)) {
          unsupported("oneOf with branches " + std::to_string(i) + " and " + std::to_string(j) +
                          " that may both match", path);
        }
      }
    }
  }

  static std::vector<std::string> types_of(const Json& s) {
    std::vector<std::string> types;
    if (s.contains("type")) {
      const Json& t = s["type"];
      for (const Json& x : t.is_array() ? t : Json::array({t})) types.push_back(x.get<std::string>());
    } else {
      types = kAllTypes;
      types.push_back("integer");
    }
    if (s.value("nullable", false)) types.push_back("null");
    return types;
  }

  // The values a schema with const or enum (beside it or in an allOf member) may take,
  // before the other keywords filter them; nothing for schemas without such a list.
  std::optional<Json> candidate_values(const Json& s, const std::string& path) {
    if (s.contains("const")) return Json::array({s["const"]});
    if (s.contains("enum") && s["enum"].is_array()) return s["enum"];
    if (!s.contains("allOf") || !s["allOf"].is_array()) return std::nullopt;
    for (size_t i = 0; i < s["allOf"].size(); ++i) {
      Json part = dereferenced(s["allOf"][i], path + "/allOf/" + std::to_string(i));
      if (part.is_object() && (part.contains("const") || part.contains("enum"))) {
        return candidate_values(part, path);
      }
    }
    return std::nullopt;
  }

  // Finitely many values: exactly those that satisfy the whole schema, as literals. Values
  // taken from the schema's own enum are in it: checking each against the enum again took
  // time quadratic in its length (42 s for 100,000 items).
  std::string visit_values(const Json& s, const Json& values, const std::string& path) {
    const Json* schema = &s;
    Json rest;
    if (!s.contains("const") && s.contains("enum")) {
      rest = s;
      rest.erase("enum");
      schema = &rest;
    }
    std::string out;
    for (const Json& v : values) {
      CompileBudget::charge(values.size());  // a check may compare v with every listed value
      if (validator_.valid(v, *schema, path)) out += (out.empty() ? "" : " | ") + gbnf_literal(python_json_dumps(v));
    }
    if (out.empty()) throw Unsatisfiable{path};
    return "( " + out + " )";
  }

  // Keywords that constrain some type: without them and without `type`, any value.
  static bool has_type_keywords(const Json& s) {
    static const std::set<std::string> keys = {
        "properties", "required", "additionalProperties", "items", "prefixItems",
        "additionalItems", "minItems", "maxItems", "minLength", "maxLength", "pattern",
        "format", "minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "nullable"};
    for (const auto& [key, v] : s.items()) {
      if (keys.count(key)) return true;
    }
    return false;
  }

  std::string visit_types(const Json& s, const std::string& path) {
    if (!s.contains("type") && !has_type_keywords(s)) return "value";
    std::vector<std::string> types = types_of(s);
    bool any_number = std::find(types.begin(), types.end(), "number") != types.end();
    std::set<std::string> seen;
    std::string out;
    for (const std::string& t : types) {
      if ((t == "integer" && any_number) || !seen.insert(t).second) continue;
      out += (out.empty() ? "" : " | ") + visit_type(t, s, path);
    }
    if (out.empty()) unsupported("empty type list", path);
    return seen.size() == 1 ? out : "( " + out + " )";
  }

  std::string visit_type(const std::string& t, const Json& s, const std::string& path) {
    if (t == "null" || t == "boolean") return t;
    if (t == "integer") return visit_integer(s, path);
    if (t == "number") return visit_number(s, path);
    if (t == "string") return visit_string(s, path);
    if (t == "array") return visit_array(s, path);
    if (t == "object") return visit_object(s, path);
    unsupported("type '" + t + "'", path);
  }

  // Integer bounds from draft-4 (boolean exclusive*) and draft-6+ (numeric) keywords.
  static std::optional<int64_t> bound(const Json& s, bool lower, const std::string& path) {
    const char* inclusive = lower ? "minimum" : "maximum";
    const char* exclusive = lower ? "exclusiveMinimum" : "exclusiveMaximum";
    std::optional<double> v;
    bool strict = false;
    if (s.contains(inclusive)) {
      if (!s[inclusive].is_number()) unsupported("keyword '" + std::string(inclusive) + "'", path);
      v = s[inclusive].get<double>();
      strict = s.value(exclusive, Json(false)) == Json(true);
    }
    if (s.contains(exclusive) && s[exclusive].is_number()) {
      double e = s[exclusive].get<double>();
      if (!v || (lower ? e >= *v : e <= *v)) v = e, strict = true;
    }
    if (!v) return std::nullopt;
    if (std::fabs(*v) > 9e18) unsupported("keyword '" + std::string(inclusive) + "' beyond 64 bits", path);
    double r = lower ? std::ceil(*v) : std::floor(*v);
    if (strict && r == *v) r += lower ? 1 : -1;
    return static_cast<int64_t>(r);
  }

  std::string visit_integer(const Json& s, const std::string& path) {
    std::optional<int64_t> lo = bound(s, true, path), hi = bound(s, false, path);
    if (!lo && !hi) return "integer";
    return new_rule(integer_range_gbnf(lo, hi));
  }

  std::string visit_number(const Json& s, const std::string& path) {
    std::optional<NumberBound> lo = number_bound(s, true, path), hi = number_bound(s, false, path);
    if (!lo && !hi) return "number";
    return new_rule(number_range_gbnf(lo, hi));
  }

  // The tighter of the inclusive and exclusive bound on one side (draft-4 boolean
  // exclusive* or draft-6+ numbers).
  static std::optional<NumberBound> number_bound(const Json& s, bool lower, const std::string& path) {
    const std::string inclusive = lower ? "minimum" : "maximum";
    const std::string exclusive = lower ? "exclusiveMinimum" : "exclusiveMaximum";
    std::optional<NumberBound> out;
    std::optional<double> at;
    for (const std::string& k : {inclusive, exclusive}) {
      if (!s.contains(k) || s[k].is_boolean()) continue;
      if (!s[k].is_number()) unsupported("keyword '" + k + "' that is not a number", path);
      const double v = s[k].get<double>();
      const bool strict = k == exclusive || s.value(exclusive, Json(false)) == Json(true);
      if (at && (lower ? v < *at : v > *at)) continue;
      if (at && v == *at && !strict) continue;
      out = NumberBound{s[k].dump(), strict};
      at = v;
    }
    return out;
  }

  std::string visit_string(const Json& s, const std::string& path) {
    bool lengths = s.contains("minLength") || s.contains("maxLength");
    std::optional<std::string> format;
    if (s.contains("format")) {
      try {
        format = format_gbnf(s["format"].get<std::string>());
      } catch (const CompileError&) {
        unsupported("format '" + s["format"].get<std::string>() + "'", path);
      }
    }
    if (s.contains("pattern")) {
      if (lengths) unsupported("pattern together with minLength/maxLength", path);
      if (format) unsupported("pattern together with format", path);
      return new_rule("\"\\\"\" " + regex_to_gbnf(s["pattern"].get<std::string>(), RegexMode::json_string_search) + " \"\\\"\"");
    }
    if (format) {
      if (lengths) unsupported("format together with minLength/maxLength", path);
      return new_rule("\"\\\"\" " + *format + " \"\\\"\"");
    }
    if (!lengths) return "string";
    size_t min = s.value("minLength", 0);
    std::string max = s.contains("maxLength") ? std::to_string(s["maxLength"].get<size_t>()) : "";
    return new_rule("\"\\\"\" json-char{" + std::to_string(min) + "," + max + "} \"\\\"\"");
  }

  std::string visit_array(const Json& s, const std::string& path) {
    std::vector<std::string> prefix;
    Json rest = true;
    std::string rest_path = path + "/items";
    const Json* tuple = s.contains("prefixItems") ? &s["prefixItems"]
                        : (s.contains("items") && s["items"].is_array()) ? &s["items"] : nullptr;
    const char* tuple_key = s.contains("prefixItems") ? "prefixItems" : "items";
    if (tuple) {
      for (size_t i = 0; i < tuple->size(); ++i) {
        prefix.push_back(visit((*tuple)[i], path + "/" + tuple_key + "/" + std::to_string(i)));
      }
      const char* rest_key = s.contains("prefixItems") ? "items" : "additionalItems";
      if (s.contains(rest_key)) rest = s[rest_key], rest_path = path + "/" + rest_key;
    } else if (s.contains("items")) {
      rest = s["items"];
    }
    size_t min = s.value("minItems", 0);
    std::optional<size_t> max;
    if (s.contains("maxItems")) max = s["maxItems"].get<size_t>();
    std::optional<std::string> rest_expr;
    if (rest != Json(false)) {
      rest_expr = visit(rest, rest_path);
    } else if (!max || *max > prefix.size()) {
      max = prefix.size();
    }
    // More items required than allowed (minItems above maxItems, or above a closed tuple):
    // no array satisfies it, and the grammar below would drop the minimum.
    if (max && min > *max) throw Unsatisfiable{path};
    return new_rule("\"[\" ws " + array_items(prefix, rest_expr, min, max, 0) + " \"]\"");
  }

  // Items from index i on (each followed by ws; all but the first preceded by a comma).
  std::string array_items(const std::vector<std::string>& prefix, const std::optional<std::string>& rest,
                          size_t min, std::optional<size_t> max, size_t i) {
    if (max && i >= *max) return "";
    std::string sep = i == 0 ? "" : "\",\" ws ";
    if (i >= prefix.size()) {
      if (!rest) return "";
      std::string item = sep + *rest + " ws";
      if (i == 0) {
        std::string more = array_items(prefix, rest, min, max, 1);
        return min >= 1 ? "( " + item + " " + more + " )" : "( " + item + " " + more + " )?";
      }
      size_t lo = min > i ? min - i : 0;
      std::string hi = max ? std::to_string(*max - i) : "";
      return "( " + item + " ){" + std::to_string(lo) + "," + hi + "}";
    }
    std::string body = "( " + sep + prefix[i] + " ws " + array_items(prefix, rest, min, max, i + 1) + " )";
    return i < min ? body : body + "?";
  }

  struct Member {
    std::string name;
    std::string rule;  // key ws ":" ws value ws
    bool required;
  };

  std::string visit_object(const Json& s, const std::string& path) {
    std::set<std::string> required;
    if (s.contains("required")) {
      for (const Json& r : s["required"]) required.insert(r.get<std::string>());
    }
    Json extra = s.contains("additionalProperties") ? s["additionalProperties"] : Json(true);
    std::vector<Member> members;
    std::set<std::string> known;
    if (s.contains("properties")) {
      for (const auto& [name, schema] : s["properties"].items()) {
        known.insert(name);
        if (schema == Json(false)) {
          if (required.count(name)) unsupported("required property '" + name + "' with schema false", path);
          continue;
        }
        std::string sub = path + "/properties/" + pointer_escape(name);
        std::string value;
        try {
          value = visit(schema, sub);
        } catch (const Unsatisfiable&) {
          if (required.count(name)) throw;
          continue;  // listed in `known`: it may not appear as an additional property either
        }
        members.push_back(member(name, value, required.count(name) > 0));
      }
    }
    // Required names without a listed schema follow the listed ones, in `required` order.
    for (const Json& r : s.value("required", Json::array())) {
      const std::string name = r.get<std::string>();
      if (known.count(name)) continue;
      if (extra == Json(false)) unsupported("required property '" + name + "' excluded by additionalProperties", path);
      known.insert(name);
      members.push_back(member(name, visit(extra, path + "/additionalProperties"), true));
    }
    std::optional<std::string> extra_rule;
    if (extra != Json(false)) {
      std::string value = visit(extra, path + "/additionalProperties");
      extra_rule = new_rule("\"\\\"\" " + key_excluding(known) + " ws \":\" ws " + value + " ws");
    }
    return object_rules(members, extra_rule);
  }

  Member member(const std::string& name, const std::string& value, bool required) {
    std::string key = gbnf_literal("\"" + json_escape(name) + "\"");
    return {name, new_rule(key + " ws \":\" ws " + value + " ws"), required};
  }

  // obj  ::= "{" ws ( extra rest0 | head0 ) "}"
  // head_i ::= m_i rest_{i+1} | head_{i+1} (m_i optional)      head_n ::= ""
  // rest_i ::= ("," ws extra)* tail_i
  // tail_i ::= "," ws m_i rest_{i+1} | tail_{i+1} (optional)   tail_n ::= ""
  std::string object_rules(const std::vector<Member>& m, const std::optional<std::string>& extra) {
    size_t n = m.size();
    std::vector<std::string> head(n + 1), rest(n + 1), tail(n + 1);
    for (size_t i = 0; i <= n; ++i) head[i] = reserve_rule(), rest[i] = reserve_rule(), tail[i] = reserve_rule();
    std::string extras = extra ? "( \",\" ws " + *extra + " )* " : "";
    for (size_t i = 0; i <= n; ++i) {
      set_rule(rest[i], extras + tail[i]);
      if (i == n) {
        set_rule(head[i], "\"\"");
        set_rule(tail[i], "\"\"");
        continue;
      }
      std::string skip_head = m[i].required ? "" : " | " + head[i + 1];
      std::string skip_tail = m[i].required ? "" : " | " + tail[i + 1];
      set_rule(head[i], m[i].rule + " " + rest[i + 1] + skip_head);
      set_rule(tail[i], "\",\" ws " + m[i].rule + " " + rest[i + 1] + skip_tail);
    }
    std::string first = extra ? "( " + *extra + " " + rest[0] + " | " + head[0] + " )" : head[0];
    return new_rule("\"{\" ws " + first + " \"}\"");
  }

  // The rest of a property name (after its opening quote) that is none of `names`, by a
  // trie over their encoded forms: leave the trie at any character, or end where no name
  // ends. One rule per trie node, built from a worklist: a long name costs rules, never
  // stack depth or grammar nesting (a 20,000-character name once overflowed the stack).
  std::string key_excluding(const std::set<std::string>& names) {
    if (names.empty()) return "string-tail";
    std::vector<std::string> encoded;
    for (const std::string& n : names) encoded.push_back(json_escape(n));
    std::vector<TrieNode> work(1);
    work[0].rule = reserve_rule();
    for (size_t i = 0; i < encoded.size(); ++i) work[0].names.push_back(i);
    const std::string root = work[0].rule;
    while (!work.empty()) {
      TrieNode node = std::move(work.back());
      work.pop_back();
      set_rule(node.rule, key_trie_node(encoded, node, work));
    }
    return root;
  }

  // A trie node: the names that share its prefix (their first `depth` bytes), and the
  // state of the escape that prefix may end inside (see escape_step).
  struct TrieNode {
    std::string rule;
    std::vector<size_t> names;
    size_t depth = 0;
    int escape = 0;
  };

  // Escape state after one more byte of encoded JSON string text: 0 plain, 1 after a
  // backslash, 2 + k after "\u" and k hex digits. Inside an escape only its continuation
  // may follow.
  static int escape_step(int state, char c) {
    if (state == 0) return c == '\\' ? 1 : 0;
    if (state == 1) return c == 'u' ? 2 : 0;
    return state == 5 ? 0 : state + 1;
  }

  // The body of `node`'s rule; its children join the worklist with rules of their own.
  std::string key_trie_node(const std::vector<std::string>& encoded, const TrieNode& node, std::vector<TrieNode>& work) {
    bool ends_here = false;
    std::map<uint32_t, TrieNode> next;
    for (const size_t i : node.names) {
      const std::string& n = encoded[i];
      if (n.size() == node.depth) {
        ends_here = true;
        continue;
      }
      size_t p = node.depth;
      const uint32_t c = decode_utf8(n, p);
      TrieNode& child = next[c];
      child.names.push_back(i);
      child.depth = p;
    }
    std::vector<std::string> alts;
    CodepointSet other = CodepointSet(0x20, kMaxCodepoint);
    other = other.minus(CodepointSet('"', '"')).minus(CodepointSet('\\', '\\'));
    for (const auto& [c, child] : next) other = other.minus(CodepointSet(c, c));
    const bool in_escape = node.escape != 0;
    if (!in_escape) {
      alts.push_back(gbnf_class(other) + " string-tail");
      // Leaving the trie by an escape: only escapes of characters no encoded name holds
      // as themselves (quote, backslash, controls). "\u0061" or "\/" would spell a listed
      // name's next character and reopen the name under the extra schema.
      if (!next.count('\\')) alts.push_back(R"("\\" ["\\bfnrt] string-tail)");
    }
    for (auto& [c, child] : next) {
      std::string ch;
      append_utf8(ch, c);
      child.escape = node.escape;
      for (const char b : ch) child.escape = escape_step(child.escape, b);
      child.rule = reserve_rule();
      alts.push_back(gbnf_literal(ch) + " " + child.rule);
      work.push_back(std::move(child));
    }
    if (!ends_here && !in_escape) alts.push_back("\"\\\"\"");  // a name cannot end inside an escape
    std::string out;
    for (const std::string& a : alts) out += (out.empty() ? "" : " | ") + a;
    return out;
  }

  const Json& root_;
  SchemaValidator validator_;
  std::vector<std::pair<std::string, std::string>> rules_;
  std::map<std::string, std::string> refs_;
  std::map<std::string, std::string> merged_;
  int depth_ = 0;
};

}  // namespace

std::string json_schema_to_gbnf(std::string_view schema_json) {
  // The compiler's walks (and copies of subschemas) recurse over the document, so its
  // depth is bounded while it is parsed, before any of them runs: 256 subschemas of three
  // levels each ({"properties": {"a": ...}}) fit, 100,000 nested allOf do not.
  constexpr int kMaxDocumentDepth = 1024;
  if (tsr::json_deeper_than(schema_json, kMaxDocumentDepth)) {
    throw CompileError("JSON Schema document nested deeper than " + std::to_string(kMaxDocumentDepth) + " levels");
  }
  Json schema;
  try {
    schema = Json::parse(schema_json);
  } catch (const std::exception& e) {
    throw CompileError(std::string("invalid JSON Schema document: ") + e.what());
  }
  try {
    return SchemaCompiler(schema).compile();
  } catch (const nlohmann::json::exception& e) {
    // A keyword whose value has the wrong JSON type where the compiler reads it as
    // another (the schema is malformed, not unsupported).
    throw CompileError(std::string("invalid JSON Schema: a keyword has a value of the wrong type (") + e.what() + ")");
  }
}

}  // namespace tsr::constraints
