#include "constraints/compiled_grammar.h"

#include <algorithm>
#include <cstring>
#include <vector>

#include "constraints/compile_budget.h"
#include "constraints/errors.h"
#include "constraints/internal/gbnf.h"
#include "constraints/internal/json_schema.h"
#include "constraints/internal/tool_call.h"
#include "constraints/internal/regex.h"

namespace tsr::constraints {

CompiledGrammar::CompiledGrammar(Grammar grammar, std::shared_ptr<const Vocabulary> vocab,
                                 std::shared_ptr<const TokenTrie> trie)
    : grammar_(std::move(grammar)),
      vocab_(std::move(vocab)),
      trie_(std::move(trie)),
      recognizer_(grammar_, *vocab_, *trie_) {
  // A matcher starts in the initial state; with no state to start in, it could not run.
  if (recognizer_.initial() == Recognizer::kDead) throw CompileError("the grammar matches no text at all");
}

template <class F>
auto CompiledGrammar::bounded(F&& f) {
  if (poisoned_) throw StepStopped();
  if (CompileBudget::installed()) return f();
  size_t polls = 0;
  const size_t max_polls = std::max<size_t>(1, step_units_ / CompileBudget::kPollUnits);
  const CompileBudget budget([&polls, max_polls] { return ++polls >= max_polls; });
  try {
    return f();
  } catch (const CompileStopped&) {
    poisoned_ = true;
    throw StepStopped();
  }
}

void CompiledGrammar::set_step_units(size_t units) {
  std::lock_guard lock(mutex_);
  step_units_ = units;
}

int32_t CompiledGrammar::step_bytes(int32_t state, std::string_view bytes) {
  std::lock_guard lock(mutex_);
  return bounded([&] {
    for (char c : bytes) {
      state = recognizer_.step(state, static_cast<uint8_t>(c));
      if (state == Recognizer::kDead) break;
    }
    return state;
  });
}

bool CompiledGrammar::can_terminate(int32_t state) {
  std::lock_guard lock(mutex_);
  return bounded([&] { return recognizer_.can_terminate(state); });
}

void CompiledGrammar::fill_mask(int32_t state, uint32_t* bitmask) {
  std::lock_guard lock(mutex_);
  bounded([&] { std::memcpy(bitmask, recognizer_.mask(state), vocab_->mask_words() * sizeof(uint32_t)); });
}

size_t CompiledGrammar::bytes() const {
  std::lock_guard lock(mutex_);
  return sizeof(*this) + grammar_.bytes() + recognizer_.bytes();
}

std::shared_ptr<CompiledGrammar> compile(ConstraintKind kind, std::string_view text,
                                         std::shared_ptr<const Vocabulary> vocab,
                                         std::shared_ptr<const TokenTrie> trie) {
  std::string gbnf;
  switch (kind) {
    case ConstraintKind::gbnf: gbnf = std::string(text); break;
    case ConstraintKind::regex: gbnf = "root ::= " + regex_to_gbnf(text, RegexMode::full_match); break;
    case ConstraintKind::json_schema: gbnf = json_schema_to_gbnf(text); break;
    case ConstraintKind::json_object: gbnf = json_schema_to_gbnf(R"({"type": "object"})"); break;
    case ConstraintKind::tool_call: gbnf = tool_call_to_gbnf(text); break;
  }
  auto compiled = std::make_shared<CompiledGrammar>(parse_gbnf(gbnf), std::move(vocab), std::move(trie));
  std::vector<uint32_t> mask(compiled->vocab().mask_words());
  compiled->fill_mask(compiled->initial_state(), mask.data());
  return compiled;
}

}  // namespace tsr::constraints
