#include "constraints/internal/json_chars.h"

#include <cstdio>

#include "constraints/internal/gbnf.h"

namespace tsr::constraints {
namespace {

std::string escape_of(uint32_t c) {
  switch (c) {
    case '"': return "\\\"";
    case '\\': return "\\\\";
    case '\n': return "\\n";
    case '\r': return "\\r";
    case '\t': return "\\t";
    case '\b': return "\\b";
    case '\f': return "\\f";
    default: {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\u%04x", c);
      return buf;
    }
  }
}

}  // namespace

std::string json_chars_gbnf(const CodepointSet& set) {
  CodepointSet escaped(0, 0x1F);
  escaped.add('"', '"');
  escaped.add('\\', '\\');
  CodepointSet raw = set.minus(escaped);
  std::string out;
  auto add = [&out](const std::string& alt) { out += (out.empty() ? "" : " | ") + alt; };
  if (!raw.empty()) add(gbnf_class(raw));
  for (const CodepointRange& r : set.ranges()) {
    for (uint32_t c = r.lo; c <= r.hi && c <= '\\'; ++c) {
      if (escaped.contains(c)) add(gbnf_literal(escape_of(c)));
    }
  }
  if (out.empty()) return "[]";  // the empty set: matches nothing
  return "( " + out + " )";
}

std::string json_escape(const std::string& text) {
  std::string out;
  for (char ch : text) {
    auto c = static_cast<uint8_t>(ch);
    if (c < 0x20 || c == '"' || c == '\\') {
      out += escape_of(c);
    } else {
      out += ch;
    }
  }
  return out;
}

}  // namespace tsr::constraints
