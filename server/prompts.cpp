#include "server/prompts.h"

#include "core/engine/engine.h"
#include "base/error.h"
#include "server/api_error.h"
#include "server/json_fields.h"
#include "server/tool_choice.h"

namespace tsr::server {

namespace {

using nlohmann::json;

// Prompts are tokenized only until they outnumber the context (Tokenizer::encode): a text
// too long for it costs about a context's worth of tokenizing.
size_t tokenize_limit(const Engine& engine) { return static_cast<size_t>(engine.context_length()); }

// 400 with OpenAI's code, as OpenAI and vLLM answer; 413 is for bodies over --max-body.
void check_fits(const std::vector<int32_t>& prompt, const Engine& engine, const std::string& param) {
  const int32_t n_ctx = engine.context_length();
  if (static_cast<int32_t>(prompt.size()) >= n_ctx) {
    const bool stopped = prompt.size() > tokenize_limit(engine);  // counted no further
    throw ApiError(400, "the prompt has " + std::string(stopped ? "more than " + std::to_string(n_ctx) : std::to_string(prompt.size())) +
                            " tokens; this model's context holds " + std::to_string(n_ctx) + " (prompt and output)",
                   "invalid_request_error", param, "context_length_exceeded");
  }
}

bool is_token_array(const json& v) {
  return v.is_array() && !v.empty() && v.front().is_number();
}

std::vector<int32_t> token_prompt(const json& v, const std::string& param, const Engine& engine) {
  std::vector<int32_t> ids;
  for (const json& t : v) ids.push_back(static_cast<int32_t>(as_int(t, param, 0, engine.tokenizer().n_tokens() - 1)));
  return ids;
}

std::vector<int32_t> one_prompt(const json& v, const std::string& param, const Engine& engine) {
  if (v.is_string()) {
    check_text_fits(v.get_ref<const std::string&>().size(), engine, param);
    return engine.tokenize(v.get_ref<const std::string&>(), tokenize_limit(engine));
  }
  if (is_token_array(v)) return token_prompt(v, param, engine);
  throw bad_param(param, "'" + param + "' must be a string, an array of token ids, or an array of those");
}

std::string message_content(const json& m) {
  const json* c = field(m, "content");
  if (!c) return {};
  if (c->is_string()) return c->get<std::string>();
  if (!c->is_array()) throw bad_param("messages", "message 'content' must be a string or an array of parts");
  std::string text;
  for (const json& part : *c) {
    const json* type = part.is_object() ? field(part, "type") : nullptr;
    if (!type || *type != "text" || !field(part, "text") || !part["text"].is_string()) {
      throw bad_param("messages", "only text content parts ({\"type\": \"text\", \"text\": ...}) are supported");
    }
    text += part["text"].get<std::string>();
  }
  return text;
}

// The roles a chat template renders. OpenAI's "developer" is its newer name for "system";
// its deprecated "function" role (results of function_call) is refused by name.
std::string checked_role(const std::string& role, const std::string& at) {
  if (role == "system" || role == "user" || role == "assistant" || role == "tool") return role;
  if (role == "developer") return "system";
  throw bad_param("messages", at + " has unknown role '" + role.substr(0, 64) +
                                  "' (expected system, developer, user, assistant or tool)");
}

// An assistant turn's calls as OpenAI sends them, each arguments string parsed into its
// object (what templates print with tojson); arguments that are not a JSON object stay text.
nlohmann::ordered_json tool_calls_of(const json& calls, const std::string& at) {
  if (!calls.is_array()) throw bad_param("messages", at + ".tool_calls must be an array");
  nlohmann::ordered_json out = nlohmann::ordered_json::array();
  for (const json& c : calls) {
    const json* f = c.is_object() ? field(c, "function") : nullptr;
    const json* name = f && f->is_object() ? field(*f, "name") : nullptr;
    if (!name || !name->is_string()) throw bad_param("messages", at + ".tool_calls entries need function.name");
    const json* args = field(*f, "arguments");
    nlohmann::ordered_json arguments = nlohmann::ordered_json::object();
    if (args && args->is_string()) {
      arguments = nlohmann::ordered_json::parse(args->get<std::string>(), nullptr, false);
      if (!arguments.is_object()) arguments = args->get<std::string>();
    } else if (args) {
      arguments = nlohmann::ordered_json::parse(args->dump());
    }
    out.push_back({{"id", c.value("id", "")},
                   {"type", "function"},
                   {"function", {{"name", *name}, {"arguments", std::move(arguments)}}}});
  }
  return out;
}

std::string optional_string(const json& m, const char* key, const std::string& at) {
  const json* v = field(m, key);
  if (v && !v->is_string()) throw bad_param("messages", at + "." + key + " must be a string");
  return v ? v->get<std::string>() : "";
}

std::vector<ChatMessage> parse_messages(const json& body) {
  const json* v = field(body, "messages");
  if (!v) throw bad_param("messages", "'messages' is required");
  if (!v->is_array() || v->empty()) throw bad_param("messages", "'messages' must be a non-empty array");
  std::vector<ChatMessage> out;
  for (size_t i = 0; i < v->size(); ++i) {
    const json& m = (*v)[i];
    const std::string at = "messages[" + std::to_string(i) + "]";
    if (!m.is_object()) throw bad_param("messages", at + " must be an object");
    const json* role = field(m, "role");
    if (!role || !role->is_string()) throw bad_param("messages", at + " needs a string 'role'");
    ChatMessage message{checked_role(role->get<std::string>(), at), message_content(m)};
    if (field(m, "function_call")) throw unsupported_param("messages", at + " uses the deprecated function_call (use tool_calls)");
    if (const json* calls = field(m, "tool_calls")) {
      if (message.role != "assistant") throw bad_param("messages", at + ": only assistant messages carry tool_calls");
      message.tool_calls = tool_calls_of(*calls, at);
    }
    if (message.role == "tool") {
      message.tool_call_id = optional_string(m, "tool_call_id", at);
      message.name = optional_string(m, "name", at);
    }
    if (message.role == "assistant") message.reasoning_content = optional_string(m, "reasoning_content", at);
    out.push_back(std::move(message));
  }
  return out;
}

// vLLM's chat_template_kwargs: more variables for the template (enable_thinking, ...).
nlohmann::ordered_json template_kwargs(const json& body) {
  const json* v = field(body, "chat_template_kwargs");
  if (!v || v->is_null()) return nullptr;
  if (!v->is_object()) throw bad_param("chat_template_kwargs", "'chat_template_kwargs' must be an object");
  return nlohmann::ordered_json::parse(v->dump());
}

// The tools the template is to see: none without tools or with tool_choice "none" (as
// vLLM leaves them out of the prompt then).
nlohmann::ordered_json prompt_tools(const json& body) {
  const std::optional<ToolRequest> tools = parse_tools(body);
  return tools && tools->choice != ToolChoice::NONE ? tools->tools : nlohmann::ordered_json();
}

}  // namespace

// A text whose bytes alone need more tokens than the context holds, refused before it is
// tokenized (or rendered): each token stands for at most max_token_bytes() bytes, so this
// never refuses a text that would fit, and a 10 MB prompt costs no tokenizer pass.
void check_text_fits(size_t bytes, const Engine& engine, const std::string& param) {
  const size_t per_token = engine.tokenizer().max_token_bytes();
  const size_t least = (bytes + per_token - 1) / per_token;
  const auto n_ctx = static_cast<size_t>(engine.context_length());
  if (least >= n_ctx) {
    throw ApiError(400, "the prompt has " + std::to_string(bytes) + " bytes, at least " + std::to_string(least) +
                            " tokens; this model's context holds " + std::to_string(n_ctx) + " (prompt and output)",
                   "invalid_request_error", param, "context_length_exceeded");
  }
}

// An array of prompts (strings or token arrays), not one prompt of token ids.
bool is_prompt_array(const json& v) {
  return v.is_array() && !v.empty() && !is_token_array(v);
}

size_t num_prompts(const json& v) {
  return is_prompt_array(v) ? v.size() : 1;
}

std::vector<std::vector<int32_t>> prompt_list(const json& body, const std::string& param, const Engine& engine) {
  const json* v = field(body, param);
  if (!v) throw bad_param(param, "'" + param + "' is required");
  std::vector<std::vector<int32_t>> prompts;
  if (is_prompt_array(*v)) {
    for (const json& p : *v) prompts.push_back(one_prompt(p, param, engine));
  } else {
    prompts.push_back(one_prompt(*v, param, engine));
  }
  for (const auto& p : prompts) {
    if (p.empty()) throw bad_param(param, "the " + param + " is empty");
    check_fits(p, engine, param);
  }
  return prompts;
}

std::vector<std::vector<int32_t>> completion_prompts(const json& body, const Engine& engine) {
  return prompt_list(body, "prompt", engine);
}

std::vector<int32_t> chat_prompt(const json& body, const Engine& engine, bool add_generation_prompt) {
  std::vector<int32_t> ids;
  std::vector<ChatMessage> messages = parse_messages(body);
  nlohmann::ordered_json tools = prompt_tools(body);
  size_t bytes = tools.is_null() ? 0 : tools.dump().size();
  for (const ChatMessage& m : messages) {
    bytes += m.content.size() + m.reasoning_content.size() + (m.tool_calls.is_null() ? 0 : m.tool_calls.dump().size());
  }
  check_text_fits(bytes, engine, "messages");
  const nlohmann::ordered_json kwargs = template_kwargs(body);
  if (!template_renders_tools(engine.chat_template())) {  // tools, calls and results become text
    messages = with_tools_in_prompt(std::move(messages), tools);
    tools = nullptr;
  }
  try {
    ids = engine.chat_prompt(messages, add_generation_prompt, tools, kwargs, tokenize_limit(engine));
  } catch (const Error& e) {
    // raise_exception() in a template is how it rejects a conversation (roles, order).
    throw bad_param("messages", std::string("the chat template rejected the messages: ") + e.what());
  }
  if (ids.empty()) throw bad_param("messages", "the rendered chat prompt is empty");
  check_fits(ids, engine, "messages");
  return ids;
}

}  // namespace tsr::server
