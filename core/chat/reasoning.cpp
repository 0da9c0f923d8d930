#include "core/chat/reasoning.h"

#include <algorithm>
#include <utility>

namespace tsr {

namespace {

constexpr std::string_view kSpace = " \t\r\n";

std::string_view trim_left(std::string_view s) {
  const size_t i = s.find_first_not_of(kSpace);
  return i == std::string_view::npos ? std::string_view() : s.substr(i);
}

std::string_view trim(std::string_view s) {
  s = trim_left(s);
  const size_t i = s.find_last_not_of(kSpace);
  return i == std::string_view::npos ? std::string_view() : s.substr(0, i + 1);
}

// Where `text` ends with a proper prefix of `marker`: its offset; else text.size().
size_t partial_at_end(std::string_view text, std::string_view marker) {
  for (size_t k = std::min(marker.size() - 1, text.size()); k > 0; --k) {
    if (text.ends_with(marker.substr(0, k))) return text.size() - k;
  }
  return text.size();
}

}  // namespace

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
  const size_t keep = partial_at_end(held_, kThinkClose);
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
