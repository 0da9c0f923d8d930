// Turns OpenAI-style chat messages into a prompt with a model's chat template
// (GGUF tokenizer.chat_template, a Jinja template), rendered the way Hugging Face's
// tokenizer.apply_chat_template renders it: trim_blocks and lstrip_blocks on, and the
// variables messages, add_generation_prompt, bos_token, eos_token and tools.
#pragma once

#include <nlohmann/json.hpp>

#include <optional>
#include <string>
#include <vector>

namespace tsr {

struct Vocab;

struct ChatMessage {
  std::string role;  // "system", "user", "assistant", "tool", ...
  std::string content;
  // An assistant turn's tool calls as OpenAI sends them ([{id, type, function: {name,
  // arguments}}]) with each arguments string parsed into its object, as Hugging Face's
  // templates expect them; null: none.
  nlohmann::ordered_json tool_calls = nullptr;
  std::string tool_call_id = {};  // a tool result: the call it answers ("" when not given)
  std::string name = {};          // a tool result: the function's name ("" when not given)
  // An assistant turn's reasoning (vLLM's reasoning_content, which Qwen3's template
  // wraps in <think>); "" when not given.
  std::string reasoning_content = {};
};

struct ChatTemplateInputs {
  std::vector<ChatMessage> messages;
  bool add_generation_prompt = true;
  std::string bos_token, eos_token;
  // OpenAI's tools ([{type: "function", function: {name, description, parameters}}]);
  // null: none (the template sees tools = None).
  nlohmann::ordered_json tools;
  // Passed as date_string only when set: templates such as Llama 3.1's choose their
  // own default date when it is undefined, exactly as with Hugging Face.
  std::optional<std::string> date_string;
  // More variables for the template (vLLM's chat_template_kwargs: Qwen3's enable_thinking,
  // gpt-oss's reasoning_effort, ...): a JSON object, or null. The names above win over
  // them, as vLLM's do.
  nlohmann::ordered_json kwargs;
};

// ChatML, for models without a template of their own (llama.cpp and most servers fall
// back to it too):
//   <|im_start|>{role}\n{content}<|im_end|>\n   for each message, then, with
//   add_generation_prompt, <|im_start|>assistant\n
extern const char* const kDefaultChatTemplate;

// Throws tsr::Error on template syntax errors (naming line and column), runtime errors,
// and raise_exception() in the template (with the template's own message).
std::string apply_chat_template(const std::string& template_text, const ChatTemplateInputs& inputs);
std::string apply_chat_template(const std::string& template_text, const std::vector<ChatMessage>& messages,
                                bool add_generation_prompt, const std::string& bos, const std::string& eos);

// The model's template, or kDefaultChatTemplate when its vocabulary has none.
std::string chat_template_for(const Vocab& vocab);

// Built-in templates by name: chatml, llama2, llama3, gemma, phi3.
std::vector<std::string> chat_template_names();

// `name_or_file` empty: chat_template_for(vocab); a built-in's name: its text; else the
// Jinja file of that path. Throws tsr::Error for an unreadable file (listing the built-in
// names) and for a template that does not parse.
std::string chat_template_resolve(const std::string& name_or_file, const Vocab& vocab);

}  // namespace tsr
