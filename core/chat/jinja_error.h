// Error reporting of the Jinja interpreter. Every error reaches callers as tsr::Error;
// the message names the template line and column where that is known.
#pragma once

#include <stdexcept>
#include <string>

#include "base/error.h"

namespace tsr::jinja {

struct Pos {
  int line = 1, column = 1;
};

// Thrown by filters, tests, methods and functions, which do not know where in the
// template they were called; the renderer turns it into a positioned tsr::Error.
class BuiltinError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

[[noreturn]] inline void fail_at(Pos pos, const std::string& message) {
  throw Error("chat template line " + std::to_string(pos.line) + ", column " +
              std::to_string(pos.column) + ": " + message);
}

// Nesting limits: templates are untrusted input and must not overflow the stack.
inline constexpr int kMaxNesting = 128;

}  // namespace tsr::jinja
