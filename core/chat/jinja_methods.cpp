// Python methods of str and dict that chat templates call (`content.strip()`,
// `message.get('name')`). Lists have none: HF renders templates in Jinja's immutable
// sandbox, which refuses list.append and friends, so templates use namespaces instead.
#include <cstdint>

#include "core/chat/jinja_builtins.h"
#include "core/chat/jinja_error.h"
#include "core/chat/jinja_operators.h"
#include "core/chat/jinja_strings.h"

namespace tsr::jinja {
namespace {

const Value kUndefined;

Value arg(const CallArgs& args, size_t index, std::string_view name) {
  return argument(args, index, name, kUndefined);
}

int64_t int_arg(const CallArgs& args, size_t index, std::string_view name, int64_t fallback) {
  const Value& v = arg(args, index, name);
  return v.is_int() ? v.as_int() : fallback;
}

// startswith/endswith accept one string or a tuple (list) of alternatives.
bool affix(const std::string& s, const Value& candidates, bool prefix) {
  for (const Value& c : candidates.is_list() ? candidates.as_list() : List{candidates}) {
    if (!c.is_string()) throw BuiltinError("startswith/endswith expects a string or tuple of strings");
    const std::string& a = c.as_string();
    if (a.size() <= s.size() && s.compare(prefix ? 0 : s.size() - a.size(), a.size(), a) == 0) return true;
  }
  return false;
}

Value string_method(const std::string& s, std::string_view name, const CallArgs& args) {
  if (name == "strip") return strip(s, arg(args, 0, "chars"), true, true);
  if (name == "lstrip") return strip(s, arg(args, 0, "chars"), true, false);
  if (name == "rstrip") return strip(s, arg(args, 0, "chars"), false, true);
  if (name == "split") return split(s, arg(args, 0, "sep"), int_arg(args, 1, "maxsplit", -1));
  if (name == "startswith") return affix(s, arg(args, 0, "prefix"), true);
  if (name == "endswith") return affix(s, arg(args, 0, "suffix"), false);
  if (name == "lower") return to_lower(s);
  if (name == "upper") return to_upper(s);
  if (name == "title") return title(s);
  if (name == "capitalize") return capitalize(s);
  if (name == "replace") {
    return replace(s, to_str(arg(args, 0, "old")), to_str(arg(args, 1, "new")), int_arg(args, 2, "count", -1));
  }
  if (name == "find") {
    size_t at = s.find(to_str(arg(args, 0, "sub")));
    return at == std::string::npos ? int64_t{-1} : static_cast<int64_t>(at);
  }
  if (name == "join") {
    std::string out;
    bool first = true;
    for (const Value& item : iterate(arg(args, 0, "iterable"))) {
      if (!first) out += s;
      first = false;
      out += to_str(item);
    }
    return out;
  }
  throw BuiltinError("'str' object has no method '" + std::string(name) + "'");
}

Value dict_method(const Dict& d, std::string_view name, const CallArgs& args) {
  if (name == "items" || name == "keys" || name == "values") {
    List out;
    for (const auto& [k, v] : d.entries) {
      if (name == "items") out.emplace_back(List{Value(k), v});
      else out.push_back(name == "keys" ? Value(k) : v);
    }
    return out;
  }
  if (name == "get") {
    const Value& key = arg(args, 0, "key");
    const Value* found = key.is_string() ? d.find(key.as_string()) : nullptr;
    return found ? *found : argument(args, 1, "default", Value::none());
  }
  throw BuiltinError("'dict' object has no method '" + std::string(name) + "'");
}

}  // namespace

Value call_method(const Value& subject, std::string_view name, const CallArgs& args) {
  if (subject.is_string()) return string_method(subject.as_string(), name, args);
  if (subject.is_dict()) return dict_method(subject.as_dict(), name, args);
  if (subject.is_undefined()) throw BuiltinError("cannot call method '" + std::string(name) + "' of an undefined value");
  throw BuiltinError("'" + subject.type_name() + "' object has no method '" + std::string(name) + "'");
}

}  // namespace tsr::jinja
