#include "constraints/internal/json_schema.h"

#include <gtest/gtest.h>

#include "constraints/errors.h"
#include "constraints/internal/test_support.h"

namespace tsr::constraints {
namespace {

using testing::compile_error;
using testing::compile_test;
using testing::matches;

std::shared_ptr<CompiledGrammar> schema(const std::string& s) {
  return compile_test(ConstraintKind::json_schema, s);
}

// Keywords holding the wrong JSON type are malformed schemas: a CompileError naming the
// keyword, never another exception (fuzzer find: {"allOf": "string"} escaped as a nlohmann
// type_error) and never ignored (a non-array enum allowed every value). Draft 4's
// boolean exclusiveMinimum and array items stay valid.
TEST(JsonSchema, KeywordsOfTheWrongTypeAreInvalid) {
  for (const auto& [s, keyword] : std::vector<std::pair<const char*, const char*>>{
           {R"({"allOf": "string"})", "allOf"}, {R"({"anyOf": {}})", "anyOf"}, {R"({"oneOf": []})", "oneOf"},
           {R"({"type": "object", "properties": []})", "properties"}, {R"({"type": "object", "required": "a"})", "required"},
           {R"({"type": "array", "items": 3})", "items"}, {R"({"enum": {"a": 1}})", "enum"},
           {R"({"type": "string", "pattern": 5})", "pattern"}, {R"({"type": "integer", "minimum": "0"})", "minimum"},
           {R"({"type": "string", "maxLength": -1})", "maxLength"}, {R"({"type": "object", "properties": {"a": {"not": 1}}})", "not"}}) {
    EXPECT_EQ(compile_error(ConstraintKind::json_schema, s).rfind(std::string("invalid JSON Schema: '") + keyword + "'", 0), 0u)
        << s << ": " << compile_error(ConstraintKind::json_schema, s);
  }
  EXPECT_TRUE(matches(schema(R"({"type": "number", "minimum": 1, "exclusiveMinimum": true})"), "2"));
  EXPECT_TRUE(matches(schema(R"({"type": "array", "items": [{"type": "integer"}]})"), "[1]"));
}

TEST(JsonSchema, ScalarTypesAndNullable) {
  auto g = schema(R"({"type": ["integer", "null"]})");
  EXPECT_TRUE(matches(g, "-12"));
  EXPECT_TRUE(matches(g, "null"));
  EXPECT_FALSE(matches(g, "1.5"));
  EXPECT_FALSE(matches(g, "01"));
  auto n = schema(R"({"type": "number", "nullable": true})");
  EXPECT_TRUE(matches(n, "-3.5e+20"));
  EXPECT_TRUE(matches(n, "null"));
  EXPECT_FALSE(matches(n, "1."));
  auto b = schema(R"({"type": "boolean"})");
  EXPECT_TRUE(matches(b, "true"));
  EXPECT_FALSE(matches(b, "\"true\""));
}

TEST(JsonSchema, PropertiesRequiredAndOrder) {
  auto g = schema(R"({"type": "object", "properties": {"a": {"type": "integer"}, "b": {"type": "string"}},
                      "required": ["b"], "additionalProperties": false})");
  EXPECT_TRUE(matches(g, R"({"a": 1, "b": "x"})"));
  EXPECT_TRUE(matches(g, R"({"b": "\u00e9\"\n"})"));
  EXPECT_TRUE(matches(g, "{\n  \"a\": 1,\n  \"b\": \"x\"\n}"));
  EXPECT_FALSE(matches(g, R"({"a": 1})"));
  EXPECT_FALSE(matches(g, R"({"a": "1", "b": "x"})"));
  EXPECT_FALSE(matches(g, R"({"b": "x", "c": 1})"));
  EXPECT_FALSE(matches(g, R"({"b": "x",})"));
}

// Additional properties must not reopen the listed names with another schema.
TEST(JsonSchema, AdditionalPropertiesExcludeListedNames) {
  auto g = schema(R"({"properties": {"age": {"type": "integer"}}, "additionalProperties": {"type": "string"}})");
  EXPECT_TRUE(matches(g, R"({"age": 3, "ag": "x", "ages": "y", "name": "z"})"));
  EXPECT_TRUE(matches(g, R"({"name": "z", "age": 3})"));
  EXPECT_FALSE(matches(g, R"({"age": "x"})"));
  EXPECT_FALSE(matches(g, R"({"name": 1})"));
  EXPECT_TRUE(matches(g, R"("not an object")"));  // no `type`: other types are valid
}

// An escape cannot spell a listed name (or its next character) and so reopen it under the
// extra schema, and a name is never closed inside an escape.
TEST(JsonSchema, AdditionalPropertyKeysCannotEscapeIntoListedNames) {
  auto g = schema(R"({"properties": {"age": {"type": "integer"}}, "additionalProperties": {"type": "string"}})");
  EXPECT_FALSE(matches(g, R"({"\u0061ge": "x"})"));
  EXPECT_FALSE(matches(g, R"({"a\u0067e": "x"})"));
  EXPECT_TRUE(matches(g, R"({"\tage": "x"})"));
  EXPECT_TRUE(matches(g, R"({"\\u0061ge": "x"})"));  // an escaped backslash: another name
  auto slash = schema(R"({"properties": {"a/b": {"type": "integer"}}, "additionalProperties": {"type": "string"}})");
  EXPECT_FALSE(matches(slash, R"({"a\/b": "x"})"));
  auto quoted = schema(R"({"properties": {"a\"b": {"type": "integer"}}, "additionalProperties": {"type": "string"}})");
  EXPECT_TRUE(matches(quoted, R"({"a\"b": 1})"));
  EXPECT_FALSE(matches(quoted, R"({"a\": "x"})"));
  auto backslash = schema(R"({"properties": {"a\\": {"type": "integer"}}, "additionalProperties": {"type": "string"}})");
  EXPECT_TRUE(matches(backslash, R"({"a\\": 1})"));
  EXPECT_TRUE(matches(backslash, R"({"a\\b": "x"})"));
}

