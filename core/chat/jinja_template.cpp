#include "core/chat/jinja_template.h"

#include "core/chat/jinja_parser.h"
#include "core/chat/jinja_render.h"

namespace tsr::jinja {

Template::Template(std::string_view source, const LexOptions& options) : body_(parse(lex(source, options))) {}

std::string Template::render(const Dict& variables) const { return jinja::render(body_, variables); }

}  // namespace tsr::jinja
