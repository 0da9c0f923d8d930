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

// Any one JSON string character in any valid encoding (escapes of every form).
inline constexpr const char* kJsonCharGbnf =
    R"(( [^"\\\x00-\x1F] | "\\" ( ["\\/bfnrt] | "u" [0-9a-fA-F]{4} ) ))";

}  // namespace tsr::constraints
