// Chat templates come with the model file (tokenizer.chat_template): any template text
// renders or fails with tsr::Error, within bounded time and memory, whatever the messages.
//
// An input is the template text itself, except one starting with a NUL byte (which no
// template does): that is a small program building a template nested `depth` deep, with
// depth as a dimension flat bytes never reach (a parser recursing per level overflows the
// stack long before libFuzzer grows such an input):
//   byte 1-2  depth = mantissa (byte 2) * 10^(byte 1 % 6), at most 200,000
//   byte 3    construct: what nests (kConstructs below; 15 mixes them per level)
//   byte 4-5  size of the string literal at the bottom = mantissa (byte 5) * 10^(byte 4 % 6)
//   byte 6-   the literal's pattern, and the mixed constructs' order
#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include "core/chat/chat_template.h"
#include "base/error.h"

namespace {

constexpr size_t kMaxDepth = 200'000;
constexpr size_t kMaxSize = 1'000'000;

class Program {
 public:
  Program(const uint8_t* data, size_t size) : data_(data), size_(size) {}
  uint8_t byte() { return pos_ < size_ ? data_[pos_++] : 0; }
  size_t scaled(size_t cap) {
    size_t e = byte() % 6;
    size_t v = byte();
    while (e-- > 0 && v < cap) v *= 10;
    return std::min(v, cap);
  }

 private:
  const uint8_t* data_;
  size_t size_;
  size_t pos_ = 0;
};

// One level of construct `c` around the inner text: prefix + inner + suffix.
void wrap(size_t c, size_t level, std::string& prefix, std::string& suffix) {
  const std::string n = std::to_string(level % 10);
  switch (c % 15) {
    case 0: prefix += "("; suffix += ")"; break;                                    // parentheses
    case 1: prefix += "["; suffix += ", " + n + "]"; break;                         // list literals
    case 2: prefix += "{'k" + n + "': "; suffix += "}"; break;                      // dict literals
    case 3: prefix += ""; suffix += "|string|trim"; break;                          // filter chain
    case 4: prefix += ""; suffix += "['content']"; break;                           // subscript chain
    case 5: prefix += "not "; suffix += ""; break;                                  // unary chain
    case 6: prefix += ""; suffix += " ~ '" + n + "'"; break;                        // binary chain
    case 7: prefix += "'" + n + "' if true else ("; suffix += ")"; break;          // nested ternaries
    case 8: prefix += "(" + n + " + "; suffix += ")"; break;                        // right-nested arithmetic
    case 9: prefix += "dict(a="; suffix += ")"; break;                              // nested calls
    case 10: prefix += "{% if true %}"; suffix += "{% endif %}"; break;             // blocks: if
    case 11: prefix += "{% for m in messages %}"; suffix += "{% endfor %}"; break;  // for (4 messages each)
    case 12: prefix += "{% set x%}"; suffix += "{% endset %}"; break;               // set blocks
    case 13: prefix += "{% macro m" + std::to_string(level) + "() %}"; suffix += "{% endmacro %}"; break;
    default: prefix += "{%- filter upper -%}"; suffix += "{%- endfilter -%}"; break;
  }
}

bool is_block(size_t c) { return c % 15 >= 10; }

std::string deep_template(Program& p) {
  const size_t depth = p.scaled(kMaxDepth);
  const size_t construct = p.byte();
  const size_t size = p.scaled(kMaxSize);
  std::vector<size_t> pattern{construct};
  if (construct % 16 == 15) {  // mixed: each level's construct from a pattern in the input
    pattern.clear();
    for (size_t i = 0, k = 1 + p.byte() % 8; i < k; ++i) pattern.push_back(p.byte());
  }
  std::string literal;
  const size_t k = 1 + p.byte() % 8;
  std::string chars;
  for (size_t i = 0; i < k; ++i) chars += "ab{}%#'\"\\ \n-|x"[p.byte() % 14];
  while (literal.size() < size) literal += chars;
  std::string quoted = "'";
  for (const char c : literal) quoted += c == '\'' || c == '\\' ? std::string("\\") + c : std::string(1, c);
  quoted += "'";

  // Block levels first, around one {{ }} holding the expression levels: once an
  // expression is open, a block construct becomes an expression one.
  std::string prefix;
  std::vector<std::string> suffixes;
  bool in_expr = false;
  for (size_t i = 0; i < depth; ++i) {
    size_t c = pattern[i % pattern.size()];
    if (in_expr && is_block(c)) c %= 10;
    if (!is_block(c) && !in_expr) {
      prefix += "{{ ";
      suffixes.push_back(" }}");
      in_expr = true;
    }
    std::string pre, suf;
    wrap(c, i, pre, suf);
    prefix += pre;
    suffixes.push_back(std::move(suf));
  }
  std::string out = prefix + (in_expr ? quoted : "{{ " + quoted + " }}");
  for (size_t i = suffixes.size(); i-- > 0;) out += suffixes[i];
  return out;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  Program p(data, size);
  const std::string text = size > 0 && data[0] == 0 ? (p.byte(), deep_template(p))
                                                    : std::string(reinterpret_cast<const char*>(data), size);
  static const std::vector<tsr::ChatMessage> messages = {
      {"system", "Be brief."}, {"user", "Hi {{ not a template }}"}, {"assistant", "Hello!"}, {"user", "\xE6\x97\xA5 again"}};
  try {
    tsr::apply_chat_template(text, messages, true, "<s>", "</s>");
  } catch (const tsr::Error&) {
  }
  return 0;
}
