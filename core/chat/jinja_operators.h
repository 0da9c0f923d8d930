// Jinja's operators on values, with Python's semantics: arithmetic, `~`
// concatenation, membership (`in`), attribute and item access, and slicing.
#pragma once

#include <string_view>

#include "core/chat/jinja_value.h"

namespace tsr::jinja {

// Longest string or list an operator may build: templates are untrusted input.
inline constexpr size_t kMaxValueSize = size_t{32} << 20;

// op is one of + - * / // % ** ~ == != < > <= >= in "not in". Throws BuiltinError on
// operand types Python rejects.
Value binary_op(std::string_view op, const Value& a, const Value& b);
Value negate(const Value& v);

// obj.name and obj[key]: missing keys and out-of-range indexes give undefined, as in Jinja.
Value get_attribute(const Value& obj, const std::string& name);
Value get_item(const Value& obj, const Value& key);
// obj[start:stop:step] on lists and strings; each bound may be undefined (absent).
Value slice(const Value& obj, const Value& start, const Value& stop, const Value& step);

// The items a for loop visits: list items, dict keys, string characters.
List iterate(const Value& v);

}  // namespace tsr::jinja
