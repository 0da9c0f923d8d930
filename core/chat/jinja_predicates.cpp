// Jinja's tests (`x is defined`, `x is divisibleby 3`), named predicates here so they
// are not mistaken for unit tests.
#include <map>

#include "core/chat/jinja_builtins.h"
#include "core/chat/jinja_error.h"
#include "core/chat/jinja_operators.h"

namespace tsr::jinja {
namespace {

using Predicate = bool (*)(const Value& v, const CallArgs& args);

const Value& operand(const CallArgs& args) {
  if (args.positional.empty()) throw BuiltinError("test requires an argument");
  return args.positional[0];
}

bool is_integer(const Value& v) { return v.is_int(); }

int64_t integer(const Value& v) {
  if (!(v.is_int() || v.is_bool())) throw BuiltinError("test expects an integer, got '" + v.type_name() + "'");
  return v.as_int();
}

bool all_cased(const Value& v, bool upper) {
  if (!v.is_string()) return false;
  bool cased = false;
  for (char c : v.as_string()) {
    if ((upper && c >= 'a' && c <= 'z') || (!upper && c >= 'A' && c <= 'Z')) return false;
    cased = cased || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z');
  }
  return cased;
}

bool compare(const char* op, const Value& v, const CallArgs& args) {
  return binary_op(op, v, operand(args)).truthy();
}

const std::map<std::string, Predicate, std::less<>>& predicates() {
  static const std::map<std::string, Predicate, std::less<>> table = {
      {"defined", [](const Value& v, const CallArgs&) { return !v.is_undefined(); }},
      {"undefined", [](const Value& v, const CallArgs&) { return v.is_undefined(); }},
      {"none", [](const Value& v, const CallArgs&) { return v.is_none(); }},
      {"boolean", [](const Value& v, const CallArgs&) { return v.is_bool(); }},
      {"true", [](const Value& v, const CallArgs&) { return v.is_bool() && v.as_bool(); }},
      {"false", [](const Value& v, const CallArgs&) { return v.is_bool() && !v.as_bool(); }},
      {"string", [](const Value& v, const CallArgs&) { return v.is_string(); }},
      // Python's bool is a Number, so `true is number` holds, but not `true is integer`.
      {"number", [](const Value& v, const CallArgs&) { return v.is_number(); }},
      {"integer", [](const Value& v, const CallArgs&) { return is_integer(v); }},
      {"float", [](const Value& v, const CallArgs&) { return v.is_float(); }},
      {"mapping", [](const Value& v, const CallArgs&) { return v.is_dict(); }},
      // Jinja's Undefined is iterable (as empty), like strings, lists and dicts.
      {"iterable", [](const Value& v, const CallArgs&) {
         return v.is_undefined() || v.is_string() || v.is_list() || v.is_dict();
       }},
      {"sequence", [](const Value& v, const CallArgs&) { return v.is_string() || v.is_list() || v.is_dict(); }},
      {"callable", [](const Value& v, const CallArgs&) { return v.is_function(); }},
      {"odd", [](const Value& v, const CallArgs&) { return integer(v) % 2 != 0; }},
      {"even", [](const Value& v, const CallArgs&) { return integer(v) % 2 == 0; }},
      {"divisibleby", [](const Value& v, const CallArgs& a) {
         int64_t d = integer(operand(a));
         return d != 0 && integer(v) % d == 0;
       }},
      {"lower", [](const Value& v, const CallArgs&) { return all_cased(v, false); }},
      {"upper", [](const Value& v, const CallArgs&) { return all_cased(v, true); }},
      {"eq", [](const Value& v, const CallArgs& a) { return compare("==", v, a); }},
      {"equalto", [](const Value& v, const CallArgs& a) { return compare("==", v, a); }},
      {"ne", [](const Value& v, const CallArgs& a) { return compare("!=", v, a); }},
      {"lt", [](const Value& v, const CallArgs& a) { return compare("<", v, a); }},
      {"lessthan", [](const Value& v, const CallArgs& a) { return compare("<", v, a); }},
      {"le", [](const Value& v, const CallArgs& a) { return compare("<=", v, a); }},
      {"gt", [](const Value& v, const CallArgs& a) { return compare(">", v, a); }},
      {"greaterthan", [](const Value& v, const CallArgs& a) { return compare(">", v, a); }},
      {"ge", [](const Value& v, const CallArgs& a) { return compare(">=", v, a); }},
      {"in", [](const Value& v, const CallArgs& a) { return compare("in", v, a); }},
      // Python's `is`: the same list or dict object, or equal scalars (None, True, ...).
      {"sameas", [](const Value& v, const CallArgs& a) {
         const Value& o = operand(a);
         if (v.identity() || o.identity()) return v.identity() == o.identity();
         return v.kind() == o.kind() && equals(v, o);
       }},
  };
  return table;
}

}  // namespace

bool is_test(std::string_view name) { return predicates().count(name) != 0; }

bool apply_test(std::string_view name, const Value& subject, const CallArgs& args) {
  auto it = predicates().find(name);
  if (it == predicates().end()) throw BuiltinError("unknown test '" + std::string(name) + "'");
  return it->second(subject, args);
}

}  // namespace tsr::jinja
