// JSON Schema → GBNF.
//
// Supported: type (single, arrays, OpenAPI `nullable`), properties / required /
// additionalProperties (true, false or a schema; absent means allowed, as the spec says),
// items / prefixItems / draft-4 tuple items with additionalItems, minItems / maxItems,
// enum, const, anyOf, oneOf (as anyOf), allOf (merged where the subschemas combine
// exactly), $ref into the same document ($defs, definitions, any JSON pointer; recursion
// allowed), pattern, format (date-time, date, time, email, uuid, uri, ipv4, hostname),
// minLength / maxLength, minimum / maximum / exclusive bounds on integers and numbers
// (exact digit-range grammars; integer_range.h, number_range.h).
// A schema with enum or const (beside other keywords, or in an allOf member) allows
// finitely many values: exactly those a validator (schema_validate.h) accepts against
// the whole schema, so every keyword the validator knows (not, if, patternProperties,
// dependencies, multipleOf, ...) is exact there.
//
// Refused with a CompileError naming the keyword and its JSON pointer (outside such
// finite schemas): patternProperties, dependencies, dependentRequired/Schemas,
// propertyNames, min/maxProperties, contains, if, not, multipleOf, unevaluated*,
// uniqueItems: true, pattern combined with lengths or a format, external $refs.
// Keywords validators treat as annotations (title, description, examples, unknown
// keywords, unknown formats) do not constrain output.
//
// Property order: members appear in the order of `properties` (each optional one may be
// left out); additional properties, with names other than the listed ones, may appear
// between them.
//
// Whitespace: up to 20 characters of [ \t\n\r] after `{`, `[`, `:`, `,` and every value
// (as llama.cpp and XGrammar allow), enough for both compact and indented JSON while
// keeping the model from emitting whitespace forever.
#pragma once

#include <string>
#include <string_view>

namespace tsr::constraints {

// Throws CompileError for invalid JSON or unsupported features.
std::string json_schema_to_gbnf(std::string_view schema_json);

}  // namespace tsr::constraints
