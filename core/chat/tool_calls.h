// Tool calling in the formats chat templates teach models: which format a template uses,
// tools in the prompt for templates that render none, a reply split into content and
// calls, where in streamed text a call may begin, and the constraint spec that forces
// calls in the format (the `tool_call` kind of the constraint plugins).
//
// Formats:
//   hermes  <tool_call>\n{"name": ..., "arguments": {...}}\n</tool_call>, one block per
//           call (Qwen 2.5 and 3, Hermes; and Tessera's default for templates without tools)
//   llama3  {"name": ..., "parameters": {...}}, the whole reply, optionally after
//           <|python_tag|> (Llama 3.1, 3.2 and 3.3's JSON tool calling)
//   mistral [TOOL_CALLS][{"name": ..., "arguments": {...}}, ...] (the marker is a control
//           token, so the reply text may hold the array alone)
#pragma once

#include <nlohmann/json.hpp>

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "core/chat/chat_template.h"

namespace tsr {

enum class ToolCallFormat { HERMES, LLAMA3, MISTRAL };

// The format a template's text teaches (hermes when it shows none).
ToolCallFormat tool_call_format(std::string_view template_text);
const char* tool_call_format_name(ToolCallFormat format);

// Whether the template prints `tools` itself.
bool template_renders_tools(std::string_view template_text);

// For a template that renders no tools (ChatML's default among them): the tools described
// in the system message in the hermes format (a system message of its own when there is
// none), assistant tool calls written into their content as <tool_call> blocks, and tool
// results as user turns of <tool_response> blocks, so that nothing is dropped.
std::vector<ChatMessage> with_tools_in_prompt(std::vector<ChatMessage> messages, const nlohmann::ordered_json& tools);

struct ToolCall {
  std::string name;
  std::string arguments;  // a JSON object's text, as OpenAI returns it
};

struct ParsedReply {
  std::string content;          // the text outside the calls, trimmed
  std::vector<ToolCall> calls;  // empty: a plain answer
};

// A reply whose call syntax does not parse (cut off by max_tokens, malformed JSON) is a
// plain answer: no calls, the whole text as content.
ParsedReply parse_tool_calls(ToolCallFormat format, std::string_view text);

// The offset from which streamed reply text may belong to a call (to be held back until
// the reply is whole), or text.size() when all of it is plain content.
size_t tool_call_start(ToolCallFormat format, std::string_view text);

// The `tool_call` constraint text forcing calls of `tools` in `format`: any of them or,
// with `only`, that function; at most max_calls calls (llama3 takes one). `after_trigger`:
// the grammar of what follows tool_call_trigger(format) (a lazy constraint's).
std::string tool_call_constraint(ToolCallFormat format, const nlohmann::ordered_json& tools, const std::string& only,
                                 int32_t max_calls, bool after_trigger = false);

// The text with which a model starts calls mid-reply (hermes "<tool_call>", mistral
// "[TOOL_CALLS]"), for a lazy constraint under tool_choice "auto"; "" for llama3, whose
// calls are the whole reply with no marker to switch on.
std::string tool_call_trigger(ToolCallFormat format);

}  // namespace tsr
