#include "constraints/internal/tool_call.h"

#include <nlohmann/json.hpp>

#include "constraints/errors.h"
#include "constraints/internal/gbnf.h"
#include "constraints/internal/json_schema.h"

namespace tsr::constraints {

namespace {

using Json = nlohmann::ordered_json;

constexpr int64_t kMaxCalls = 64;

std::string text_field(const Json& spec, const char* key) {
  if (!spec.contains(key)) return {};
  if (!spec[key].is_string()) throw CompileError(std::string("tool_call spec: '") + key + "' must be a string");
  return spec[key].get<std::string>();
}

// `text` as a GBNF sequence item; nothing for empty text (GBNF has no empty literal).
std::string literal_item(const std::string& text) { return text.empty() ? "" : gbnf_literal(text) + " "; }

}  // namespace

std::string tool_call_to_gbnf(std::string_view spec_json) {
  const Json spec = Json::parse(spec_json, nullptr, false);
  if (!spec.is_object() || !spec.contains("schema")) {
    throw CompileError("tool_call spec: a JSON object with a 'schema' is required");
  }
  const int64_t max_calls = spec.value("max_calls", Json(1)).is_number_integer() ? spec.value("max_calls", int64_t{1}) : 0;
  if (max_calls < 1 || max_calls > kMaxCalls) {
    throw CompileError("tool_call spec: 'max_calls' must be an integer from 1 to " + std::to_string(kMaxCalls));
  }
  // The schema's grammar, its root renamed: the list of calls is the root here. The
  // schema compiler names its own rules r0, r1, ... and never refers to root.
  std::string object = json_schema_to_gbnf(spec["schema"].dump());
  object.replace(0, std::string_view("root").size(), "tool-call-object");
  const std::string item = "tool-call-item ::= " + literal_item(text_field(spec, "begin")) + "tool-call-object " +
                           literal_item(text_field(spec, "end")) + "\n";
  std::string root = "root ::= " + literal_item(text_field(spec, "open")) + "tool-call-item ";
  if (max_calls > 1) {
    root += "( " + literal_item(text_field(spec, "separator")) + "tool-call-item ){0," + std::to_string(max_calls - 1) + "} ";
  }
  root += literal_item(text_field(spec, "close")) + "\n";
  return root + item + object;
}

}  // namespace tsr::constraints
