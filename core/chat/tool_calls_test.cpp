#include "core/chat/tool_calls.h"

#include <gtest/gtest.h>

#include <fstream>
#include <sstream>

namespace tsr {
namespace {

using nlohmann::ordered_json;

std::string read_testdata(const std::string& name) {
  std::ifstream in(std::string(TESSERA_CHAT_TESTDATA) + "/" + name);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

const ordered_json kTools = ordered_json::parse(R"([{"type": "function", "function": {"name": "get_weather",
    "description": "The weather in a city", "parameters": {"type": "object",
    "properties": {"city": {"type": "string"}}, "required": ["city"]}}}])");

TEST(ToolCalls, FormatsAreReadFromTheTemplate) {
  EXPECT_EQ(tool_call_format(read_testdata("llama3_1_instruct.jinja")), ToolCallFormat::LLAMA3);
  EXPECT_EQ(tool_call_format(kDefaultChatTemplate), ToolCallFormat::HERMES);
  EXPECT_EQ(tool_call_format("{% if tools %}<tool_call>{% endif %}"), ToolCallFormat::HERMES);
  EXPECT_EQ(tool_call_format("[AVAILABLE_TOOLS]{{ tools|tojson }}[/AVAILABLE_TOOLS] [TOOL_CALLS]"),
            ToolCallFormat::MISTRAL);
  EXPECT_TRUE(template_renders_tools(read_testdata("llama3_1_instruct.jinja")));
  EXPECT_FALSE(template_renders_tools(kDefaultChatTemplate));
}

TEST(ToolCalls, HermesBlocksAndTheTextAroundThem) {
  const ParsedReply r = parse_tool_calls(
      ToolCallFormat::HERMES,
      "Let me look.\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Oslo\"}}\n</tool_call>\n"
      "<tool_call>{\"name\": \"get_weather\", \"arguments\": \"{\\\"city\\\": \\\"Rome\\\"}\"}");  // EOS before the end tag
  ASSERT_EQ(r.calls.size(), 2u);
  EXPECT_EQ(r.content, "Let me look.");
  EXPECT_EQ(r.calls[0].name, "get_weather");
  EXPECT_EQ(r.calls[0].arguments, R"({"city":"Oslo"})");
  EXPECT_EQ(r.calls[1].arguments, R"({"city":"Rome"})") << "arguments given as JSON text are parsed";
}

TEST(ToolCalls, WhatDoesNotParseIsPlainContent) {
  for (const char* text : {"  Just an answer.\n", "<tool_call>\n{\"name\": \"f\", \"arguments\": {\"a\": 1\n</tool_call>",
                           "<tool_call>{\"arguments\": {}}</tool_call>", "<tool_call>[1, 2]</tool_call>"}) {
    const ParsedReply r = parse_tool_calls(ToolCallFormat::HERMES, text);
    EXPECT_TRUE(r.calls.empty()) << text;
    EXPECT_EQ(r.content, std::string_view(text).substr(std::string_view(text).find_first_not_of(' ')).substr(0, r.content.size()));
  }
  EXPECT_TRUE(parse_tool_calls(ToolCallFormat::LLAMA3, "The weather is {nice}").calls.empty());
  EXPECT_TRUE(parse_tool_calls(ToolCallFormat::MISTRAL, "[1, 2] and more").calls.empty());
}

TEST(ToolCalls, Llama3JsonAndMistralLists) {
  const ParsedReply l = parse_tool_calls(
      ToolCallFormat::LLAMA3, "<|python_tag|>{\"name\": \"get_weather\", \"parameters\": {\"city\": \"Oslo\"}}; "
                              "{\"name\": \"get_time\", \"parameters\": {}}");
  ASSERT_EQ(l.calls.size(), 2u);
  EXPECT_EQ(l.calls[0].arguments, R"({"city":"Oslo"})");
  EXPECT_EQ(l.calls[1].name, "get_time");
  EXPECT_EQ(l.content, "");
  const ParsedReply m = parse_tool_calls(ToolCallFormat::MISTRAL,
                                         "[{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Oslo\"}}]");
  ASSERT_EQ(m.calls.size(), 1u);
  EXPECT_EQ(m.calls[0].arguments, R"({"city":"Oslo"})");
}

// Streamed text is held back from where a call may begin: the marker, a part of it at the
// end, or (JSON formats) a reply that opens with a bracket or is only white space so far.
TEST(ToolCalls, WhereACallMayStart) {
  EXPECT_EQ(tool_call_start(ToolCallFormat::HERMES, "Hello there"), 11u);
  EXPECT_EQ(tool_call_start(ToolCallFormat::HERMES, "Hello <tool"), 6u);
  EXPECT_EQ(tool_call_start(ToolCallFormat::HERMES, "Hi <tool_call>\n{\"na"), 3u);
  EXPECT_EQ(tool_call_start(ToolCallFormat::LLAMA3, "\n "), 0u);
  EXPECT_EQ(tool_call_start(ToolCallFormat::LLAMA3, " {\"name\""), 0u);
  EXPECT_EQ(tool_call_start(ToolCallFormat::LLAMA3, "The answer"), 10u);
  EXPECT_EQ(tool_call_start(ToolCallFormat::MISTRAL, "[TOOL_"), 0u);
}

