#include "core/request/reasoning_budget.h"

#include <gtest/gtest.h>

namespace tsr {
namespace {

const std::vector<int32_t> kClose = {90, 91};

ReasoningBudget make(int32_t max_tokens, bool opened_by_prompt = false) {
  ReasoningBudgetParams p;
  p.max_tokens = max_tokens;
  p.close_tokens = kClose;
  p.opened_by_prompt = opened_by_prompt;
  return ReasoningBudget(p);
}

TEST(ReasoningBudget, TheBlockIsClosedAtTheBudget) {
  ReasoningBudget b = make(3);
  EXPECT_TRUE(b.on_token("Hi").empty()) << "outside a block nothing counts";
  EXPECT_TRUE(b.on_token("<think>").empty());
  EXPECT_TRUE(b.on_token("a").empty());
  EXPECT_TRUE(b.on_token("b").empty());
  EXPECT_EQ(b.on_token("c"), kClose);
  EXPECT_TRUE(b.on_token("\n</").empty());
  EXPECT_TRUE(b.on_token("think>").empty());
  EXPECT_TRUE(b.on_token("d").empty()) << "after the block nothing more is forced";
  EXPECT_TRUE(b.on_token("<think>").empty()) << "only the first block counts";
}

TEST(ReasoningBudget, AMarkerSplitOverTokensAndABlockOpenedByThePrompt) {
  ReasoningBudget b = make(2);
  EXPECT_TRUE(b.on_token("<thi").empty());
  EXPECT_TRUE(b.on_token("nk>").empty());
  EXPECT_TRUE(b.on_token("x").empty());
  EXPECT_EQ(b.on_token("y"), kClose);
  ReasoningBudget opened = make(1, true);
  EXPECT_EQ(opened.on_token("x"), kClose);
  ReasoningBudget closed_early = make(5, true);
  EXPECT_TRUE(closed_early.on_token("</think>").empty());
  for (int i = 0; i < 10; ++i) EXPECT_TRUE(closed_early.on_token("z").empty());
}

}  // namespace
}  // namespace tsr
