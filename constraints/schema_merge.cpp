#include "constraints/internal/schema_merge.h"

#include <algorithm>
#include <set>

#include "constraints/errors.h"

namespace tsr::constraints {
namespace {

using Json = nlohmann::ordered_json;

[[noreturn]] void refuse(const std::string& key, const std::string& path) {
  throw CompileError("unsupported JSON Schema allOf: cannot merge keyword '" + key + "' at " +
                     (path.empty() ? "/" : path));
}

Json type_list(const Json& t) { return t.is_array() ? t : Json::array({t}); }

Json intersect_types(const Json& a, const Json& b, const std::string& path) {
  Json out = Json::array();
  for (const Json& x : type_list(a)) {
    for (const Json& y : type_list(b)) {
      if (x == y) {
        out.push_back(x);
      } else if ((x == "integer" && y == "number") || (x == "number" && y == "integer")) {
        out.push_back("integer");
      }
    }
  }
  if (out.empty()) refuse("type", path);
  return out.size() == 1 ? out[0] : out;
}

bool closed(const Json& s) {
  return s.contains("additionalProperties") && s["additionalProperties"] != Json(true);
}

// additionalProperties of one side also judges the other side's properties; that is only
// exact when neither side brings properties the closed side does not list.
void check_closed_objects(const Json& a, const Json& b, const std::string& path) {
  auto names = [](const Json& s) {
    std::set<std::string> out;
    if (s.contains("properties")) {
      for (const auto& [k, v] : s["properties"].items()) out.insert(k);
    }
    return out;
  };
  std::set<std::string> na = names(a), nb = names(b);
  if (closed(a) && !std::includes(na.begin(), na.end(), nb.begin(), nb.end())) {
    refuse("additionalProperties", path);
  }
  if (closed(b) && !std::includes(nb.begin(), nb.end(), na.begin(), na.end())) {
    refuse("additionalProperties", path);
  }
}

// Whether a schema constrains array elements by position (prefixItems, or draft-4's array
// `items`), and whether it constrains every element with one schema (object `items`, or
// additionalItems). Merged, the two would change what `items` covers: refused.
bool has_tuple(const Json& s) {
  return s.contains("prefixItems") || (s.contains("items") && s["items"].is_array());
}
bool has_all_items(const Json& s) {
  return (s.contains("items") && !s["items"].is_array()) || s.contains("additionalItems");
}

void check_array_items(const Json& a, const Json& b, const std::string& path) {
  if ((has_tuple(a) && has_all_items(b)) || (has_all_items(a) && has_tuple(b))) refuse("items", path);
}

void merge_keyword(Json& into, const std::string& key, const Json& v, const std::string& path) {
  Json& cur = into[key];
  if (key == "type") {
    cur = intersect_types(cur, v, path);
  } else if (key == "properties") {
    for (const auto& [name, schema] : v.items()) {
      cur[name] = cur.contains(name) ? Json{{"allOf", Json::array({cur[name], schema})}} : schema;
    }
  } else if (key == "required") {
    for (const Json& r : v) {
      if (std::find(cur.begin(), cur.end(), r) == cur.end()) cur.push_back(r);
    }
  } else if (key == "minLength" || key == "minItems" || key == "minimum") {
    if (v.is_number() && cur.is_number()) cur = std::max(cur.get<double>(), v.get<double>());
  } else if (key == "maxLength" || key == "maxItems" || key == "maximum") {
    if (v.is_number() && cur.is_number()) cur = std::min(cur.get<double>(), v.get<double>());
  } else if (key == "enum") {
    Json out = Json::array();
    for (const Json& e : cur) {
      if (std::find(v.begin(), v.end(), e) != v.end()) out.push_back(e);
    }
    cur = out;
  } else if (key == "items" && cur.is_object() && v.is_object()) {
    cur = Json{{"allOf", Json::array({cur, v})}};
  } else if (key == "additionalProperties") {
    cur = (cur == Json(false) || v == Json(false)) ? Json(false)
                                                   : Json{{"allOf", Json::array({cur, v})}};
  } else {
    refuse(key, path);
  }
}

}  // namespace

bool is_annotation_keyword(const std::string& key) {
  static const std::set<std::string> annotations = {
      "title", "description", "default", "examples", "$schema", "$id", "id", "$comment",
      "deprecated", "readOnly", "writeOnly", "contentMediaType", "contentEncoding", "$anchor",
      "definitions", "$defs", "discriminator", "example", "markdownDescription"};
  return annotations.count(key) > 0 || key.starts_with("x-");
}

void merge_schema(Json& into, const Json& from, const std::string& path) {
  check_closed_objects(into, from, path);
  check_array_items(into, from, path);
  for (const auto& [key, v] : from.items()) {
    if (is_annotation_keyword(key)) continue;
    if (!into.contains(key)) {
      into[key] = v;
    } else if (into[key] != v) {
      merge_keyword(into, key, v, path);
    }
  }
}

}  // namespace tsr::constraints