// Hostile schemas: a 20,000-character property name (it once overflowed the stack in the
// key trie of additionalProperties) compiles and keeps excluding the name; combinators
// nested 100,000 deep are refused by the depth limit, never by a crash.
TEST(JsonSchema, LongPropertyNamesCompileWithoutDeepRecursion) {
  const std::string name(20000, 'k');
  auto g = schema(R"({"properties": {")" + name + R"(": {"type": "integer"}}, "additionalProperties": {"type": "string"}})");
  // Byte walks: a token walk checks a full mask per character, which takes minutes here.
  EXPECT_TRUE(testing::matches_bytes(g, "{\"" + name + "\": 1}"));
  EXPECT_FALSE(testing::matches_bytes(g, "{\"" + name + "\": \"x\"}"));
  EXPECT_TRUE(testing::matches_bytes(g, "{\"" + name.substr(1) + "\": \"x\"}"));
}

TEST(JsonSchema, DeeplyNestedCombinatorsAreRefusedNotCrashed) {
  for (const char* keyword : {"allOf", "anyOf", "oneOf"}) {
    std::string deep;
    for (int i = 0; i < 100000; ++i) deep += std::string(R"({")") + keyword + R"(": [)";
    deep += R"({"type": "string"})";
    for (int i = 0; i < 100000; ++i) deep += "]}";
    try {
      json_schema_to_gbnf(deep);
      ADD_FAILURE() << keyword << " nested 100,000 deep was accepted";
    } catch (const CompileError& e) {
      EXPECT_NE(std::string(e.what()).find("deeper than"), std::string::npos) << keyword << ": " << e.what();
    }
  }
}

TEST(JsonSchema, EnumConstAnyOfAllOf) {
  EXPECT_TRUE(matches(schema(R"({"enum": ["a", 1, null, {"k": [1, 2]}]})"), R"({"k": [1, 2]})"));
  EXPECT_FALSE(matches(schema(R"({"type": "string", "enum": ["a", 1]})"), "1"));
  EXPECT_TRUE(matches(schema(R"({"const": "x\"y"})"), R"("x\"y")"));
  auto any = schema(R"({"anyOf": [{"type": "integer"}, {"type": "string", "maxLength": 2}]})");
  EXPECT_TRUE(matches(any, "7"));
  EXPECT_TRUE(matches(any, R"("ab")"));
  EXPECT_FALSE(matches(any, R"("abc")"));
  auto all = schema(R"({"allOf": [{"properties": {"a": {"type": "integer"}}, "required": ["a"]},
                                  {"properties": {"a": {"minimum": 2}, "b": {"type": "null"}}}]})");
  EXPECT_TRUE(matches(all, R"({"a": 2, "b": null})"));
  EXPECT_FALSE(matches(all, R"({"a": 1})"));
  EXPECT_FALSE(matches(all, R"({"b": null})"));
}

