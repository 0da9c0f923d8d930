// Python's str methods that both filters (`| trim`) and method calls (`.strip()`) use.
// Case mapping is ASCII-only: other characters pass through unchanged.
#pragma once

#include <string>
#include <string_view>

#include "core/chat/jinja_value.h"

namespace tsr::jinja {

// chars: undefined/none strips whitespace, a string strips any of its characters.
std::string strip(std::string_view s, const Value& chars, bool left, bool right);
std::string to_lower(std::string s);
std::string to_upper(std::string s);
std::string capitalize(std::string s);  // first letter upper, the rest lower
std::string title(std::string s);       // each word's first letter upper, the rest lower
// count < 0 replaces every occurrence.
std::string replace(std::string_view s, std::string_view from, std::string_view to, int64_t count);
// sep: undefined/none splits on runs of whitespace; maxsplit < 0 is unlimited.
List split(std::string_view s, const Value& sep, int64_t maxsplit);

}  // namespace tsr::jinja
