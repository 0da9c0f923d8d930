#include "constraints/internal/regex.h"

#include <gtest/gtest.h>

#include "constraints/internal/test_support.h"

namespace tsr::constraints {
namespace {

using testing::compile_error;
using testing::compile_test;
using testing::matches;

std::shared_ptr<CompiledGrammar> re(const std::string& pattern) {
  return compile_test(ConstraintKind::regex, pattern);
}

// A pattern's invalid UTF-8 bytes stand for U+0080..U+00FF each; a lead byte followed by
// non-continuation bytes does not swallow them (fuzzer find: "\xf6\r\xe6\x01" decoded
// to one value past U+10FFFF, an empty language, and a matcher without a start state).
TEST(Regex, InvalidUtf8BytesAreLatin1CodePoints) {
  auto g = re("\xf6\r\xe6\x01");
  EXPECT_TRUE(matches(g, "\u00f6\r\u00e6\x01"));
  EXPECT_FALSE(matches(g, "\xf6\r\xe6\x01"));
  EXPECT_TRUE(matches(re("\xc0\x80"), "\u00c0\u0080"));    // overlong NUL
  EXPECT_TRUE(matches(re("\xed\xa0\x80"), "\u00ed\u00a0\u0080"));  // a surrogate
}

TEST(Regex, EmptyLanguageIsACompileError) {
  EXPECT_NE(compile_error(ConstraintKind::gbnf, "root ::= [^\\x00-\\U0010FFFF]").find("matches no text"),
            std::string::npos);
}

TEST(Regex, LiteralsClassesAndQuantifiers) {
  auto g = re(R"(\d{3}-\d{2,}[a-c]?x*)");
  EXPECT_TRUE(matches(g, "123-45"));
  EXPECT_TRUE(matches(g, "123-4567bxxx"));
  EXPECT_FALSE(matches(g, "12-45"));
  EXPECT_FALSE(matches(g, "123-4"));
  EXPECT_FALSE(matches(g, "123-45d"));
}

TEST(Regex, ShorthandsNegationsDotAndGroups) {
  auto g = re(R"(^(?:ab|cd)+\s\W[^\d\s]\w.$)");
  EXPECT_TRUE(matches(g, "abcd !x_\u00e9"));
  EXPECT_FALSE(matches(g, "abcd !1_z"));
  EXPECT_FALSE(matches(g, "abcd a x_z"));
  EXPECT_FALSE(matches(g, "abcd !x_\n"));
  EXPECT_FALSE(matches(g, "ab !x_"));
}

TEST(Regex, LiteralBraceAndEscapes) {
  auto g = re(R"(a{x}\.\u00e9\x41)");
  EXPECT_TRUE(matches(g, "a{x}.\u00e9A"));
  EXPECT_FALSE(matches(g, "a{x}a\u00e9A"));
}

TEST(Regex, UnsupportedFeaturesAreNamed) {
  EXPECT_NE(compile_error(ConstraintKind::regex, "a(?=b)").find("lookaround"), std::string::npos);
  EXPECT_NE(compile_error(ConstraintKind::regex, R"((a)\1)").find("backreference"), std::string::npos);
  EXPECT_NE(compile_error(ConstraintKind::regex, R"(\bword)").find("word boundary"), std::string::npos);
  EXPECT_NE(compile_error(ConstraintKind::regex, "a^b").find("anchor"), std::string::npos);
  EXPECT_NE(compile_error(ConstraintKind::regex, R"(\p{L})").find("property"), std::string::npos);
}

// As a JSON Schema pattern: search semantics over JSON-encoded string contents.
TEST(Regex, JsonStringSearchMode) {
  auto anchored = compile_test(ConstraintKind::gbnf, "root ::= " + regex_to_gbnf(R"(^[a"\\]+$)", RegexMode::json_string_search));
  EXPECT_TRUE(matches(anchored, R"(a\"\\a)"));
  EXPECT_FALSE(matches(anchored, R"(a")"));
  EXPECT_FALSE(matches(anchored, R"(ab)"));
  auto search = compile_test(ConstraintKind::gbnf, "root ::= " + regex_to_gbnf("b+c", RegexMode::json_string_search));
  EXPECT_TRUE(matches(search, "xxbbcyy"));
  EXPECT_TRUE(matches(search, R"(\n\"bc)"));
  EXPECT_FALSE(matches(search, "xxcb"));
  auto control = compile_test(ConstraintKind::gbnf, "root ::= " + regex_to_gbnf(R"(^\s$)", RegexMode::json_string_search));
  EXPECT_TRUE(matches(control, R"(\n)"));
  EXPECT_TRUE(matches(control, R"(\u000b)"));
  EXPECT_FALSE(matches(control, "\n"));
}

}  // namespace
}  // namespace tsr::constraints
