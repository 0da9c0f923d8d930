#include "core/chat/jinja_strings.h"

#include <cctype>

#include "core/chat/jinja_error.h"

namespace tsr::jinja {
namespace {

constexpr std::string_view kWhitespace = " \t\n\r\f\v";

bool is_alpha(char c) { return std::isalpha(static_cast<unsigned char>(c)) != 0; }
char lower_char(char c) { return static_cast<char>(std::tolower(static_cast<unsigned char>(c))); }
char upper_char(char c) { return static_cast<char>(std::toupper(static_cast<unsigned char>(c))); }

}  // namespace

std::string strip(std::string_view s, const Value& chars, bool left, bool right) {
  std::string_view set = kWhitespace;
  if (chars.is_string()) set = chars.as_string();
  else if (!chars.is_undefined() && !chars.is_none()) throw BuiltinError("strip arg must be None or str");
  size_t begin = left ? s.find_first_not_of(set) : 0;
  if (begin == std::string_view::npos) return "";
  size_t end = right ? s.find_last_not_of(set) + 1 : s.size();
  return std::string(s.substr(begin, end - begin));
}

std::string to_lower(std::string s) {
  for (char& c : s) c = lower_char(c);
  return s;
}

std::string to_upper(std::string s) {
  for (char& c : s) c = upper_char(c);
  return s;
}

std::string capitalize(std::string s) {
  s = to_lower(std::move(s));
  if (!s.empty()) s[0] = upper_char(s[0]);
  return s;
}

std::string title(std::string s) {
  bool word_start = true;
  for (char& c : s) {
    c = word_start ? upper_char(c) : lower_char(c);
    word_start = !is_alpha(c);
  }
  return s;
}

std::string replace(std::string_view s, std::string_view from, std::string_view to, int64_t count) {
  std::string out;
  size_t pos = 0;
  for (int64_t done = 0; count < 0 || done < count; ++done) {
    size_t hit = from.empty() ? (pos <= s.size() ? pos : std::string_view::npos) : s.find(from, pos);
    if (hit == std::string_view::npos) break;
    out.append(s.substr(pos, hit - pos)).append(to);
    if (from.empty()) {  // Python inserts `to` between characters
      if (hit == s.size()) return out;
      out += s[hit];
      pos = hit + 1;
    } else {
      pos = hit + from.size();
    }
  }
  return out.append(s.substr(std::min(pos, s.size())));
}

List split(std::string_view s, const Value& sep, int64_t maxsplit) {
  List out;
  if (sep.is_undefined() || sep.is_none()) {
    size_t pos = s.find_first_not_of(kWhitespace);
    while (pos != std::string_view::npos) {
      if (maxsplit >= 0 && static_cast<int64_t>(out.size()) == maxsplit) {
        out.emplace_back(strip(s.substr(pos), Value(), false, true));
        break;
      }
      size_t end = s.find_first_of(kWhitespace, pos);
      out.emplace_back(std::string(s.substr(pos, end - pos)));
      pos = end == std::string_view::npos ? end : s.find_first_not_of(kWhitespace, end);
    }
    return out;
  }
  if (!sep.is_string()) throw BuiltinError("split separator must be a string");
  const std::string& d = sep.as_string();
  if (d.empty()) throw BuiltinError("empty separator");
  size_t pos = 0;
  for (size_t hit; (maxsplit < 0 || static_cast<int64_t>(out.size()) < maxsplit) &&
                   (hit = s.find(d, pos)) != std::string_view::npos;
       pos = hit + d.size()) {
    out.emplace_back(std::string(s.substr(pos, hit - pos)));
  }
  out.emplace_back(std::string(s.substr(pos)));
  return out;
}

}  // namespace tsr::jinja
