// JSON and template values: the tojson filter as Hugging Face defines it for chat
// templates (Python's json.dumps(value, ensure_ascii=False, indent=indent,
// sort_keys=sort_keys), so non-ASCII text stays as is and the separators are Python's
// ", " and ": "), and JSON documents (tools, tool calls) turned into template values.
#pragma once

#include <nlohmann/json.hpp>

#include <optional>
#include <string>

#include "core/chat/jinja_value.h"

namespace tsr::jinja {

std::string to_json(const Value& value, std::optional<int> indent, bool sort_keys = false);

// Objects become dicts in key order, arrays lists; recursion follows the document's depth
// (request bodies are bounded to 512 levels where they are parsed).
Value from_json(const nlohmann::ordered_json& j);

}  // namespace tsr::jinja
