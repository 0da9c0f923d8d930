#include "core/chat/reasoning.h"

#include <gtest/gtest.h>

#include <vector>

namespace tsr {
namespace {

TEST(Reasoning, RepliesSplitAtTheClosingMarker) {
  ReasoningSplit s = split_reasoning("<think>\nLet me see.\n</think>\n\nIt is 4.", false);
  EXPECT_EQ(s.reasoning, "Let me see.");
  EXPECT_EQ(s.content, "It is 4.");
  s = split_reasoning("Still thinking\n</think>\n\nDone", true);  // the prompt opened the block
  EXPECT_EQ(s.reasoning, "Still thinking");
  EXPECT_EQ(s.content, "Done");
  s = split_reasoning("<think>cut off", false);
  EXPECT_EQ(s.reasoning, "cut off");
  EXPECT_EQ(s.content, "");
  s = split_reasoning("No block at all.", false);
  EXPECT_EQ(s.reasoning, "");
  EXPECT_EQ(s.content, "No block at all.");
  EXPECT_TRUE(template_has_reasoning("{{ '<think>' }}...{{ '</think>' }}"));
  EXPECT_FALSE(template_has_reasoning("<|im_start|>"));
  EXPECT_TRUE(prompt_opens_reasoning("<|im_start|>assistant\n<think>\n"));
}

// Streamed in pieces that split the markers, the parts add up to the whole split.
TEST(Reasoning, StreamedPiecesAddUpToTheWholeSplit) {
  const std::vector<std::string> pieces = {"<th", "ink>\nLet me", " see.\n</th", "ink>", "\n\n", "It is", " 4."};
  ReasoningStream stream(false);
  std::string reasoning, content;
  for (const std::string& p : pieces) {
    const ReasoningSplit s = stream.push(p);
    reasoning += s.reasoning;
    content += s.content;
  }
  const ReasoningSplit rest = stream.finish();
  reasoning += rest.reasoning;
  content += rest.content;
  EXPECT_EQ(reasoning, "\nLet me see.\n");
  EXPECT_EQ(content, "It is 4.");
  ReasoningStream plain(false);
  EXPECT_EQ(plain.push("Hello").content, "Hello");
  EXPECT_EQ(plain.push(" <think>").content, " <think>") << "a block opens a reply only";
}

}  // namespace
}  // namespace tsr