TEST(JsonSchema, RecursiveRefs) {
  auto g = schema(R"({"$defs": {"node": {"type": "object", "properties": {"v": {"type": "integer"},
                      "next": {"anyOf": [{"$ref": "#/$defs/node"}, {"type": "null"}]}},
                      "required": ["v", "next"], "additionalProperties": false}}, "$ref": "#/$defs/node"})");
  EXPECT_TRUE(matches(g, R"({"v": 1, "next": {"v": 2, "next": null}})"));
  EXPECT_FALSE(matches(g, R"({"v": 1, "next": {"v": 2}})"));
}

// A surrogate-pair escape is one character, as validators count code points; a lone
// surrogate escape is refused (strict parsers refuse it), so a string never fails open.
TEST(JsonSchema, UnicodeEscapesAreWholeCodePoints) {
  auto two = schema(R"({"type": "string", "minLength": 2, "maxLength": 2})");
  EXPECT_TRUE(matches(two, R"("\uD83D\uDE00x")"));
  EXPECT_FALSE(matches(two, R"("\uD83D\uDE00")"));
  EXPECT_TRUE(matches(two, R"("\u00e9\uFFFF")"));
  auto any = schema(R"({"type": "string"})");
  EXPECT_TRUE(matches(any, R"("\ud83d\ude00 \uD7FF \uE000")"));
  EXPECT_FALSE(matches(any, R"("\uD800")"));
  EXPECT_FALSE(matches(any, R"("\uDC00\uD800")"));
  EXPECT_FALSE(matches(any, R"("\uD83D\u0041")"));
  auto keys = schema(R"({"type": "object", "additionalProperties": {"type": "integer"}})");
  EXPECT_TRUE(matches(keys, R"({"\uD83D\uDE00": 1})"));
  EXPECT_FALSE(matches(keys, R"({"\uDE00": 1})"));
  // The free text around a pattern's match, too.
  auto pattern = schema(R"({"type": "string", "pattern": "a"})");
  EXPECT_TRUE(matches(pattern, R"("\uD83D\uDE00a\u00e9")"));
  EXPECT_FALSE(matches(pattern, R"("\uD800a")"));
  EXPECT_FALSE(matches(pattern, R"("a\uDC00")"));
}

