// llama.cpp's GBNF grammar format → Grammar.
//
//   root  ::= "{" ws pair ("," ws pair)* "}"   # rules, literals, sequences, comments
//   pair  ::= [a-z]+ ":" ( num | "null" )?      # classes, groups, alternation, * + ?
//   num   ::= [0-9]{1,3} | "-" [^\x00-/:-\U0010FFFF]
//
// Literals and classes are UTF-8 code points (escapes \n \r \t \\ \" \' \[ \] \- \^ \/
// \xHH \uHHHH \UHHHHHHHH); `.` is any code point. A rule may continue on the next line
// (a new rule starts where `name ::=` does). The root rule is `root`.
#pragma once

#include <string_view>

#include "constraints/grammar.h"

namespace tsr::constraints {

// Throws CompileError with the line and column of a syntax error.
Grammar parse_gbnf(std::string_view text, std::string_view root_rule = "root");

// `text` as a GBNF string literal (quotes included).
std::string gbnf_literal(std::string_view text);
// `set` as a GBNF character class (brackets included).
std::string gbnf_class(const CodepointSet& set);

}  // namespace tsr::constraints
