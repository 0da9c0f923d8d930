// The constraint plugins (json_schema, regex, gbnf) as thin adapters over this library:
// ConstraintPlugin<LibraryConstraint<kinds>> fills the ABI table; each plugin names the
// kinds it serves. Header-only, for plugin targets (which link tessera_sdk).
#pragma once

#include <functional>
#include <memory>
#include <span>
#include <string_view>

#include "constraints/compile_budget.h"
#include "constraints/compiled_grammar.h"
#include "constraints/errors.h"
#include "constraints/matcher.h"
#include "tessera/sdk/constraint.hpp"

namespace tsr::constraints {

struct PluginVocab {
  std::shared_ptr<const Vocabulary> vocab;
  std::shared_ptr<const TokenTrie> trie;
};

// A step past its work budget (CompiledGrammar) fails the call, and with it the request,
// with the library's message.
template <class F>
auto step_checked(F&& f) {
  try {
    return f();
  } catch (const StepStopped& e) {
    throw sdk::Failure(TSR_STATUS_CANCELLED, e.what());
  }
}

// A Matcher with the SDK's calling conventions.
class PluginMatcher {
 public:
  explicit PluginMatcher(std::shared_ptr<CompiledGrammar> g) : m_(std::move(g)) {}
  void fill_mask(std::span<uint32_t> words) {
    step_checked([&] { m_.fill_mask(words.data()); });
  }
  bool accept(int32_t token) {
    return step_checked([&] { return m_.accept(token); });
  }
  bool rollback(size_t n) { return m_.rollback(n); }
  bool is_terminated() const { return m_.is_terminated(); }
  bool can_terminate() const {
    return step_checked([&] { return m_.can_terminate(); });
  }
  size_t forced_bytes(std::span<char> buf) {
    const std::string forced = step_checked([&] { return m_.forced_bytes(buf.size()); });
    std::copy(forced.begin(), forced.end(), buf.begin());
    return forced.size();
  }

 private:
  Matcher m_;
};

inline ConstraintKind constraint_kind(std::string_view kind) {
  if (kind == "json_schema") return ConstraintKind::json_schema;
  if (kind == "json_object") return ConstraintKind::json_object;
  if (kind == "regex") return ConstraintKind::regex;
  if (kind == "tool_call") return ConstraintKind::tool_call;
  return ConstraintKind::gbnf;
}

template <const char* Kinds>
struct LibraryConstraint {
  static constexpr const char* kKinds = Kinds;
  using Vocab = PluginVocab;
  using Grammar = CompiledGrammar;
  using Matcher = PluginMatcher;

  static std::shared_ptr<Vocab> vocab_create(const tsr_vocab_desc& desc) {
    auto vocab = std::make_shared<const Vocabulary>(vocabulary_from_desc(desc));
    auto trie = std::make_shared<const TokenTrie>(*vocab);
    return std::make_shared<Vocab>(Vocab{std::move(vocab), std::move(trie)});
  }

  static std::shared_ptr<Grammar> compile(const std::shared_ptr<Vocab>& v, std::string_view kind,
                                          std::string_view text) {
    try {
      return tsr::constraints::compile(constraint_kind(kind), text, v->vocab, v->trie);
    } catch (const CompileStopped& e) {
      throw sdk::Failure(TSR_STATUS_CANCELLED, e.what());
    } catch (const CompileError& e) {
      throw sdk::Failure(e.unsupported() ? TSR_STATUS_UNSUPPORTED : TSR_STATUS_INVALID_ARGUMENT,
                         e.what());
    }
  }

  // Under the host's limits: the compilers charge their work to a budget that asks
  // should_stop (compile_budget.h).
  static std::shared_ptr<Grammar> compile(const std::shared_ptr<Vocab>& v, std::string_view kind,
                                          std::string_view text,
                                          const std::function<bool()>& should_stop) {
    const CompileBudget budget(should_stop);
    return compile(v, kind, text);
  }

  static Matcher matcher_create(const std::shared_ptr<Grammar>& g) { return Matcher(g); }
};

}  // namespace tsr::constraints
