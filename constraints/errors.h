// The one error type of the constraint library: a grammar, regex or schema that cannot be
// compiled. The message names the unsupported feature and where it was found.
#pragma once

#include <stdexcept>
#include <string>

namespace tsr::constraints {

class CompileError : public std::runtime_error {
 public:
  explicit CompileError(const std::string& what) : std::runtime_error(what) {}
};

}  // namespace tsr::constraints
