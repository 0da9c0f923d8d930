#include "core/chat/chat_template.h"

#include <array>
#include <fstream>
#include <iterator>
#include <string_view>

#include "core/chat/jinja_json.h"
#include "core/chat/jinja_template.h"
#include "base/error.h"
#include "core/tokenizer/vocab.h"

namespace tsr {

const char* const kDefaultChatTemplate =
    "{% for message in messages %}"
    "{{ '<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>' + '\\n' }}"
    "{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}";

std::string apply_chat_template(const std::string& template_text, const ChatTemplateInputs& inputs) {
  jinja::List messages;
  for (const ChatMessage& m : inputs.messages) {
    jinja::Dict message;
    message.set("role", m.role);
    message.set("content", m.content);
    if (!m.tool_calls.is_null()) message.set("tool_calls", jinja::from_json(m.tool_calls));
    if (!m.tool_call_id.empty()) message.set("tool_call_id", m.tool_call_id);
    if (!m.name.empty()) message.set("name", m.name);
    if (!m.reasoning_content.empty()) message.set("reasoning_content", m.reasoning_content);
    messages.emplace_back(std::move(message));
  }
  jinja::Dict variables;
  if (inputs.kwargs.is_object()) {
    for (const auto& [key, value] : inputs.kwargs.items()) variables.set(key, jinja::from_json(value));
  }
  variables.set("messages", std::move(messages));
  variables.set("add_generation_prompt", inputs.add_generation_prompt);
  variables.set("bos_token", inputs.bos_token);
  variables.set("eos_token", inputs.eos_token);
  variables.set("tools", inputs.tools.is_null() ? jinja::Value::none() : jinja::from_json(inputs.tools));
  if (inputs.date_string) variables.set("date_string", *inputs.date_string);
  return jinja::Template(template_text).render(variables);
}

std::string apply_chat_template(const std::string& template_text, const std::vector<ChatMessage>& messages,
                                bool add_generation_prompt, const std::string& bos, const std::string& eos) {
  ChatTemplateInputs inputs;
  inputs.messages = messages;
  inputs.add_generation_prompt = add_generation_prompt;
  inputs.bos_token = bos;
  inputs.eos_token = eos;
  return apply_chat_template(template_text, inputs);
}

std::string chat_template_for(const Vocab& vocab) {
  return vocab.chat_template.empty() ? kDefaultChatTemplate : vocab.chat_template;
}

namespace {

struct NamedTemplate {
  std::string_view name;
  const char* text;
};

// The formats of the common model families, for files whose GGUF carries no template (or a
// wrong one), as llama.cpp's --chat-template NAME.
constexpr std::array<NamedTemplate, 5> kNamedTemplates{{
    {"chatml", kDefaultChatTemplate},
    // Llama 2: the system prompt inside the first [INST], each exchange one <s>...</s>,
    // contents trimmed, as Meta's template.
    {"llama2",
     "{% set sys = namespace(text='') %}"
     "{% for message in messages %}"
     "{% if message['role'] == 'system' %}{% set sys.text = '<<SYS>>\\n' + message['content'] | trim + '\\n<</SYS>>\\n\\n' %}"
     "{% elif message['role'] == 'user' %}{{ bos_token + '[INST] ' + sys.text + message['content'] | trim + ' [/INST]' }}"
     "{% set sys.text = '' %}"
     "{% else %}{{ ' ' + message['content'] | trim + ' ' + eos_token }}{% endif %}"
     "{% endfor %}"},
    {"llama3",
     "{{ bos_token }}"
     "{% for message in messages %}"
     "{{ '<|start_header_id|>' + message['role'] + '<|end_header_id|>\\n\\n' + message['content'] | trim + '<|eot_id|>' }}"
     "{% endfor %}"
     "{% if add_generation_prompt %}{{ '<|start_header_id|>assistant<|end_header_id|>\\n\\n' }}{% endif %}"},
    // Gemma has no system role: the system prompt opens the first user turn.
    {"gemma",
     "{{ bos_token }}{% set sys = namespace(text='') %}"
     "{% for message in messages %}"
     "{% if message['role'] == 'system' %}{% set sys.text = message['content'] + '\\n\\n' %}"
     "{% else %}{{ '<start_of_turn>' + ('model' if message['role'] == 'assistant' else message['role']) + '\\n' + "
     "sys.text + message['content'] + '<end_of_turn>\\n' }}{% set sys.text = '' %}{% endif %}"
     "{% endfor %}"
     "{% if add_generation_prompt %}{{ '<start_of_turn>model\\n' }}{% endif %}"},
    {"phi3",
     "{% for message in messages %}"
     "{{ '<|' + message['role'] + '|>\\n' + message['content'] + '<|end|>\\n' }}"
     "{% endfor %}"
     "{% if add_generation_prompt %}{{ '<|assistant|>\\n' }}{% endif %}"},
}};

std::string read_template_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    std::string names;
    for (const NamedTemplate& t : kNamedTemplates) names += (names.empty() ? "" : ", ") + std::string(t.name);
    throw Error("chat template '" + path + "' is neither a built-in (" + names + ") nor a readable file",
                TSR_STATUS_INVALID_ARGUMENT);
  }
  std::string text((std::istreambuf_iterator<char>(in)), {});
  if (text.empty()) throw Error("chat template file " + path + " is empty", TSR_STATUS_INVALID_ARGUMENT);
  return text;
}

}  // namespace

std::vector<std::string> chat_template_names() {
  std::vector<std::string> names;
  for (const NamedTemplate& t : kNamedTemplates) names.emplace_back(t.name);
  return names;
}

std::string chat_template_resolve(const std::string& name_or_file, const Vocab& vocab) {
  if (name_or_file.empty()) return chat_template_for(vocab);
  for (const NamedTemplate& t : kNamedTemplates) {
    if (t.name == name_or_file) return t.text;
  }
  std::string text = read_template_file(name_or_file);
  jinja::Template check(text);  // a syntax error is reported at start, not per request
  (void)check;
  return text;
}

}  // namespace tsr
