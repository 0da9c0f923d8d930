// A grammar compiled for one vocabulary: immutable grammar and token trie plus the
// recognizer's caches, which every matcher of this grammar shares (a mask computed for
// one request is reused by the next). Thread-safe: the caches sit behind a mutex.
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <string_view>

#include "constraints/grammar.h"
#include "constraints/recognizer.h"
#include "constraints/vocabulary.h"

namespace tsr::constraints {

enum class ConstraintKind { gbnf, regex, json_schema, json_object, tool_call };

class CompiledGrammar {
 public:
  CompiledGrammar(Grammar grammar, std::shared_ptr<const Vocabulary> vocab,
                  std::shared_ptr<const TokenTrie> trie);

  const Vocabulary& vocab() const { return *vocab_; }

  // Each call locks the caches once; all recognizer access goes through these. Outside a
  // compile (which charges its own budget), each call runs under a step budget of
  // step_units of work (about a second of the cheapest; counted, not timed, so that a
  // grammar fares alike on every machine and build): past it the call throws StepStopped
  // and the grammar is poisoned, every later call throwing it too, since the recognizer's
  // caches may hold the interrupted work half done. A grammar too ambiguous somewhere thus
  // fails the requests that reach that point, and never fails open.
  int32_t initial_state() const { return recognizer_.initial(); }
  int32_t step_bytes(int32_t state, std::string_view bytes);
  bool can_terminate(int32_t state);
  void fill_mask(int32_t state, uint32_t* bitmask);
  static constexpr size_t kStepUnits = size_t{1} << 26;
  void set_step_units(size_t units);
  // The heap memory this grammar holds now, its caches included but not the vocabulary
  // and trie it shares.
  size_t bytes() const;

 private:
  Grammar grammar_;
  std::shared_ptr<const Vocabulary> vocab_;
  std::shared_ptr<const TokenTrie> trie_;
  // Runs f (under mutex_) within the step budget unless a compile's budget is installed.
  template <class F>
  auto bounded(F&& f);

  mutable std::mutex mutex_;
  Recognizer recognizer_;
  size_t step_units_ = kStepUnits;
  bool poisoned_ = false;
};

// Compiles a GBNF grammar, a regex (whole-output match), a JSON Schema (JSON text),
// for json_object any JSON object (`text` ignored), or function calls (tool_call: a spec
// as internal/tool_call.h describes). Throws CompileError naming the
// unsupported feature, or for a grammar whose language is empty. The initial state's mask
// is computed here, within the compile's budget (compile_budget.h), so that a grammar
// whose masks cost too much fails to compile rather than stalling a request's first step.
std::shared_ptr<CompiledGrammar> compile(ConstraintKind kind, std::string_view text,
                                         std::shared_ptr<const Vocabulary> vocab,
                                         std::shared_ptr<const TokenTrie> trie);

}  // namespace tsr::constraints
