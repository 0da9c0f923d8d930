// GBNF for the contents of JSON strings with a known `format` (RFC 3339 date-time, date
// and time; email; uuid; uri; ipv4; hostname).
#pragma once

#include <optional>
#include <string>

namespace tsr::constraints {

// The expression for the string's contents, or nothing for formats that validators
// treat as annotations (names outside the JSON Schema format vocabulary, such as "int32").
// Throws CompileError for standard formats that validators assert but that have no
// grammar here (ipv6, iri, uri-reference, ...).
std::optional<std::string> format_gbnf(const std::string& format);

}  // namespace tsr::constraints
