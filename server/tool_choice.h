// OpenAI's tool calling on /v1/chat/completions: `tools`, `tool_choice` (none | auto |
// required | {"type": "function", "function": {"name"}}) and `parallel_tool_calls`, checked
// and turned into what the engine runs (the tools through the chat template, a
// `tool_call` constraint for required and named choices), and the reply split into content
// and calls, whole or as it streams.
#pragma once

#include <nlohmann/json.hpp>

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/chat/tool_calls.h"
#include "core/request/request.h"

namespace tsr::server {

enum class ToolChoice { NONE, AUTO, REQUIRED, NAMED };

struct ToolRequest {
  nlohmann::ordered_json tools;  // [{type: "function", function: {name, description?, parameters?}}]
  ToolChoice choice = ToolChoice::AUTO;
  std::string name;              // NAMED: the function
  bool parallel = true;          // parallel_tool_calls
};

// At most this many calls in one reply when parallel_tool_calls is on (one when off).
constexpr int32_t kMaxParallelToolCalls = 8;

// The request's tools, or nullopt when it has none (absent or empty). Throws a 400 naming
// `tools`, `tool_choice` or `parallel_tool_calls` for a malformed one, or a choice naming
// a function that is not among the tools.
std::optional<ToolRequest> parse_tools(const nlohmann::json& body);

// What the request's constraint becomes: required and named choices are calls in
// `format` from the first token; auto lets the model choose and, once it starts a call
// (the format's trigger), constrains the call (a lazy constraint; none for llama3, which
// has no trigger); none constrains nothing.
struct ToolConstraint {
  ConstraintSpec spec;
  std::string trigger;  // "" unless lazy
};
std::optional<ToolConstraint> tool_constraint(const ToolRequest& tools, ToolCallFormat format);

// One streamed choice: content is passed on until a call may begin, then held until the
// reply is whole. The JSON formats (llama3, mistral) only begin a call at the start of a
// reply; hermes blocks may follow text.
class ToolReplyStream {
 public:
  explicit ToolReplyStream(ToolCallFormat format) : format_(format) {}
  // What of `text` (the next increment) can be sent as content now.
  std::string push(std::string_view text);
  // The held text at the end of the reply: its content and calls.
  ParsedReply finish();

 private:
  ToolCallFormat format_;
  std::string held_;
  bool answered_ = false;  // non-blank content was sent: a JSON-format call can no longer start
};

// OpenAI's tool_calls array; `streamed` adds each call's index (as deltas carry it).
nlohmann::json tool_calls_json(const std::vector<ToolCall>& calls, bool streamed);

}  // namespace tsr::server