// A template without tools gets them in the system message; results and earlier calls
// become text in the hermes format, never dropped.
TEST(ToolCalls, TemplatesWithoutToolsGetThemAsText) {
  std::vector<ChatMessage> messages{{"user", "Weather in Oslo?", nullptr, "", ""},
                                    {"assistant", "", ordered_json::parse(R"([{"id": "call_1", "type": "function",
                                      "function": {"name": "get_weather", "arguments": {"city": "Oslo"}}}])"), "", ""},
                                    {"tool", "-3C", nullptr, "call_1", "get_weather"},
                                    {"tool", "snow", nullptr, "call_2", ""}};
  const std::vector<ChatMessage> out = with_tools_in_prompt(messages, kTools);
  ASSERT_EQ(out.size(), 4u);
  EXPECT_EQ(out[0].role, "system");
  EXPECT_NE(out[0].content.find(kTools[0].dump()), std::string::npos);
  EXPECT_EQ(out[2].content, "<tool_call>\n{\"name\":\"get_weather\",\"arguments\":{\"city\":\"Oslo\"}}\n</tool_call>");
  EXPECT_TRUE(out[2].tool_calls.is_null());
  EXPECT_EQ(out[3].role, "user");
  EXPECT_EQ(out[3].content, "<tool_response>\n-3C\n</tool_response>\n<tool_response>\nsnow\n</tool_response>");
  const std::string prompt = apply_chat_template(kDefaultChatTemplate, out, true, "", "");
  EXPECT_NE(prompt.find("<|im_start|>system\n# Tools"), std::string::npos) << prompt;
}

// Templates that render tools see them, and each message's tool calls and ids.
TEST(ToolCalls, TemplatesSeeToolsAndCalls) {
  ChatTemplateInputs in;
  in.tools = kTools;
  in.messages = {{"user", "Weather in Oslo?", nullptr, "", ""},
                 {"assistant", "", ordered_json::parse(R"([{"function": {"name": "get_weather",
                   "arguments": {"city": "Oslo"}}}])"), "", ""},
                 {"tool", "-3C", nullptr, "call_1", "get_weather"}};
  in.bos_token = "<|begin_of_text|>";
  const std::string prompt = apply_chat_template(read_testdata("llama3_1_instruct.jinja"), in);
  EXPECT_NE(prompt.find("\"name\": \"get_weather\",\n        \"description\""), std::string::npos) << prompt;
  EXPECT_NE(prompt.find(R"({"name": "get_weather", "parameters": {"city": "Oslo"}})"), std::string::npos) << prompt;
  EXPECT_NE(prompt.find("<|start_header_id|>ipython<|end_header_id|>\n\n\"-3C\""), std::string::npos) << prompt;
  const std::string ids = apply_chat_template("{{ messages[2].tool_call_id }} {{ messages[2].name }}", in);
  EXPECT_EQ(ids, "call_1 get_weather");
}

TEST(ToolCalls, ConstraintSpecsNameTheFunctionsAndFormat) {
  const ordered_json hermes = ordered_json::parse(tool_call_constraint(ToolCallFormat::HERMES, kTools, "", 4));
  EXPECT_EQ(hermes["begin"], "<tool_call>\n");
  EXPECT_EQ(hermes["max_calls"], 4);
  EXPECT_EQ(hermes["schema"]["properties"]["name"]["const"], "get_weather");
  EXPECT_EQ(hermes["schema"]["properties"]["arguments"], kTools[0]["function"]["parameters"]);
  ordered_json two = kTools;
  two.push_back({{"type", "function"}, {"function", {{"name", "get_time"}}}});
  const ordered_json any = ordered_json::parse(tool_call_constraint(ToolCallFormat::LLAMA3, two, "", 4));
  EXPECT_EQ(any["schema"]["anyOf"].size(), 2u);
  EXPECT_EQ(any["max_calls"], 1) << "llama3's JSON format takes one call";
  EXPECT_EQ(any["schema"]["anyOf"][1]["properties"]["parameters"], ordered_json({{"type", "object"}}));
  const ordered_json named = ordered_json::parse(tool_call_constraint(ToolCallFormat::MISTRAL, two, "get_time", 1));
  EXPECT_EQ(named["schema"]["properties"]["name"]["const"], "get_time");
  EXPECT_EQ(named["open"], "[");
}

}  // namespace
}  // namespace tsr
