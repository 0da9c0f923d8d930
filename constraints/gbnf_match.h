// Whole-text membership in a GBNF expression, without a vocabulary: lets compile-time
// code (the schema validator that filters enum values) check a string against the same
// pattern and format grammars the generated grammar uses, so both always agree.
#pragma once

#include <memory>
#include <string>
#include <string_view>

#include "constraints/grammar.h"

namespace tsr::constraints {

class GbnfMatcher {
 public:
  // Throws CompileError when `expr` (with the base rules it names) does not compile.
  GbnfMatcher(const std::string& expr, const std::string& extra_rules = "");
  ~GbnfMatcher();
  GbnfMatcher(GbnfMatcher&&) noexcept;

  bool matches(std::string_view text);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace tsr::constraints
