#include "server/tool_choice.h"

#include <algorithm>
#include <atomic>
#include <random>

#include <fmt/format.h>

#include "server/api_error.h"
#include "server/json_fields.h"

namespace tsr::server {

namespace {

using nlohmann::json;
using nlohmann::ordered_json;

constexpr size_t kMaxTools = 128;

// OpenAI's rule for function names: letters, digits, '_' and '-', at most 64.
bool valid_function_name(const std::string& name) {
  if (name.empty() || name.size() > 64) return false;
  return std::all_of(name.begin(), name.end(), [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' || c == '-';
  });
}

ordered_json checked_tool(const json& t, size_t i) {
  const std::string at = "tools[" + std::to_string(i) + "]";
  if (!t.is_object() || t.value("type", json()) != "function") {
    throw bad_param("tools", at + " must be {\"type\": \"function\", \"function\": {...}}");
  }
  const json* f = field(t, "function");
  if (!f || !f->is_object()) throw bad_param("tools", at + ".function must be an object");
  const json* name = field(*f, "name");
  if (!name || !name->is_string() || !valid_function_name(name->get<std::string>())) {
    throw bad_param("tools", at + ".function.name must be 1 to 64 letters, digits, '_' or '-'");
  }
  const json* params = field(*f, "parameters");
  if (params && !params->is_object()) throw bad_param("tools", at + ".function.parameters must be a JSON Schema object");
  const json* description = field(*f, "description");
  if (description && !description->is_string()) throw bad_param("tools", at + ".function.description must be a string");
  ordered_json fn{{"name", *name}};
  if (description) fn["description"] = *description;
  if (params) fn["parameters"] = ordered_json::parse(params->dump());
  return {{"type", "function"}, {"function", std::move(fn)}};
}

bool has_function(const ordered_json& tools, const std::string& name) {
  return std::any_of(tools.begin(), tools.end(), [&](const ordered_json& t) { return t["function"]["name"] == name; });
}

void parse_choice(const json& body, ToolRequest& out) {
  const json* v = field(body, "tool_choice");
  if (!v) return;
  if (v->is_string()) {
    const std::string& s = v->get_ref<const std::string&>();
    if (s == "none") out.choice = ToolChoice::NONE;
    else if (s == "auto") out.choice = ToolChoice::AUTO;
    else if (s == "required") out.choice = ToolChoice::REQUIRED;
    else throw bad_param("tool_choice", "'tool_choice' must be 'none', 'auto', 'required' or a named function");
    return;
  }
  const json* f = v->is_object() && v->value("type", json()) == "function" ? field(*v, "function") : nullptr;
  const json* name = f && f->is_object() ? field(*f, "name") : nullptr;
  if (!name || !name->is_string()) {
    throw bad_param("tool_choice", "a named 'tool_choice' is {\"type\": \"function\", \"function\": {\"name\": ...}}");
  }
  if (!has_function(out.tools, name->get<std::string>())) {
    throw bad_param("tool_choice", "'tool_choice' names '" + name->get<std::string>().substr(0, 64) +
                                       "', which is not among the tools");
  }
  out.choice = ToolChoice::NAMED;
  out.name = name->get<std::string>();
}

}  // namespace

std::optional<ToolRequest> parse_tools(const json& body) {
  const json* tools = field(body, "tools");
  const json* choice = field(body, "tool_choice");
  if (!tools || (tools->is_array() && tools->empty())) {
    if (choice && !(choice->is_string() && (*choice == "none" || *choice == "auto"))) {
      throw bad_param("tool_choice", "'tool_choice' requires 'tools'");
    }
    return std::nullopt;
  }
  if (!tools->is_array()) throw bad_param("tools", "'tools' must be an array of functions");
  if (tools->size() > kMaxTools) throw bad_param("tools", "'tools' takes at most " + std::to_string(kMaxTools) + " functions");
  ToolRequest out;
  out.tools = ordered_json::array();
  for (size_t i = 0; i < tools->size(); ++i) out.tools.push_back(checked_tool((*tools)[i], i));
  parse_choice(body, out);
  out.parallel = get_bool(body, "parallel_tool_calls").value_or(true);
  return out;
}

std::optional<ToolConstraint> tool_constraint(const ToolRequest& tools, ToolCallFormat format) {
  const int32_t max_calls = tools.choice != ToolChoice::NAMED && tools.parallel ? kMaxParallelToolCalls : 1;
  switch (tools.choice) {
    case ToolChoice::NONE: return std::nullopt;
    case ToolChoice::REQUIRED:
    case ToolChoice::NAMED:
      return ToolConstraint{{"tool_call", tool_call_constraint(format, tools.tools, tools.name, max_calls)}, ""};
    case ToolChoice::AUTO: {
      std::string trigger = tool_call_trigger(format);
      if (trigger.empty()) return std::nullopt;
      return ToolConstraint{{"tool_call", tool_call_constraint(format, tools.tools, "", max_calls, true)}, std::move(trigger)};
    }
  }
  return std::nullopt;
}

std::string ToolReplyStream::push(std::string_view text) {
  held_ += text;
  const bool leading_only = format_ != ToolCallFormat::HERMES;
  const size_t start = leading_only && answered_ ? held_.size() : tool_call_start(format_, held_);
  std::string out = held_.substr(0, start);
  held_.erase(0, start);
  answered_ = answered_ || out.find_first_not_of(" \t\r\n") != std::string::npos;
  return out;
}

ParsedReply ToolReplyStream::finish() {
  ParsedReply r = parse_tool_calls(format_, held_);
  if (r.calls.empty()) r.content = std::move(held_);  // as generated, white space included
  held_.clear();
  return r;
}

json tool_calls_json(const std::vector<ToolCall>& calls, bool streamed) {
  static std::atomic<uint64_t> counter{0};
  static const uint64_t salt = std::random_device{}();
  json out = json::array();
  for (size_t i = 0; i < calls.size(); ++i) {
    json call{{"id", fmt::format("call_{:08x}{:08x}", uint32_t(salt), uint32_t(++counter))},
              {"type", "function"},
              {"function", {{"name", calls[i].name}, {"arguments", calls[i].arguments}}}};
    if (streamed) call["index"] = i;
    out.push_back(std::move(call));
  }
  return out;
}

}  // namespace tsr::server
