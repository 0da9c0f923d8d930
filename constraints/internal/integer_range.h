// Exact grammars for decimal integers within bounds (JSON Schema minimum/maximum on
// integers): digit-by-digit range expressions, as regex generators for numeric ranges do.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

namespace tsr::constraints {

// A GBNF expression for the integers in [lo, hi] (either side may be open) written as
// JSON writes them: no leading zeros, no "+", no "-0". Throws CompileError when empty.
// Digit strings (no leading zeros; "0" itself allowed) for the magnitudes in [lo, hi],
// both given as such digit strings; hi absent: unbounded. "[]" when empty.
std::string magnitude_range_gbnf(const std::string& lo, const std::optional<std::string>& hi);

std::string integer_range_gbnf(std::optional<int64_t> lo, std::optional<int64_t> hi);

}  // namespace tsr::constraints
