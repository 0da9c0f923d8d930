// Exact grammars for JSON numbers within decimal bounds (JSON Schema minimum / maximum /
// exclusive bounds on `number`): the integer part by digit-range expressions
// (integer_range.h), the fraction digit by digit against the bound's fraction.
//
// Exponent notation is allowed only where no bound can depend on it (a lower bound of 0
// and no upper bound, and the mirror for negative numbers); elsewhere numbers must be
// written positionally, which every serializer does for ordinary magnitudes. Negative
// zero ("-0", "-0.0") is not produced.
#pragma once

#include <optional>
#include <string>

namespace tsr::constraints {

struct NumberBound {
  std::string value;  // a JSON number as text, e.g. "-1.5", "1e-05", "100"
  bool exclusive = false;
};

// A GBNF expression; throws CompileError when no number lies in the range, or naming
// the bound when it has more digits than a grammar should spell out.
std::string number_range_gbnf(const std::optional<NumberBound>& lo, const std::optional<NumberBound>& hi);

}  // namespace tsr::constraints
