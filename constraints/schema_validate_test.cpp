#include "constraints/schema_validate.h"

#include <gtest/gtest.h>

#include "constraints/errors.h"

namespace tsr::constraints {
namespace {

using Json = nlohmann::ordered_json;

bool valid(const std::string& schema, const std::string& instance) {
  Json root = Json::parse(schema);
  return SchemaValidator(root).valid(Json::parse(instance), root, "");
}

TEST(SchemaValidate, EqualityIgnoresMemberOrderAndNumberForm) {
  EXPECT_TRUE(json_equal(Json::parse(R"({"a": 1, "b": [2.0]})"), Json::parse(R"({"b": [2], "a": 1.0})")));
  EXPECT_FALSE(json_equal(Json::parse("true"), Json::parse("1")));
}

TEST(SchemaValidate, Combinators) {
  EXPECT_TRUE(valid(R"({"not": {"type": "integer"}})", "1.5"));
  EXPECT_FALSE(valid(R"({"not": {"type": "integer"}})", "2.0"));
  EXPECT_FALSE(valid(R"({"oneOf": [{"type": "integer"}, {"minimum": 2}]})", "3"));
  EXPECT_TRUE(valid(R"({"oneOf": [{"type": "integer"}, {"minimum": 2}]})", "2.5"));
  EXPECT_TRUE(valid(R"({"if": {"minimum": 10}, "then": {"multipleOf": 5}, "else": {"maximum": 3}})", "15"));
  EXPECT_FALSE(valid(R"({"if": {"minimum": 10}, "then": {"multipleOf": 5}, "else": {"maximum": 3}})", "4"));
  EXPECT_FALSE(valid(R"({"$defs": {"s": {"type": "string"}}, "not": {"$ref": "#/$defs/s"}})", R"("x")"));
}

TEST(SchemaValidate, ObjectsArraysStringsNumbers) {
  const char* pp = R"({"patternProperties": {"^v": {"type": "integer"}}, "properties": {"foo": {}},
                      "additionalProperties": false, "minProperties": 1})";
  EXPECT_TRUE(valid(pp, R"({"foo": "x", "vroom": 2})"));
  EXPECT_FALSE(valid(pp, R"({"vroom": "2"})"));
  EXPECT_FALSE(valid(pp, R"({"bar": 1})"));
  EXPECT_FALSE(valid(pp, "{}"));
  EXPECT_TRUE(valid(R"({"dependencies": {"a": ["b"]}})", R"({"b": 1})"));
  EXPECT_FALSE(valid(R"({"dependencies": {"a": ["b"]}})", R"({"a": 1})"));
  EXPECT_FALSE(valid(R"({"items": [{}], "additionalItems": false})", "[1, 2]"));
  EXPECT_FALSE(valid(R"({"uniqueItems": true})", R"([{"a": 1, "b": 2}, {"b": 2, "a": 1}])"));
  EXPECT_TRUE(valid(R"({"contains": {"const": 3}, "maxContains": 1})", "[1, 3]"));
  EXPECT_TRUE(valid(R"({"maxLength": 2, "pattern": "^\\w+$"})", "\"\u00e9a\"") == false);
  EXPECT_TRUE(valid(R"({"maxLength": 2, "pattern": "a"})", "\"\u00e9a\""));
  EXPECT_FALSE(valid(R"({"format": "date"})", R"("2023-02-29")"));
  EXPECT_TRUE(valid(R"({"exclusiveMaximum": 3})", "2.999"));
  EXPECT_FALSE(valid(R"({"maximum": 3, "exclusiveMaximum": true})", "3"));
  EXPECT_FALSE(valid(R"({"multipleOf": 0.0001})", "0.00751"));
  EXPECT_TRUE(valid(R"({"multipleOf": 1.5})", "4.5"));
}

TEST(SchemaValidate, UndecidableKeywordsAreRefused) {
  EXPECT_THROW(valid(R"({"unevaluatedProperties": false})", "{}"), CompileError);
}

}  // namespace
}  // namespace tsr::constraints
