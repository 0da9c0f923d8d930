#include "server/body_precheck.h"

#include <gtest/gtest.h>

namespace tsr::server {
namespace {

TEST(BodyPrecheck, FindsTopLevelMembersAsWritten) {
  const std::string body = R"( { "model": "m", "nested": {"prompt": "inner", "a": [1, "}", {"b": 2}]},
    "stop": ["x", "y"], "prompt" : "hello \"you\"", "n": 2 } )";
  EXPECT_EQ(raw_member(body, "prompt"), R"("hello \"you\"")");
  EXPECT_EQ(raw_member(body, "nested"), R"({"prompt": "inner", "a": [1, "}", {"b": 2}]})");
  EXPECT_EQ(raw_member(body, "stop"), R"(["x", "y"])");
  EXPECT_EQ(raw_member(body, "n"), "2");
  EXPECT_EQ(raw_member(body, "absent"), std::nullopt);
  EXPECT_EQ(raw_member(R"({"pr\u006fmpt": "x"})", "prompt"), std::nullopt);  // escaped keys: left to the parser
  EXPECT_EQ(raw_member("[1, 2]", "prompt"), std::nullopt);
  EXPECT_EQ(raw_member(R"({"prompt" "x"})", "prompt"), std::nullopt);
  EXPECT_EQ(raw_member(R"({"prompt": "unterminated)", "prompt"), R"("unterminated)");
}

TEST(BodyPrecheck, DecodedBytesNeverOverestimated) {
  EXPECT_EQ(min_decoded_bytes(R"("hello")"), 5u);
  EXPECT_EQ(min_decoded_bytes(R"("\u0041\u0042")"), 2u);  // 12 raw bytes, 2 decoded
  EXPECT_LE(min_decoded_bytes(R"("a\nb")"), 3u);
  EXPECT_EQ(min_decoded_bytes(R"("")"), 0u);
}

}  // namespace
}  // namespace tsr::server