TEST(JsonSchema, StringsPatternFormatsAndLengths) {
  auto p = schema(R"({"type": "string", "pattern": "^[a-z]+-\\d$"})");
  EXPECT_TRUE(matches(p, R"("ab-1")"));
  EXPECT_FALSE(matches(p, R"("ab-x")"));
  auto len = schema(R"({"type": "string", "minLength": 2, "maxLength": 3})");
  EXPECT_TRUE(matches(len, "\"\u65e5\u672c\""));
  EXPECT_TRUE(matches(len, R"("a\"b")"));
  EXPECT_FALSE(matches(len, R"("a")"));
  EXPECT_FALSE(matches(len, R"("abcd")"));
  auto dt = schema(R"({"type": "string", "format": "date-time"})");
  EXPECT_TRUE(matches(dt, R"("2024-02-29T12:30:00.5Z")"));
  EXPECT_FALSE(matches(dt, R"("2024-13-01T12:30:00Z")"));
  auto uuid = schema(R"({"format": "uuid", "type": "string"})");
  EXPECT_TRUE(matches(uuid, R"("123e4567-e89b-12d3-a456-426614174000")"));
  EXPECT_FALSE(matches(uuid, R"("123e4567-e89b-12d3-a456-42661417400")"));
  auto ip = schema(R"({"type": "string", "format": "ipv4"})");
  EXPECT_TRUE(matches(ip, R"("255.0.10.1")"));
  EXPECT_FALSE(matches(ip, R"("256.0.10.1")"));
}

TEST(JsonSchema, IntegerBoundsAreExact) {
  auto g = schema(R"({"type": "integer", "minimum": -123, "exclusiveMaximum": 4567})");
  for (int v = -1000; v <= 6000; v += 1) {
    if (v > -200 && v < -100) continue;
    bool in = v >= -123 && v < 4567;
    ASSERT_EQ(testing::matches_bytes(g, std::to_string(v)), in) << v;
  }
  EXPECT_FALSE(testing::matches_bytes(g, "-0"));
  auto lower = schema(R"({"type": "integer", "minimum": 1.5, "exclusiveMinimum": true})");
  EXPECT_FALSE(matches(lower, "1"));
  EXPECT_TRUE(matches(lower, "2"));
  EXPECT_TRUE(matches(lower, "123456789012"));
}

TEST(JsonSchema, NumberBoundsAreExact) {
  auto g = schema(R"({"type": "number", "minimum": -1.5, "exclusiveMaximum": 90})");
  EXPECT_TRUE(matches(g, "-1.5"));
  EXPECT_TRUE(matches(g, "89.999"));
  EXPECT_TRUE(matches(g, "0"));
  EXPECT_FALSE(matches(g, "-1.51"));
  EXPECT_FALSE(matches(g, "90.0"));
  auto draft4 = schema(R"({"type": "number", "minimum": 0, "exclusiveMinimum": true})");
  EXPECT_FALSE(matches(draft4, "0.0"));
  EXPECT_TRUE(matches(draft4, "1e-07"));
}

// enum and const values are kept exactly when they satisfy every other keyword.
TEST(JsonSchema, FiniteValuesAreFilteredByTheWholeSchema) {
  auto g = schema(R"({"allOf": [{"enum": [1, "ab", "abc", {"a": 1}]}, {"not": {"type": "integer"}},
                                {"not": {"maxLength": 2}}]})");
  EXPECT_TRUE(matches(g, R"("abc")"));
  EXPECT_FALSE(matches(g, R"({"a": 1})"));  // maxLength holds for non-strings, so `not` fails
  EXPECT_FALSE(matches(g, "1"));
  EXPECT_FALSE(matches(g, R"("ab")"));
  EXPECT_NE(compile_error(ConstraintKind::json_schema, R"({"enum": [1], "not": {"const": 1}})").find("no value satisfies"),
            std::string::npos);
}

TEST(JsonSchema, ArraysItemsPrefixItemsAndCounts) {
  auto g = schema(R"({"type": "array", "items": {"type": "integer"}, "minItems": 1, "maxItems": 3})");
  EXPECT_TRUE(matches(g, "[1]"));
  EXPECT_TRUE(matches(g, "[1, 2, 3]"));
  EXPECT_FALSE(matches(g, "[]"));
  EXPECT_FALSE(matches(g, "[1, 2, 3, 4]"));
  EXPECT_FALSE(matches(g, "[1, \"a\"]"));
  auto t = schema(R"({"prefixItems": [{"type": "string"}, {"type": "integer"}], "items": false, "type": "array"})");
  EXPECT_TRUE(matches(t, "[]"));
  EXPECT_TRUE(matches(t, R"(["a", 1])"));
  EXPECT_FALSE(matches(t, R"(["a", 1, 2])"));
  EXPECT_FALSE(matches(t, R"([1])"));
}

// An array that must hold more items than it may is unsatisfiable, not capped silently.
TEST(JsonSchema, MinItemsAboveTheMaximumIsRefused) {
  for (const char* s : {R"({"type": "array", "minItems": 2, "maxItems": 1})",
                        R"({"prefixItems": [{}], "items": false, "minItems": 2})",
                        R"({"allOf": [{"minItems": 3}, {"maxItems": 2}]})"}) {
    EXPECT_NE(compile_error(ConstraintKind::json_schema, s).find("no value satisfies"), std::string::npos) << s;
  }
}

