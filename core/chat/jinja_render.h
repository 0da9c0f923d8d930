// Executes a parsed template against the caller's variables.
#pragma once

#include <string>

#include "core/chat/jinja_ast.h"

namespace tsr::jinja {

// Throws tsr::Error on runtime errors (naming the line and column), on
// raise_exception() (with the template's message only), and when the template runs
// away: output over 32 MiB, more than 200000 loop iterations, or nesting deeper
// than the interpreter allows (e.g. unbounded macro recursion).
std::string render(const Body& body, const Dict& variables);

}  // namespace tsr::jinja
