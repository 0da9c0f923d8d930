// Tool calls → GBNF: the `tool_call` constraint kind, which forces a reply to be one or
// more function calls in a chat format's syntax, each call's JSON checked against its
// schema. The spec is a JSON object:
//   {"schema": S,          the JSON Schema of one call object (e.g. an anyOf over the
//                          tools, each {"name": {"const": ...}, "arguments": ...})
//    "open": "", "close": "",    text around the whole list of calls (Mistral: "[" "]")
//    "begin": "", "end": "",     text around each call (Hermes: "<tool_call>\n" "\n</tool_call>")
//    "separator": "",           text between two calls
//    "max_calls": 1}            at most this many calls (1 to 64)
// Every field but "schema" may be left out.
#pragma once

#include <string>
#include <string_view>

namespace tsr::constraints {

// Throws CompileError for a malformed spec, and as json_schema_to_gbnf for its schema.
std::string tool_call_to_gbnf(std::string_view spec_json);

}  // namespace tsr::constraints
