// The nesting depth of a JSON text, measured by one scan of its bytes before it is parsed.
// nlohmann's parser callback could bound the depth while parsing, but with a callback the
// parser re-examines a parent object each time a member object closes: quadratic in an
// object's width (50,000 members: 12 s for a 690 KB body). Invalid JSON is left to the
// parser; this only counts brackets outside strings.
#pragma once

#include <cstddef>
#include <string_view>

namespace tsr {

// True when some value of `text` nests deeper than `limit` arrays and objects.
inline bool json_deeper_than(std::string_view text, size_t limit) {
  size_t depth = 0;
  bool in_string = false, escaped = false;
  for (const char c : text) {
    if (in_string) {
      if (escaped) {
        escaped = false;
      } else if (c == '\\') {
        escaped = true;
      } else if (c == '"') {
        in_string = false;
      }
    } else if (c == '"') {
      in_string = true;
    } else if (c == '[' || c == '{') {
      if (++depth > limit) return true;
    } else if ((c == ']' || c == '}') && depth > 0) {
      --depth;
    }
  }
  return false;
}

}  // namespace tsr
