#include "constraints/internal/gbnf.h"

#include <gtest/gtest.h>

#include "constraints/internal/test_support.h"

namespace tsr::constraints {
namespace {

using testing::compile_error;
using testing::compile_test;
using testing::matches;

TEST(Gbnf, LiteralsAlternationAndGroups) {
  auto g = compile_test(ConstraintKind::gbnf, R"(root ::= "ab" ( "c" | 'd' ) | "x")");
  EXPECT_TRUE(matches(g, "abc"));
  EXPECT_TRUE(matches(g, "abd"));
  EXPECT_TRUE(matches(g, "x"));
  EXPECT_FALSE(matches(g, "ab"));
  EXPECT_FALSE(matches(g, "abcx"));
}

TEST(Gbnf, RepetitionOperators) {
  auto g = compile_test(ConstraintKind::gbnf, R"(root ::= "a"* "b"+ "c"? [0-9]{2,3} "z"{2,} "q"{1})");
  EXPECT_TRUE(matches(g, "b12zzq"));
  EXPECT_TRUE(matches(g, "aaabbc123zzzq"));
  EXPECT_FALSE(matches(g, "b1zzq"));
  EXPECT_FALSE(matches(g, "b1234zzq"));
  EXPECT_FALSE(matches(g, "b12zq"));
  EXPECT_FALSE(matches(g, "12zzq"));
}

TEST(Gbnf, ClassesRangesNegationAndEscapes) {
  auto g = compile_test(ConstraintKind::gbnf, R"(root ::= [a-cX\-] [^a-z\n] "\x41\u00e9\t" [\u65e5-\u65e6] .)");
  EXPECT_TRUE(matches(g, "-!A\u00e9\t\u65e5z"));
  EXPECT_TRUE(matches(g, "bQA\u00e9\t\u65e6\u00e9"));
  EXPECT_FALSE(matches(g, "dQA\u00e9\t\u65e5z"));
  EXPECT_FALSE(matches(g, "bqA\u00e9\t\u65e5z"));
  EXPECT_FALSE(matches(g, "b\nA\u00e9\t\u65e5z"));
  EXPECT_FALSE(matches(g, "bQA\u00e9\t\u672cz"));
}

TEST(Gbnf, CommentsMultiLineRulesAndRecursion) {
  auto g = compile_test(ConstraintKind::gbnf, R"g(
# balanced parentheses
root ::= item*   # trailing comment
item ::=
    "(" root ")"
  | "x"
)g");
  EXPECT_TRUE(matches(g, ""));
  EXPECT_TRUE(matches(g, "(x(x))x"));
  EXPECT_FALSE(matches(g, "(x"));
  EXPECT_FALSE(matches(g, "x)"));
}

TEST(Gbnf, ErrorsNameTheProblem) {
  EXPECT_NE(compile_error(ConstraintKind::gbnf, "root ::= foo").find("undefined rule 'foo'"), std::string::npos);
  EXPECT_NE(compile_error(ConstraintKind::gbnf, "root ::= root \"a\" | \"b\"").find("left recursion"), std::string::npos);
  EXPECT_NE(compile_error(ConstraintKind::gbnf, "root ::= \"a\"\nx ::= [a-").find("GBNF 2:"), std::string::npos);
  EXPECT_NE(compile_error(ConstraintKind::gbnf, "x ::= \"a\"").find("no 'root' rule"), std::string::npos);
}

TEST(Gbnf, LiteralAndClassPrintersRoundTrip) {
  CodepointSet set('a', 'c');
  set.add('"', '"');
  set.add(0x1F600, 0x1F600);
  auto g = compile_test(ConstraintKind::gbnf, "root ::= " + gbnf_literal("q\"\\\n\u00e9") + " " + gbnf_class(set));
  EXPECT_TRUE(matches(g, "q\"\\\n\u00e9\""));
  EXPECT_TRUE(matches(g, "q\"\\\n\u00e9\U0001F600"));
  EXPECT_FALSE(matches(g, "q\"\\\n\u00e9d"));
}

}  // namespace
}  // namespace tsr::constraints
