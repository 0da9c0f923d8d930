#include "core/chat/chat_template.h"

#include "core/chat/jinja_template.h"
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
    messages.emplace_back(std::move(message));
  }
  jinja::Dict variables;
  variables.set("messages", std::move(messages));
  variables.set("add_generation_prompt", inputs.add_generation_prompt);
  variables.set("bos_token", inputs.bos_token);
  variables.set("eos_token", inputs.eos_token);
  variables.set("tools", jinja::Value::none());
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

}  // namespace tsr
