// How characters appear inside JSON strings as Python's json.dumps(ensure_ascii=False)
// writes them: `"` and `\` and control characters escaped, everything else raw.
#pragma once

#include <string>

#include "constraints/codepoint_set.h"

namespace tsr::constraints {

// A GBNF expression for one string character from `set`, in its JSON-encoded form.
std::string json_chars_gbnf(const CodepointSet& set);

// `text` encoded as JSON string contents (without the quotes).
std::string json_escape(const std::string& text);

// Any one JSON string character in any valid encoding (escapes of every form). A "\u"
// escape is one character: a code point outside the surrogates, or a high and a low
// surrogate together. A lone surrogate is valid JSON grammar but no Unicode text, and
// strict parsers (nlohmann, serde) refuse it; a pair is one character for minLength /
// maxLength, as validators count code points. A macro, so that grammar texts built at
// compile time (json_schema.cpp's base rules) can splice it in.
#define TSR_JSON_CHAR_GBNF                                                                   \
  R"(( [^"\\\x00-\x1F] | "\\" ( ["\\/bfnrt] | "u" ( [0-9a-cA-Ce-fE-F] [0-9a-fA-F]{3} )" \
  R"(| [dD] [0-7] [0-9a-fA-F]{2} | [dD] [89abAB] [0-9a-fA-F]{2} "\\u" [dD] [c-fC-F] [0-9a-fA-F]{2} ) ) ))"
inline constexpr const char* kJsonCharGbnf = TSR_JSON_CHAR_GBNF;

}  // namespace tsr::constraints
