#include "constraints/gbnf_match.h"

#include "constraints/internal/gbnf.h"
#include "constraints/recognizer.h"
#include "constraints/vocabulary.h"

namespace tsr::constraints {

struct GbnfMatcher::Impl {
  Grammar grammar;
  Vocabulary vocab;  // empty: no masks are ever computed
  TokenTrie trie{vocab};
  Recognizer recognizer{grammar, vocab, trie};

  explicit Impl(Grammar g) : grammar(std::move(g)) {}
};

GbnfMatcher::GbnfMatcher(const std::string& expr, const std::string& extra_rules)
    : impl_(std::make_unique<Impl>(parse_gbnf("root ::= " + expr + "\n" + extra_rules))) {}

GbnfMatcher::~GbnfMatcher() = default;
GbnfMatcher::GbnfMatcher(GbnfMatcher&&) noexcept = default;

bool GbnfMatcher::matches(std::string_view text) {
  Recognizer& r = impl_->recognizer;
  int32_t state = r.initial();
  for (char c : text) {
    state = r.step(state, static_cast<uint8_t>(c));
    if (state == Recognizer::kDead) return false;
  }
  return r.can_terminate(state);
}

}  // namespace tsr::constraints
