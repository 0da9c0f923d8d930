// The hex digits of \xHH, \uHHHH and \UHHHHHHHH escapes, shared by the GBNF and regex parsers.
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>

namespace tsr::constraints {

// Reads `digits` hex digits of `text` at `pos`, advancing `pos` past them; nullopt (with
// `pos` wherever the bad digit was) when one is missing or not hex.
inline std::optional<uint32_t> read_hex_digits(std::string_view text, size_t& pos, int digits) {
  uint32_t value = 0;
  for (int i = 0; i < digits; ++i, ++pos) {
    const char c = pos < text.size() ? text[pos] : '\0';
    const int d = (c >= '0' && c <= '9')   ? c - '0'
                  : (c >= 'a' && c <= 'f') ? c - 'a' + 10
                  : (c >= 'A' && c <= 'F') ? c - 'A' + 10
                                           : -1;
    if (d < 0) return std::nullopt;
    value = value * 16 + static_cast<uint32_t>(d);
  }
  return value;
}

}  // namespace tsr::constraints
