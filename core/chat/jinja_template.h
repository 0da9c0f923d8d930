// A Jinja template compiled once and rendered many times: the entry point of the
// interpreter (namespace tsr::jinja), which implements the subset of Jinja that
// Hugging Face chat templates use, without a third-party Jinja library.
#pragma once

#include <string>
#include <string_view>

#include "core/chat/jinja_ast.h"
#include "core/chat/jinja_lexer.h"

namespace tsr::jinja {

class Template {
 public:
  // Throws tsr::Error with line and column on syntax errors, unknown filters and tests.
  explicit Template(std::string_view source, const LexOptions& options = {});

  // `variables` shadow the global functions (range, namespace, raise_exception, ...).
  std::string render(const Dict& variables) const;

 private:
  Body body_;
};

}  // namespace tsr::jinja
