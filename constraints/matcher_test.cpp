#include "constraints/matcher.h"

#include <gtest/gtest.h>

#include "constraints/compile_budget.h"
#include "constraints/internal/gbnf.h"
#include "constraints/internal/regex.h"
#include "constraints/internal/test_support.h"

namespace tsr::constraints {
namespace {

using testing::compile_test;
using testing::kBos;
using testing::kEos;
using testing::mask_has;
using testing::tokenize;

TEST(Matcher, EosOnlyWhereTheGrammarCanEndAndSpecialsNever) {
  auto g = compile_test(ConstraintKind::gbnf, R"(root ::= "ab" "c"?)");
  Matcher m(g);
  std::vector<uint32_t> mask(g->vocab().mask_words());
  m.fill_mask(mask.data());
  EXPECT_FALSE(mask_has(mask, kEos));
  EXPECT_FALSE(mask_has(mask, kBos));
  EXPECT_FALSE(m.accept(kEos));
  ASSERT_TRUE(m.accept_bytes("ab"));
  m.fill_mask(mask.data());
  EXPECT_TRUE(mask_has(mask, kEos));
  EXPECT_FALSE(m.accept(kBos));
  EXPECT_TRUE(m.accept(kEos));
  EXPECT_TRUE(m.is_terminated());
  EXPECT_FALSE(m.accept(kEos));
  m.fill_mask(mask.data());
  for (uint32_t w : mask) EXPECT_EQ(w, 0u);
}

TEST(Matcher, PartialUtf8Tokens) {
  auto g = compile_test(ConstraintKind::gbnf, "root ::= \"\u00e9\\\"\" | [\u65e5] [\u672c]");
  Matcher m(g);
  EXPECT_TRUE(m.accept(tokenize("\xC3")[0]));
  EXPECT_TRUE(m.accept(tokenize("\xA9\"")[0]));
  EXPECT_TRUE(m.can_terminate());
  Matcher k(g);
  EXPECT_TRUE(k.accept(tokenize("\xE6\x97")[0]));
  testing::expect_mask_consistent(k);
  EXPECT_TRUE(k.accept(tokenize("\xA5\xE6\x9C\xAC")[0]));
  EXPECT_TRUE(k.can_terminate());
}

TEST(Matcher, RollbackAndForkReproduceStates) {
  auto g = compile_test(ConstraintKind::json_schema,
                        R"({"type": "object", "properties": {"a": {"type": "array", "items": {"type": "integer"}}}})");
  std::vector<int32_t> ids = tokenize(R"({"a": [12, -1, 3]})");
  Matcher m(g);
  std::vector<std::vector<uint32_t>> masks;
  for (int32_t id : ids) {
    masks.emplace_back(g->vocab().mask_words());
    m.fill_mask(masks.back().data());
    ASSERT_TRUE(m.accept(id));
  }
  EXPECT_TRUE(m.can_terminate());
  Matcher f = m.fork();
  ASSERT_TRUE(f.rollback(3));
  EXPECT_EQ(f.steps(), ids.size() - 3);
  std::vector<uint32_t> mask(g->vocab().mask_words());
  f.fill_mask(mask.data());
  EXPECT_EQ(mask, masks[ids.size() - 3]);
  EXPECT_TRUE(m.can_terminate());  // the fork leaves the original alone
  for (size_t i = ids.size() - 3; i < ids.size(); ++i) ASSERT_TRUE(f.accept(ids[i]));
  EXPECT_TRUE(f.can_terminate());
  EXPECT_FALSE(f.rollback(100));  // more than was accepted: refused, nothing changes
  EXPECT_EQ(f.steps(), ids.size());
  EXPECT_TRUE(f.rollback(ids.size()));
  EXPECT_EQ(f.steps(), 0u);
}

TEST(Matcher, ForcedBytesStopWhereChoiceOrEndBegins) {
  auto g = compile_test(ConstraintKind::gbnf, R"(root ::= "{\"name\": " [0-9]+ "}" | "{\"nam" [x])");
  Matcher m(g);
  EXPECT_EQ(m.forced_bytes(100), "{\"nam");  // then 'e' or 'x'
  EXPECT_EQ(m.forced_bytes(3), "{\"n");
  ASSERT_TRUE(m.accept_bytes("{\"name"));
  EXPECT_EQ(m.forced_bytes(100), "\": ");
  ASSERT_TRUE(m.accept_bytes("\": 1"));
  EXPECT_EQ(m.forced_bytes(100), "");  // a digit or '}'
  ASSERT_TRUE(m.accept_bytes("}"));
  EXPECT_EQ(m.forced_bytes(100), "");  // complete
  EXPECT_EQ(m.steps(), 3u);
}

TEST(Matcher, RejectedTokenLeavesStateUnchanged) {
  auto g = compile_test(ConstraintKind::regex, "ab+");
  Matcher m(g);
  EXPECT_FALSE(m.accept(tokenize("b")[0]));
  EXPECT_EQ(m.steps(), 0u);
  EXPECT_TRUE(m.accept(tokenize("ab")[0]));
  EXPECT_FALSE(m.accept(tokenize("abc")[0]));
  EXPECT_TRUE(m.can_terminate());
}

}  // namespace
}  // namespace tsr::constraints
namespace tsr::constraints {
namespace {

// (.*){100}: its first mask expands about 55 polls' worth of stacks (3.6M units). Outside a
// compile, a call past the grammar's step budget throws StepStopped and poisons the grammar
// (its caches may hold the interrupted work): every later call throws too, never a mask
// that lets anything through. Within a compile's budget, that budget alone counts.
TEST(CompiledGrammarStepBudget, AStepPastItFailsAndPoisonsTheGrammar) {
  auto vocab = testing::synthetic_vocab();
  auto trie = std::make_shared<const TokenTrie>(*vocab);
  const auto grammar = [&] {
    return std::make_shared<CompiledGrammar>(parse_gbnf("root ::= " + regex_to_gbnf("(.*){100}", RegexMode::full_match)),
                                             vocab, trie);
  };
  std::vector<uint32_t> mask(vocab->mask_words());
  auto fits = grammar();  // the default budget (2^26 units) holds it
  fits->fill_mask(fits->initial_state(), mask.data());
  EXPECT_TRUE(testing::mask_has(mask, testing::tokenize("a")[0]));
  auto big = grammar();
  big->set_step_units(CompileBudget::kPollUnits);
  EXPECT_THROW(big->fill_mask(big->initial_state(), mask.data()), StepStopped);
  big->set_step_units(CompiledGrammar::kStepUnits);
  EXPECT_THROW(big->fill_mask(big->initial_state(), mask.data()), StepStopped);
  EXPECT_THROW(big->step_bytes(big->initial_state(), "a"), StepStopped);
  EXPECT_THROW(Matcher(big).can_terminate(), StepStopped);
  auto within = grammar();
  within->set_step_units(CompileBudget::kPollUnits);
  {
    const CompileBudget compile_budget([] { return false; });
    within->fill_mask(within->initial_state(), mask.data());
  }
  EXPECT_TRUE(testing::mask_has(mask, testing::tokenize("a")[0]));
}

}  // namespace
}  // namespace tsr::constraints
