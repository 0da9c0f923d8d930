// The built-in vocabulary of the interpreter: filters (`x | trim`), tests
// (`x is defined`), methods of strings and dicts (`s.strip()`, `d.items()`) and the
// global functions chat templates call. They throw BuiltinError on bad arguments.
#pragma once

#include <string_view>

#include "core/chat/jinja_value.h"

namespace tsr::jinja {

bool is_filter(std::string_view name);
Value apply_filter(std::string_view name, const Value& subject, const CallArgs& args);

bool is_test(std::string_view name);
bool apply_test(std::string_view name, const Value& subject, const CallArgs& args);

// Calls subject.name(args) for str, dict and list methods; throws when there is none.
Value call_method(const Value& subject, std::string_view name, const CallArgs& args);

// range, namespace, dict, raise_exception and strftime_now.
Dict global_functions();

// Argument `index` (positional) or `name` (keyword), or `fallback` when neither is given.
// Returned by value: `fallback` is often a temporary.
Value argument(const CallArgs& args, size_t index, std::string_view name, const Value& fallback);

}  // namespace tsr::jinja
