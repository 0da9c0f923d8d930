// Regular expressions (the ECMAScript subset JSON Schema `pattern` uses) → a GBNF
// expression. Supported: literals and escapes, classes with ranges and negation, \d \w \s
// and their negations, `.`, groups (capturing, (?:...), (?<name>...)), alternation,
// quantifiers * + ? {m} {m,} {m,n} (lazy forms match the same language), and anchors ^ $
// at the ends of top-level alternatives. Lookaround, backreferences, \b, \p{...} and
// anchors elsewhere are CompileErrors that name the feature.
#pragma once

#include <string>
#include <string_view>

namespace tsr::constraints {

enum class RegexMode {
  // The whole text must match; ^ and $ at the ends are redundant.
  full_match,
  // JSON Schema `pattern`: the expression describes the *contents of a JSON string* as
  // Python's json.dumps(ensure_ascii=False) writes them (" \ and control characters
  // escaped), and unanchored patterns may match anywhere (search semantics).
  json_string_search,
};

std::string regex_to_gbnf(std::string_view pattern, RegexMode mode);

}  // namespace tsr::constraints
