#include "constraints/matcher.h"

#include <algorithm>
#include <cstring>

namespace tsr::constraints {

Matcher::Matcher(std::shared_ptr<CompiledGrammar> grammar)
    : grammar_(std::move(grammar)), history_{grammar_->initial_state()} {}

void Matcher::fill_mask(uint32_t* bitmask) const {
  if (is_terminated()) {
    std::memset(bitmask, 0, grammar_->vocab().mask_words() * sizeof(uint32_t));
    return;
  }
  grammar_->fill_mask(history_.back(), bitmask);
}

bool Matcher::is_eos(int32_t token) const {
  const std::vector<int32_t>& eos = grammar_->vocab().eos_ids;
  return std::find(eos.begin(), eos.end(), token) != eos.end();
}

bool Matcher::accept(int32_t token) {
  const Vocabulary& vocab = grammar_->vocab();
  if (is_terminated() || token < 0 || static_cast<size_t>(token) >= vocab.size()) return false;
  if (is_eos(token)) {
    if (!can_terminate()) return false;
    history_.push_back(kTerminated);
    return true;
  }
  if (vocab.special[token] || vocab.bytes[token].empty()) return false;
  return accept_bytes(vocab.bytes[token]);
}

bool Matcher::accept_bytes(std::string_view bytes) {
  if (is_terminated()) return false;
  int32_t next = grammar_->step_bytes(history_.back(), bytes);
  if (next == Recognizer::kDead) return false;
  history_.push_back(next);
  return true;
}

bool Matcher::rollback(size_t n) {
  if (n > steps()) return false;
  history_.resize(history_.size() - n);
  return true;
}

std::string Matcher::forced_bytes(size_t max) const {
  std::string out;
  if (is_terminated()) return out;
  int32_t state = history_.back();
  while (out.size() < max && !grammar_->can_terminate(state)) {
    int32_t next = Recognizer::kDead;
    int alive = 0;
    uint8_t only = 0;
    for (int b = 0; b < 256 && alive < 2; ++b) {
      const char c = static_cast<char>(b);
      const int32_t s = grammar_->step_bytes(state, std::string_view(&c, 1));
      if (s == Recognizer::kDead) continue;
      ++alive;
      next = s;
      only = static_cast<uint8_t>(b);
    }
    if (alive != 1) break;
    out.push_back(static_cast<char>(only));
    state = next;
  }
  return out;
}

bool Matcher::can_terminate() const {
  return !is_terminated() && grammar_->can_terminate(history_.back());
}

}  // namespace tsr::constraints
