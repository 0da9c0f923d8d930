// A look at a request body's text before it is parsed: parsing 10 MB of JSON takes
// ~80 ms, and a completion whose one prompt string is too long for the context can be
// refused without it.
#pragma once

#include <optional>
#include <string_view>

namespace tsr::server {

// The raw text of the top-level object's member `key` (its value, as written), when the
// key is written without escapes; nullopt when absent or not found that way. Invalid JSON
// is left to the parser: this only follows strings and brackets.
std::optional<std::string_view> raw_member(std::string_view body, std::string_view key);

// The fewest bytes a JSON string literal decodes to: exactly its inner length without an
// escape; with escapes, each stands for at least one byte and takes at most six (\uXXXX).
size_t min_decoded_bytes(std::string_view literal);

}  // namespace tsr::server
