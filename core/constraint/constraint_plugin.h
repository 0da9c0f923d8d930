// The host's view of constraint plugins: a loaded plugin with the engine's vocabulary
// (ConstraintPlugin), one compiled constraint shared by requests (CompiledConstraint), and
// one request's matcher (ConstraintMatcher). Plugin failures become tsr::Error.
//
// Thread-safety follows constraint.h: compile() may run on any thread; a matcher is used
// by one thread at a time.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "core/constraint/token_vocab.h"
#include "core/plugin_host/plugin_loader.h"
#include "tessera/constraint.h"

namespace tsr {

class ConstraintMatcher;

// A constraint as a request carries it: kind (json_schema, json_object, regex, gbnf or a
// third-party plugin's kind) and text.
struct ConstraintSpec {
  std::string kind;
  std::string text;
};

class CompiledConstraint : public std::enable_shared_from_this<CompiledConstraint> {
 public:
  ~CompiledConstraint();
  CompiledConstraint(const CompiledConstraint&) = delete;
  CompiledConstraint& operator=(const CompiledConstraint&) = delete;

  std::unique_ptr<ConstraintMatcher> new_matcher();
  size_t mask_words() const { return mask_words_; }
  // The memory the grammar holds now (it grows as matchers fill its caches); 0 when the
  // plugin does not say (a plugin built for ABI 2.2 or earlier).
  size_t bytes() const;

 private:
  friend class ConstraintPlugin;
  friend class ConstraintMatcher;
  CompiledConstraint(std::shared_ptr<const class ConstraintPlugin> plugin, tsr_grammar* grammar,
                     size_t mask_words);
  std::shared_ptr<const ConstraintPlugin> plugin_;
  tsr_grammar* grammar_;
  size_t mask_words_;
};

class ConstraintMatcher {
 public:
  ~ConstraintMatcher();
  ConstraintMatcher(const ConstraintMatcher&) = delete;
  ConstraintMatcher& operator=(const ConstraintMatcher&) = delete;

  // mask_words() words; bit i set iff token i may come next.
  void fill_mask(std::span<uint32_t> mask);
  // Advances by one token; false (and no change) when the constraint forbids it.
  bool accept(int32_t token);
  void rollback(size_t n);
  std::unique_ptr<ConstraintMatcher> fork() const;
  bool is_terminated() const;
  bool can_terminate() const;
  size_t mask_words() const { return grammar_->mask_words(); }

 private:
  friend class CompiledConstraint;
  ConstraintMatcher(std::shared_ptr<CompiledConstraint> grammar, tsr_matcher* handle)
      : grammar_(std::move(grammar)), handle_(handle) {}
  const tsr_constraint_iface& iface() const;
  std::shared_ptr<CompiledConstraint> grammar_;
  tsr_matcher* handle_;
};

class ConstraintPlugin : public std::enable_shared_from_this<ConstraintPlugin> {
 public:
  // Creates the plugin's view of `vocab`. Throws tsr::Error naming the plugin.
  static std::shared_ptr<ConstraintPlugin> create(std::shared_ptr<Plugin> plugin,
                                                  const TokenVocab& vocab);
  ~ConstraintPlugin();
  ConstraintPlugin(const ConstraintPlugin&) = delete;
  ConstraintPlugin& operator=(const ConstraintPlugin&) = delete;

  const std::string& name() const { return name_; }
  const std::vector<std::string>& kinds() const { return kinds_; }
  bool serves(std::string_view kind) const;

  // Thread-safe. Throws tsr::Error with the plugin's message (naming the unsupported
  // feature) when the constraint does not compile. A plugin with ABI 2.3's
  // grammar_compile_limited polls `should_stop` while it works and gives up (throwing)
  // once it is true; an older plugin compiles to the end.
  std::shared_ptr<CompiledConstraint> compile(const ConstraintSpec& spec,
                                              const std::function<bool()>& should_stop = {}) const;

 private:
  friend class CompiledConstraint;
  friend class ConstraintMatcher;
  ConstraintPlugin(std::shared_ptr<Plugin> plugin, size_t mask_words);
  std::shared_ptr<Plugin> plugin_;  // keeps the library loaded while handles live
  const tsr_constraint_iface* iface_;
  tsr_constraint_vocab* vocab_ = nullptr;
  size_t mask_words_;
  std::string name_;
  std::vector<std::string> kinds_;
};

}  // namespace tsr
