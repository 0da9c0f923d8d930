// The tojson filter as Hugging Face defines it for chat templates: Python's
// json.dumps(value, ensure_ascii=False, indent=indent, sort_keys=sort_keys), so
// non-ASCII text stays as is and the separators are Python's (", " and ": ").
#pragma once

#include <optional>
#include <string>

#include "core/chat/jinja_value.h"

namespace tsr::jinja {

std::string to_json(const Value& value, std::optional<int> indent, bool sort_keys = false);

}  // namespace tsr::jinja
