// A thinking budget for models whose chat template has a reasoning block (Qwen3's and
// DeepSeek-R1's <think> ... </think>): once the block holds max_tokens generated tokens,
// the close marker is forced (as the template writes it, e.g. "\n</think>\n\n") and the
// model goes on with its answer, as vLLM's and SGLang's thinking budgets do. Only the
// first block counts; a block the model closes itself ends the budget's work.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace tsr {

struct ReasoningBudgetParams {
  int32_t max_tokens = 0;             // tokens the block may hold before it is closed
  std::string open = "<think>";       // the markers, as the output spells them (special
  std::string close = "</think>";     // tokens rendered)
  std::vector<int32_t> close_tokens;  // forced at the budget
  bool opened_by_prompt = false;      // the prompt ends inside an open block
};

class ReasoningBudget {
 public:
  explicit ReasoningBudget(ReasoningBudgetParams params);

  // The text of the token just generated (special tokens rendered); the tokens to force
  // next (once, when the budget is spent inside the block), else none.
  std::vector<int32_t> on_token(std::string_view piece);

 private:
  enum class State { BEFORE, INSIDE, CLOSING, DONE };
  ReasoningBudgetParams params_;
  State state_;
  int32_t inside_ = 0;  // tokens generated inside the block
  std::string window_;  // the output's last bytes, to find a marker split over tokens
};

}  // namespace tsr
