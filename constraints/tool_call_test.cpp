#include "constraints/internal/tool_call.h"

#include <gtest/gtest.h>

#include "constraints/errors.h"
#include "constraints/internal/test_support.h"

namespace tsr::constraints {
namespace {

using testing::compile_error;
using testing::compile_test;
using testing::matches;

constexpr const char* kWeather =
    R"({"type": "object", "properties": {"name": {"const": "get_weather"},
        "arguments": {"type": "object", "properties": {"city": {"type": "string", "maxLength": 8}},
                      "required": ["city"], "additionalProperties": false}},
        "required": ["name", "arguments"], "additionalProperties": false})";

// Hermes blocks: each call between its tags, up to max_calls of them, arguments by schema.
TEST(ToolCall, HermesBlocksFollowTheSchema) {
  const std::string spec = std::string(R"({"schema": )") + kWeather +
                           R"(, "begin": "<tool_call>\n", "end": "\n</tool_call>", "separator": "\n", "max_calls": 2})";
  auto g = compile_test(ConstraintKind::tool_call, spec);
  const std::string call = "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Oslo\"}}\n</tool_call>";
  EXPECT_TRUE(matches(g, call));
  EXPECT_TRUE(matches(g, call + "\n" + call));
  EXPECT_FALSE(matches(g, call + "\n" + call + "\n" + call)) << "three calls where two are allowed";
  EXPECT_FALSE(matches(g, "<tool_call>\n{\"name\": \"get_time\", \"arguments\": {}}\n</tool_call>"));
  EXPECT_FALSE(matches(g, "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"town\": \"Oslo\"}}\n</tool_call>"));
  EXPECT_FALSE(matches(g, "Sure! " + call));
}

// Mistral's list: the calls inside one array.
TEST(ToolCall, ListAroundCalls) {
  const std::string spec = std::string(R"({"schema": )") + kWeather +
                           R"(, "open": "[", "close": "]", "separator": ", ", "max_calls": 4})";
  auto g = compile_test(ConstraintKind::tool_call, spec);
  const std::string call = R"({"name": "get_weather", "arguments": {"city": "Rome"}})";
  EXPECT_TRUE(matches(g, "[" + call + "]"));
  EXPECT_TRUE(matches(g, "[" + call + ", " + call + "]"));
  EXPECT_FALSE(matches(g, call));
}

TEST(ToolCall, MalformedSpecsAreRefused) {
  EXPECT_NE(compile_error(ConstraintKind::tool_call, "[]").find("'schema' is required"), std::string::npos);
  EXPECT_NE(compile_error(ConstraintKind::tool_call, R"({"schema": {}, "max_calls": 0})").find("max_calls"),
            std::string::npos);
  EXPECT_NE(compile_error(ConstraintKind::tool_call, R"({"schema": {}, "begin": 1})").find("'begin'"), std::string::npos);
  EXPECT_NE(compile_error(ConstraintKind::tool_call, R"({"schema": {"type": "object", "not": {}}})").find("not"),
            std::string::npos);
}

}  // namespace
}  // namespace tsr::constraints
