#include "core/chat/reasoning.h"

#include <algorithm>
#include <utility>

#include "core/chat/reply_text.h"

namespace tsr {

using reply_text::trim;
using reply_text::trim_left;

bool template_has_reasoning(std::string_view template_text) {
  return template_text.find(kThinkOpen) != std::string_view::npos &&
         template_text.find(kThinkClose) != std::string_view::npos;
}

bool prompt_opens_reasoning(std::string_view prompt_tail) { return trim(prompt_tail).ends_with(kThinkOpen); }

ReasoningSplit split_reasoning(std::string_view text, bool opened) {
  std::string_view t = trim_left(text);
  if (!opened && !t.starts_with(kThinkOpen)) return {"", std::string(text)};
  if (t.starts_with(kThinkOpen)) t.remove_prefix(kThinkOpen.size());
  const size_t close = t.find(kThinkClose);
  if (close == std::string_view::npos) return {std::string(trim(t)), ""};
  return {std::string(trim(t.substr(0, close))), std::string(trim_left(t.substr(close + kThinkClose.size())))};
}

ReasoningSplit ReasoningStream::push(std::string_view text) {
  held_ += text;
  ReasoningSplit out;
  if (closed_) {  // the block is over: the answer, less the white space that opens it
    out.content = answered_ ? std::exchange(held_, {}) : std::string(trim_left(std::exchange(held_, {})));
    answered_ = !out.content.empty();
    return out;
  }
  if (!inside_ && seen_text_) {  // there is no block
    out.content = std::exchange(held_, {});
    return out;
  }
  if (!inside_) {  // a reply may open with a block: wait for the first word
    const std::string_view t = trim_left(held_);
    if (t.empty() || (t.size() < kThinkOpen.size() && kThinkOpen.starts_with(t))) return out;
    if (!t.starts_with(kThinkOpen)) {
      seen_text_ = true;
      out.content = std::exchange(held_, {});
      return out;
    }
    held_ = std::string(t.substr(kThinkOpen.size()));
    inside_ = true;
  }
  const size_t close = held_.find(kThinkClose);
  if (close != std::string::npos) {
    out.reasoning = held_.substr(0, close);
    out.content = std::string(trim_left(std::string_view(held_).substr(close + kThinkClose.size())));
    answered_ = !out.content.empty();
    held_.clear();
    closed_ = true;
    inside_ = false;
    return out;
  }
  const size_t keep = reply_text::partial_marker(held_, kThinkClose);
  out.reasoning = held_.substr(0, keep);
  held_.erase(0, keep);
  return out;
}

ReasoningSplit ReasoningStream::finish() {
  ReasoningSplit out;
  (inside_ ? out.reasoning : out.content) = std::exchange(held_, {});
  return out;
}

}  // namespace tsr
