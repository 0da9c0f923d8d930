#include "core/chat/tool_calls.h"

#include <fmt/format.h>

#include <algorithm>
#include <optional>

#include "core/chat/reply_text.h"

namespace tsr {

namespace {

using nlohmann::ordered_json;

constexpr std::string_view kHermesBegin = "<tool_call>", kHermesEnd = "</tool_call>";
constexpr std::string_view kPythonTag = "<|python_tag|>", kMistralMarker = "[TOOL_CALLS]";
using reply_text::kSpace;
using reply_text::trim;

// The end of the JSON object or array that opens `s` at `pos` (one past its closing
// bracket), or npos when it is not closed: brackets counted outside strings, so an
// iterative scan bounds nothing but the text's length.
size_t json_end(std::string_view s, size_t pos) {
  int64_t depth = 0;
  bool in_string = false, escaped = false;
  for (size_t i = pos; i < s.size(); ++i) {
    const char c = s[i];
    if (in_string) {
      if (escaped) escaped = false;
      else if (c == '\\') escaped = true;
      else if (c == '"') in_string = false;
    } else if (c == '"') {
      in_string = true;
    } else if (c == '{' || c == '[') {
      ++depth;
    } else if ((c == '}' || c == ']') && --depth == 0) {
      return i + 1;
    }
  }
  return std::string_view::npos;
}

// {"name": "f", <args_key>: {...} or its JSON text}; llama3 also writes "arguments".
std::optional<ToolCall> call_of(const ordered_json& j, const char* args_key) {
  if (!j.is_object() || !j.contains("name") || !j["name"].is_string()) return std::nullopt;
  const char* key = j.contains(args_key) ? args_key : "arguments";
  ordered_json args = j.contains(key) ? j[key] : ordered_json::object();
  if (args.is_string()) args = ordered_json::parse(args.get<std::string>(), nullptr, false);
  if (!args.is_object()) return std::nullopt;
  return ToolCall{j["name"].get<std::string>(), args.dump()};
}

std::optional<ordered_json> parse_json(std::string_view text) {
  ordered_json j = ordered_json::parse(text, nullptr, false);
  if (j.is_discarded()) return std::nullopt;
  return j;
}

ParsedReply plain(std::string_view text) { return {std::string(trim(text)), {}}; }

ParsedReply parse_hermes(std::string_view text) {
  ParsedReply out;
  std::string content;
  size_t pos = 0;
  for (size_t begin; (begin = text.find(kHermesBegin, pos)) != std::string_view::npos;) {
    content += text.substr(pos, begin - pos);
    const size_t body = begin + kHermesBegin.size();
    const size_t end = std::min(text.find(kHermesEnd, body), text.size());  // EOS may come before the end tag
    const std::optional<ordered_json> j = parse_json(trim(text.substr(body, end - body)));
    std::optional<ToolCall> call = j ? call_of(*j, "arguments") : std::nullopt;
    if (!call) return plain(text);
    out.calls.push_back(std::move(*call));
    pos = end == text.size() ? end : end + kHermesEnd.size();
  }
  if (out.calls.empty()) return plain(text);
  content += text.substr(pos);
  out.content = std::string(trim(content));
  return out;
}

// One or more {"name", "parameters"} objects, separated by ';' or white space.
ParsedReply parse_llama3(std::string_view text) {
  std::string_view t = trim(text);
  if (t.starts_with(kPythonTag)) t = trim(t.substr(kPythonTag.size()));
  ParsedReply out;
  for (size_t pos = 0; pos < t.size();) {
    if (t[pos] != '{') return plain(text);
    const size_t end = json_end(t, pos);
    const std::optional<ordered_json> j = end == std::string_view::npos ? std::nullopt : parse_json(t.substr(pos, end - pos));
    std::optional<ToolCall> call = j ? call_of(*j, "parameters") : std::nullopt;
    if (!call) return plain(text);
    out.calls.push_back(std::move(*call));
    pos = t.find_first_not_of("; \t\r\n", end);
    if (pos == std::string_view::npos) break;
  }
  return out.calls.empty() ? plain(text) : out;
}

ParsedReply parse_mistral(std::string_view text) {
  std::string_view t = trim(text);
  if (t.starts_with(kMistralMarker)) t = trim(t.substr(kMistralMarker.size()));
  if (!t.starts_with('[') || json_end(t, 0) != t.size()) return plain(text);
  const std::optional<ordered_json> j = parse_json(t);
  if (!j || !j->is_array() || j->empty()) return plain(text);
  ParsedReply out;
  for (const ordered_json& item : *j) {
    std::optional<ToolCall> call = call_of(item, "arguments");
    if (!call) return plain(text);
    out.calls.push_back(std::move(*call));
  }
  return out;
}

// llama3 and mistral: a reply that opens with the call syntax (or is only white space so
// far) may be a call from its first byte.
size_t leading_call_start(std::string_view text, char open, std::string_view marker) {
  const size_t first = text.find_first_not_of(kSpace);
  if (first == std::string_view::npos) return 0;
  const std::string_view rest = text.substr(first);
  const bool marker_so_far = rest.size() < marker.size() ? marker.starts_with(rest) : rest.starts_with(marker);
  return rest.front() == open || marker_so_far ? 0 : text.size();
}

std::string hermes_tools_text(const ordered_json& tools) {
  std::string listed;
  for (const ordered_json& t : tools) listed += fmt::format("\n{}", t.dump());
  return fmt::format(
      "# Tools\n\nYou may call functions to help with the request. Their signatures, as JSON, are inside "
      "<tools></tools>:\n<tools>{}\n</tools>\n\nTo call a function, answer with a JSON object of its name and "
      "arguments inside <tool_call></tool_call> tags, one block per call:\n<tool_call>\n"
      "{{\"name\": <function-name>, \"arguments\": <arguments-object>}}\n</tool_call>",
      listed);
}

std::string hermes_blocks(const ordered_json& tool_calls) {
  std::string out;
  for (const ordered_json& c : tool_calls) {
    const ordered_json& f = c.contains("function") ? c["function"] : c;
    const ordered_json call{{"name", f.value("name", "")}, {"arguments", f.value("arguments", ordered_json::object())}};
    out += fmt::format("{}{}\n{}\n{}", out.empty() ? "" : "\n", kHermesBegin, call.dump(), kHermesEnd);
  }
  return out;
}

}  // namespace

ToolCallFormat tool_call_format(std::string_view template_text) {
  if (template_text.find("[TOOL_CALLS]") != std::string_view::npos) return ToolCallFormat::MISTRAL;
  if (template_text.find(kHermesBegin) != std::string_view::npos) return ToolCallFormat::HERMES;
  if (template_text.find("<|python_tag|>") != std::string_view::npos ||
      template_text.find("\"parameters\": dictionary") != std::string_view::npos) {
    return ToolCallFormat::LLAMA3;
  }
  return ToolCallFormat::HERMES;
}

const char* tool_call_format_name(ToolCallFormat format) {
  switch (format) {
    case ToolCallFormat::HERMES: return "hermes";
    case ToolCallFormat::LLAMA3: return "llama3";
    case ToolCallFormat::MISTRAL: return "mistral";
  }
  return "?";
}

bool template_renders_tools(std::string_view template_text) {
  return template_text.find("tools") != std::string_view::npos;
}

std::vector<ChatMessage> with_tools_in_prompt(std::vector<ChatMessage> messages, const ordered_json& tools) {
  std::vector<ChatMessage> out;
  if (!tools.is_null() && !tools.empty()) {
    const std::string text = hermes_tools_text(tools);
    if (!messages.empty() && messages.front().role == "system") {
      messages.front().content += fmt::format("\n\n{}", text);
    } else {
      out.push_back({"system", text, nullptr, "", ""});
    }
  }
  for (ChatMessage& m : messages) {
    if (m.role == "tool") {  // consecutive results share one user turn
      const std::string block = fmt::format("<tool_response>\n{}\n</tool_response>", m.content);
      if (!out.empty() && out.back().role == "user" && out.back().content.starts_with("<tool_response>")) {
        out.back().content += fmt::format("\n{}", block);
      } else {
        out.push_back({"user", block, nullptr, "", ""});
      }
      continue;
    }
    if (!m.tool_calls.is_null()) {
      m.content += fmt::format("{}{}", m.content.empty() ? "" : "\n", hermes_blocks(m.tool_calls));
      m.tool_calls = nullptr;
    }
    out.push_back(std::move(m));
  }
  return out;
}

ParsedReply parse_tool_calls(ToolCallFormat format, std::string_view text) {
  switch (format) {
    case ToolCallFormat::HERMES: return parse_hermes(text);
    case ToolCallFormat::LLAMA3: return parse_llama3(text);
    case ToolCallFormat::MISTRAL: return parse_mistral(text);
  }
  return plain(text);
}

size_t tool_call_start(ToolCallFormat format, std::string_view text) {
  switch (format) {
    case ToolCallFormat::HERMES: {
      const size_t begin = text.find(kHermesBegin);
      if (begin != std::string_view::npos) return begin;
      return reply_text::partial_marker(text, kHermesBegin);
    }
    case ToolCallFormat::LLAMA3: return leading_call_start(text, '{', kPythonTag);
    case ToolCallFormat::MISTRAL: return leading_call_start(text, '[', kMistralMarker);
  }
  return text.size();
}

std::string tool_call_trigger(ToolCallFormat format) {
  switch (format) {
    case ToolCallFormat::HERMES: return std::string(kHermesBegin);
    case ToolCallFormat::MISTRAL: return std::string(kMistralMarker);
    case ToolCallFormat::LLAMA3: return "";
  }
  return "";
}

std::string tool_call_constraint(ToolCallFormat format, const ordered_json& tools, const std::string& only,
                                 int32_t max_calls, bool after_trigger) {
  const char* args_key = format == ToolCallFormat::LLAMA3 ? "parameters" : "arguments";
  ordered_json alternatives = ordered_json::array();
  for (const ordered_json& t : tools) {
    const ordered_json& f = t["function"];
    const std::string name = f["name"].get<std::string>();
    if (!only.empty() && name != only) continue;
    const ordered_json params = f.contains("parameters") ? f["parameters"] : ordered_json{{"type", "object"}};
    alternatives.push_back({{"type", "object"},
                            {"properties", {{"name", {{"const", name}}}, {args_key, params}}},
                            {"required", {"name", args_key}},
                            {"additionalProperties", false}});
  }
  ordered_json spec{{"schema", alternatives.size() == 1 ? alternatives[0] : ordered_json{{"anyOf", alternatives}}}};
  switch (format) {
    case ToolCallFormat::HERMES:
      // After the trigger, the first call's <tool_call> is out already; the call object's
      // grammar opens with optional white space, which takes the newline after it.
      spec["begin"] = after_trigger ? "" : fmt::format("{}\n", kHermesBegin);
      spec["end"] = fmt::format("\n{}", kHermesEnd);
      spec["separator"] = after_trigger ? fmt::format("\n{}\n", kHermesBegin) : "\n";
      spec["max_calls"] = max_calls;
      break;
    case ToolCallFormat::LLAMA3: spec["max_calls"] = 1; break;
    case ToolCallFormat::MISTRAL:
      spec["open"] = "[";
      spec["close"] = "]";
      spec["separator"] = ", ";
      spec["max_calls"] = max_calls;
      break;
  }
  return spec.dump();
}

}  // namespace tsr