// allOf cannot merge `items` for every element with a tuple from another part: merged, the
// schema-form items would cover only the elements after the tuple.
TEST(JsonSchema, AllOfItemsWithTupleIsRefused) {
  EXPECT_NE(compile_error(ConstraintKind::json_schema,
                          R"({"allOf": [{"type": "array", "items": {"type": "integer"}}, {"prefixItems": [{"type": "string"}]}]})")
                .find("'items'"),
            std::string::npos);
}

TEST(JsonSchema, DatesAreCalendarExact) {
  auto d = schema(R"({"type": "string", "format": "date"})");
  EXPECT_TRUE(matches(d, R"("2024-02-29")"));
  EXPECT_TRUE(matches(d, R"("2000-02-29")"));
  EXPECT_FALSE(matches(d, R"("1900-02-29")"));
  EXPECT_FALSE(matches(d, R"("2023-02-29")"));
  EXPECT_FALSE(matches(d, R"("2024-02-30")"));
  EXPECT_FALSE(matches(d, R"("2024-04-31")"));
  EXPECT_TRUE(matches(d, R"("2024-12-31")"));
}

// oneOf is compiled as anyOf only when no value can match two branches.
TEST(JsonSchema, OneOfNeedsDisjointBranches) {
  auto g = schema(R"({"oneOf": [{"type": "string"}, {"type": "object", "properties": {"k": {"const": 1}}, "required": ["k"]},
                                {"type": "object", "properties": {"k": {"const": 2}}, "required": ["k"]}]})");
  EXPECT_TRUE(matches(g, R"("s")"));
  EXPECT_TRUE(matches(g, R"({"k": 2})"));
  EXPECT_FALSE(matches(g, R"({"k": 3})"));
  EXPECT_NE(compile_error(ConstraintKind::json_schema, R"({"type": "object", "oneOf": [{"required": ["a"]}, {"required": ["b"]}]})")
                .find("oneOf with branches 0 and 1 that may both match"),
            std::string::npos);
}

// A property whose schema no value satisfies may not appear at all.
TEST(JsonSchema, UnsatisfiablePropertiesAreExcluded) {
  auto g = schema(R"({"type": "object", "properties": {"a": {"type": "object", "enum": ["x"]}, "b": {"type": "integer"}}})");
  EXPECT_TRUE(matches(g, R"({"b": 1})"));
  EXPECT_FALSE(matches(g, R"({"a": "x"})"));
  EXPECT_NE(compile_error(ConstraintKind::json_schema, R"({"type": "string", "format": "iri"})").find("format 'iri'"), std::string::npos);
}

TEST(JsonSchema, JsonObjectAcceptsAnyObject) {
  auto g = compile_test(ConstraintKind::json_object, "");
  EXPECT_TRUE(matches(g, R"({"a": [1, {"b": null}], "c": "\u00e9"})"));
  EXPECT_FALSE(matches(g, "[1]"));
}

TEST(JsonSchema, UnsupportedFeaturesAreNamed) {
  EXPECT_EQ(compile_error(ConstraintKind::json_schema, R"({"properties": {"x": {"patternProperties": {}}}})"),
            "unsupported JSON Schema keyword 'patternProperties' at /properties/x");
  EXPECT_NE(compile_error(ConstraintKind::json_schema, R"({"type": "number", "multipleOf": 0.5})").find("'multipleOf'"), std::string::npos);
  EXPECT_NE(compile_error(ConstraintKind::json_schema, R"({"$ref": "http://x/y"})").find("$ref 'http://x/y'"), std::string::npos);
  EXPECT_NE(compile_error(ConstraintKind::json_schema, R"({"allOf": [{"type": "string"}, {"type": "integer"}]})").find("'type'"), std::string::npos);
  EXPECT_NE(compile_error(ConstraintKind::json_schema, R"({"type": "array", "uniqueItems": true})").find("uniqueItems"), std::string::npos);
}

}  // namespace
}  // namespace tsr::constraints
