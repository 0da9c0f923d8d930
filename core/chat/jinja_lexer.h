// Splits a Jinja template into text and tag tokens, applying whitespace control
// ({%- -%}, {{- -}}, trim_blocks, lstrip_blocks) and {% raw %} so that the parser sees
// text exactly as it will be printed.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "core/chat/jinja_error.h"

namespace tsr::jinja {

struct LexOptions {
  // Hugging Face renders chat templates with both on; Jinja's defaults are off.
  bool trim_blocks = true;    // drop the first newline after a block tag or comment
  bool lstrip_blocks = true;  // drop spaces and tabs before a block tag or comment on its line
};

enum class TokenKind {
  Text,
  VariableBegin, VariableEnd,  // {{ }}
  BlockBegin, BlockEnd,        // {% %}
  Name, String, Integer, Float, Operator,
  End,
};

struct Token {
  TokenKind kind;
  std::string text;  // the text, name, operator, decoded string literal or number digits
  Pos pos;
};

// Throws tsr::Error (with line and column) on unterminated tags, strings or comments
// and on characters that cannot start a token.
std::vector<Token> lex(std::string_view source, const LexOptions& options = {});

}  // namespace tsr::jinja
