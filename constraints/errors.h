// The one error type of the constraint library: a grammar, regex or schema that cannot be
// compiled. The message names the unsupported feature and where it was found; messages
// about features this library does not implement (as opposed to malformed input) start
// with "unsupported".
#pragma once

#include <stdexcept>
#include <string>
#include <string_view>

namespace tsr::constraints {

class CompileError : public std::runtime_error {
 public:
  explicit CompileError(const std::string& what) : std::runtime_error(what) {}
  bool unsupported() const { return std::string_view(what()).starts_with("unsupported"); }
};

}  // namespace tsr::constraints
