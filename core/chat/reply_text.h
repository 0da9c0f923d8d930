// Scanning a model's reply for markers (tool calls, reasoning blocks), whole or as it
// streams: white space trimmed, and where the text ends with the start of a marker that
// the next increment may complete.
#pragma once

#include <algorithm>
#include <string_view>

namespace tsr::reply_text {

inline constexpr std::string_view kSpace = " \t\r\n";

inline std::string_view trim_left(std::string_view s) {
  const size_t i = s.find_first_not_of(kSpace);
  return i == std::string_view::npos ? std::string_view() : s.substr(i);
}

inline std::string_view trim(std::string_view s) {
  s = trim_left(s);
  return s.substr(0, s.find_last_not_of(kSpace) + 1);
}

// Where `text` ends with a proper prefix of `marker`: that prefix's offset; else text.size().
inline size_t partial_marker(std::string_view text, std::string_view marker) {
  for (size_t k = std::min(marker.size() - 1, text.size()); k > 0; --k) {
    if (text.ends_with(marker.substr(0, k))) return text.size() - k;
  }
  return text.size();
}

}  // namespace tsr::reply_text
