#include "server/body_precheck.h"

namespace tsr::server {

namespace {

// The end of the string literal opening at `at` (just past its closing quote).
size_t string_end(std::string_view s, size_t at) {
  for (size_t i = at + 1; i < s.size(); ++i) {
    if (s[i] == '\\') {
      ++i;
    } else if (s[i] == '"') {
      return i + 1;
    }
  }
  return s.size();
}

// The end of the value starting at `at`: a string, or anything up to the comma or brace
// that closes it at its own level.
size_t value_end(std::string_view s, size_t at) {
  if (at < s.size() && s[at] == '"') return string_end(s, at);
  size_t depth = 0;
  for (size_t i = at; i < s.size(); ++i) {
    const char c = s[i];
    if (c == '"') {
      i = string_end(s, i) - 1;
    } else if (c == '[' || c == '{') {
      ++depth;
    } else if (c == ']' || c == '}') {
      if (depth == 0) return i;
      if (--depth == 0) return i + 1;
    } else if (c == ',' && depth == 0) {
      return i;
    }
  }
  return s.size();
}

size_t skip_space(std::string_view s, size_t i) {
  while (i < s.size() && (s[i] == ' ' || s[i] == '\t' || s[i] == '\n' || s[i] == '\r')) ++i;
  return i;
}

}  // namespace

std::optional<std::string_view> raw_member(std::string_view body, std::string_view key) {
  size_t i = skip_space(body, 0);
  if (i == body.size() || body[i] != '{') return std::nullopt;
  for (i = skip_space(body, i + 1); i < body.size() && body[i] == '"';) {
    const size_t key_end = string_end(body, i);
    const std::string_view name = body.substr(i + 1, key_end - i - 2);
    i = skip_space(body, key_end);
    if (i == body.size() || body[i] != ':') return std::nullopt;
    const size_t start = skip_space(body, i + 1);
    const size_t end = value_end(body, start);
    if (name == key) {
      std::string_view value = body.substr(start, end - start);
      while (!value.empty() && (value.back() == ' ' || value.back() == '\n' || value.back() == '\t' || value.back() == '\r')) {
        value.remove_suffix(1);
      }
      return value;
    }
    i = skip_space(body, end);
    if (i == body.size() || body[i] != ',') return std::nullopt;
    i = skip_space(body, i + 1);
  }
  return std::nullopt;
}

size_t min_decoded_bytes(std::string_view literal) {
  const std::string_view inner = literal.size() >= 2 ? literal.substr(1, literal.size() - 2) : std::string_view();
  if (inner.find('\\') == std::string_view::npos) return inner.size();  // no escape: exact
  return (inner.size() + 5) / 6;
}

}  // namespace tsr::server
