// Reasoning blocks of thinking models (<think> ... </think>: Qwen3, DeepSeek-R1): whether a
// chat template has one, and a reply split into reasoning_content and content, whole or as
// it streams (vLLM's reasoning parsers' split).
#pragma once

#include <string>
#include <string_view>

namespace tsr {

inline constexpr std::string_view kThinkOpen = "<think>", kThinkClose = "</think>";

// The template writes or expects <think> blocks.
bool template_has_reasoning(std::string_view template_text);
// The rendered prompt ends inside an open block (a template that opens it for the model).
bool prompt_opens_reasoning(std::string_view prompt_tail);

struct ReasoningSplit {
  std::string reasoning;  // the block's text, markers and surrounding white space removed
  std::string content;    // what follows the block (leading white space removed)
};

// A reply with a closed block splits at </think>; one whose block is still open (cut off)
// is all reasoning; one without a block is all content. `opened`: the prompt opened it.
ReasoningSplit split_reasoning(std::string_view text, bool opened);

// One streamed reply: each increment's reasoning and content parts. A marker split over
// increments is held back until it is whole.
class ReasoningStream {
 public:
  explicit ReasoningStream(bool opened) : inside_(opened), opened_(opened) {}
  ReasoningSplit push(std::string_view text);
  ReasoningSplit finish();  // what was held back

 private:
  bool inside_, opened_;
  bool closed_ = false;        // the block ended: the rest is content
  bool answered_ = false;      // content after the block began (white space before it is dropped)
  bool seen_text_ = false;     // something other than white space came outside a block
  std::string held_;
};

}  // namespace tsr
