// Parses the token stream of a Jinja template into a syntax tree, following Jinja's
// grammar and operator precedence (filters and `is` tests bind tighter than arithmetic).
#pragma once

#include <vector>

#include "core/chat/jinja_ast.h"
#include "core/chat/jinja_lexer.h"

namespace tsr::jinja {

// Throws tsr::Error naming the line and column of the first syntax error, including
// unknown filters and tests (Jinja rejects those at compile time too).
Body parse(const std::vector<Token>& tokens);

}  // namespace tsr::jinja
