// The thinking budget end to end on stories260K's greedy text, with its words standing in
// for the markers: " there" opens the block and " named" closes it. With a budget of 3 the
// block holds " was a little", then " named" is forced (SentencePiece's "named" with its
// space prefix) and the model answers on from it.
#include <gtest/gtest.h>

#include "core/engine/engine.h"
#include "tests/common/engine_runs.h"
#include "tests/common/shared_data.h"

namespace tsr {
namespace {

constexpr const char* kModel = "models/stories260K.gguf";

TEST(ThinkingBudget, TheBlockClosesAtTheBudgetAndTheAnswerFollows) {
  TSR_REQUIRE_SHARED(kModel);
  Config c;
  c.model.path = testing::shared_path(kModel);
  c.plugin_dir = TESSERA_PLUGIN_DIR;
  c.backend.threads = 1;
  auto engine = Engine::create(c);
  const std::vector<int32_t> prompt = engine->tokenize("Once upon a time");
  const GenerateResult free = engine->generate(testing::greedy_request(prompt, 24));
  ASSERT_EQ(free.text.rfind(", there was a little girl named", 0), 0u) << free.text;

  RequestParams p = testing::greedy_request(prompt, 24);
  p.reasoning_budget = ReasoningBudgetParams{3, " there", " named", engine->tokenizer().encode("named", false, false), false};
  const GenerateResult budgeted = engine->generate(p);
  EXPECT_EQ(budgeted.text.rfind(", there was a little named", 0), 0u) << budgeted.text;
  EXPECT_GT(budgeted.text.size(), std::string(", there was a little named").size()) << "the answer goes on";

  p.reasoning_budget->max_tokens = 7;  // the model closes the block itself: " was a little g ir l" is 6
  EXPECT_EQ(engine->generate(p).tokens, free.tokens);

  Config spec = c;  // speculation: the forced token takes the draw's place and rejects the drafts
  spec.speculative.method = "ngram";
  auto drafting = Engine::create(spec);
  p.reasoning_budget->max_tokens = 3;
  EXPECT_EQ(drafting->generate(p).tokens, budgeted.tokens);
}

}  // namespace
}  // namespace tsr
