#include "constraints/internal/schema_disjoint.h"

#include <set>
#include <string>

namespace tsr::constraints {
namespace {

using Json = nlohmann::ordered_json;

const std::set<std::string> kAll = {"object", "array", "string", "number", "boolean", "null"};

std::string type_of(const Json& v) {
  if (v.is_object()) return "object";
  if (v.is_array()) return "array";
  if (v.is_string()) return "string";
  if (v.is_number()) return "number";
  if (v.is_boolean()) return "boolean";
  return "null";
}

// The JSON types a schema admits ("integer" counted as "number").
std::set<std::string> types(const Json& s) {
  if (!s.is_object()) return kAll;
  std::set<std::string> out;
  if (s.contains("const")) return {type_of(s["const"])};
  if (s.contains("enum") && s["enum"].is_array()) {
    for (const Json& v : s["enum"]) out.insert(type_of(v));
    return out;
  }
  if (!s.contains("type")) return kAll;
  const Json& t = s["type"];
  for (const Json& x : t.is_array() ? t : Json::array({t})) {
    if (!x.is_string()) return kAll;
    out.insert(x == "integer" ? "number" : x.get<std::string>());
  }
  if (s.value("nullable", false)) out.insert("null");
  return out;
}

const Json* values(const Json& s) {
  if (!s.is_object()) return nullptr;
  if (s.contains("const")) return &s["const"];
  if (s.contains("enum") && s["enum"].is_array()) return &s["enum"];
  return nullptr;
}

bool values_disjoint(const Json& a, const Json& b) {
  const Json *va = values(a), *vb = values(b);
  if (!va || !vb) return false;
  Json la = a.contains("const") ? Json::array({*va}) : *va;
  Json lb = b.contains("const") ? Json::array({*vb}) : *vb;
  for (const Json& x : la) {
    for (const Json& y : lb) {
      if (x == y) return false;
    }
  }
  return true;
}

bool is_required(const Json& s, const std::string& p) {
  if (!s.contains("required") || !s["required"].is_array()) return false;
  for (const Json& r : s["required"]) {
    if (r == p) return true;
  }
  return false;
}

const Json* property(const Json& s, const std::string& p) {
  if (!s.contains("properties") || !s["properties"].contains(p)) return nullptr;
  return &s["properties"][p];
}

bool excludes(const Json& s, const std::string& p) {
  return s.value("additionalProperties", Json(true)) == Json(false) && !property(s, p);
}

bool objects_disjoint(const Json& a, const Json& b, const SchemaResolver& resolve, int depth) {
  if (types(a) != std::set<std::string>{"object"} || types(b) != std::set<std::string>{"object"}) return false;
  if (a.contains("required") && a["required"].is_array()) {
    for (const Json& r : a["required"]) {
      if (r.is_string() && excludes(b, r.get<std::string>())) return true;
    }
  }
  if (b.contains("required") && b["required"].is_array()) {
    for (const Json& r : b["required"]) {
      if (r.is_string() && excludes(a, r.get<std::string>())) return true;
    }
  }
  if (!a.contains("properties") || depth > 8) return false;
  for (const auto& [p, pa] : a["properties"].items()) {
    const Json* pb = property(b, p);
    if (!pb || !is_required(a, p) || !is_required(b, p)) continue;
    Json ra = resolve(pa), rb = resolve(*pb);
    if (types(ra).empty() || values_disjoint(ra, rb)) return true;
    std::set<std::string> ta = types(ra), tb = types(rb), both;
    for (const std::string& t : ta) {
      if (tb.count(t)) both.insert(t);
    }
    if (both.empty() || objects_disjoint(ra, rb, resolve, depth + 1)) return true;
  }
  return false;
}

}  // namespace

bool provably_disjoint(const Json& a0, const Json& b0, const SchemaResolver& resolve) {
  Json a = resolve(a0), b = resolve(b0);
  if (a == Json(false) || b == Json(false)) return true;
  std::set<std::string> ta = types(a), tb = types(b);
  bool common = false;
  for (const std::string& t : ta) common |= tb.count(t) > 0;
  if (!common || values_disjoint(a, b)) return true;
  return objects_disjoint(a, b, resolve, 0);
}

}  // namespace tsr::constraints
