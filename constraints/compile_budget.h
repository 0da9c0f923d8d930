// The work budget of the compile running on this thread. Whoever compiles on behalf of a
// client (the constraint plugins, for the host's compile workers) installs one with a
// `should_stop` test (a deadline passed, the host shutting down); the compilers charge
// their loops to it, and every kPollUnits units of work it asks should_stop, throwing
// CompileStopped once that says yes. Without a budget installed (mask fills while
// matchers run, the library's tests) charging costs one thread-local read.
#pragma once

#include <cstddef>
#include <functional>

#include "constraints/errors.h"

namespace tsr::constraints {

// A compile given up because its budget ran out (as opposed to a constraint that is wrong).
class CompileStopped : public CompileError {
 public:
  CompileStopped() : CompileError("the constraint's compile was stopped: it ran out of its work budget") {}
};

// A token's worth of work past its own budget after the compile (CompiledGrammar's step
// budget): the grammar is too ambiguous at that point to serve.
class StepStopped : public CompileError {
 public:
  StepStopped()
      : CompileError("the constraint needs more work for one token than its budget allows (the grammar is too "
                     "ambiguous at this point); it is refused from here on") {}
};

class CompileBudget {
 public:
  // Installs itself on this thread until destroyed (budgets nest: the outer one returns).
  explicit CompileBudget(std::function<bool()> should_stop);
  ~CompileBudget();
  CompileBudget(const CompileBudget&) = delete;
  CompileBudget& operator=(const CompileBudget&) = delete;

  // Counts `units` of work (roughly: states created, stacks expanded, trie nodes walked)
  // against this thread's budget. Throws CompileStopped once should_stop says so.
  static void charge(size_t units);
  // Whether a budget is installed on this thread.
  static bool installed();

  // About a millisecond of the cheapest work between two polls.
  static constexpr size_t kPollUnits = size_t{1} << 16;

 private:
  std::function<bool()> should_stop_;
  size_t units_ = 0;
  CompileBudget* outer_;
};

}  // namespace tsr::constraints
