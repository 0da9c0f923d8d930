#include "constraints/recognizer.h"

#include <gtest/gtest.h>

#include "constraints/internal/gbnf.h"
#include "constraints/internal/test_support.h"

namespace tsr::constraints {
namespace {

using testing::compile_test;
using testing::matches;

// Right recursion through a call in tail position keeps the stack (and the number of
// configurations) bounded.
TEST(Recognizer, TailCallsPushNoFrame) {
  Grammar g = parse_gbnf(R"(root ::= "a" root | "b")");
  auto vocab = testing::synthetic_vocab();
  TokenTrie trie(*vocab);
  Recognizer r(g, *vocab, trie);
  int32_t s = r.initial();
  for (int i = 0; i < 1000; ++i) s = r.step(s, 'a');
  s = r.step(s, 'b');
  ASSERT_NE(s, Recognizer::kDead);
  EXPECT_TRUE(r.can_terminate(s));
  EXPECT_LT(r.n_states(), 10u);
}

// Masks inside long length-bounded strings share the middle positions' walks and walk
// only the longer tokens near both ends; every mask must still be exact.
TEST(Recognizer, LengthBoundedStringMasksAreExact) {
  auto g = compile_test(ConstraintKind::json_schema, R"({"type": "string", "minLength": 20, "maxLength": 40})");
  for (size_t n : {0, 19, 20, 21, 30, 39, 40, 41}) {
    std::string body;
    for (size_t i = 0; i < n; ++i) body += i % 7 == 3 ? "\\\"" : std::string(1, "abc 12"[i % 6]);
    EXPECT_EQ(matches(g, "\"" + body + "\""), n >= 20 && n <= 40) << n;
  }
  auto keys = compile_test(ConstraintKind::json_schema, R"({"type": "object", "properties": {"abc": {"type": "string", "maxLength": 30}},
                                                            "additionalProperties": {"type": "string", "minLength": 17}})");
  EXPECT_TRUE(matches(keys, R"({"abc": "12345678901234567890", "ab": "12345678901234567"})"));
  EXPECT_FALSE(matches(keys, R"({"abc": "1234567890123456789012345678901"})"));
  EXPECT_FALSE(matches(keys, R"({"abd": "1234567890123456"})"));
}

// Portions recur across grammars (the inside of a string) and come from a cache shared
// through the trie: masks of interleaved grammars stay exact.
TEST(Recognizer, PortionsSharedAcrossGrammarsStayExact) {
  auto a = compile_test(ConstraintKind::json_schema, R"({"type": "object", "properties": {"x": {"type": "string"}}})");
  auto b = compile_test(ConstraintKind::json_schema, R"({"type": "array", "items": {"type": "string", "maxLength": 3}})");
  EXPECT_TRUE(matches(a, R"({"x": "ab\"c", "y": "ab"})"));
  EXPECT_TRUE(matches(b, R"(["ab", "\u00e9"])"));
  EXPECT_FALSE(matches(b, R"(["abcd"])"));
  EXPECT_TRUE(matches(a, R"({"x": "]}"})"));
}

}  // namespace
}  // namespace tsr::constraints
