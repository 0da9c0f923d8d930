// One request's position in a compiled grammar: token masks, accepting tokens, rolling
// back (speculative decoding) and forking (beam search, n > 1).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "constraints/compiled_grammar.h"

namespace tsr::constraints {

class Matcher {
 public:
  explicit Matcher(std::shared_ptr<CompiledGrammar> grammar);

  // Sets bit i of `bitmask` (vocab().mask_words() words) iff token i may come next.
  void fill_mask(uint32_t* bitmask) const;
  // Advances by one token; false (and no change) when the token is not allowed.
  bool accept(int32_t token);
  // Advances by raw bytes as one step; false (and no change) when they are not allowed.
  bool accept_bytes(std::string_view bytes);
  // Undoes the last n accepted steps; false (and no change) when fewer were taken.
  bool rollback(size_t n);
  // The bytes every continuation starts with (up to `max`), stopping where the output may
  // end or more than one byte could follow: jump-forward decoding's forced text.
  std::string forced_bytes(size_t max) const;
  Matcher fork() const { return *this; }

  // EOS was accepted.
  bool is_terminated() const { return history_.back() == kTerminated; }
  // The output so far is a complete sentence of the grammar.
  bool can_terminate() const;
  size_t steps() const { return history_.size() - 1; }

 private:
  static constexpr int32_t kTerminated = -3;

  bool is_eos(int32_t token) const;

  std::shared_ptr<CompiledGrammar> grammar_;
  std::vector<int32_t> history_;  // recognizer state after each step; [0] the start
};

}  // namespace tsr::constraints
