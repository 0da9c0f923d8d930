// Global functions: Jinja's range, namespace and dict, and the two Hugging Face adds
// for chat templates, raise_exception and strftime_now.
#include <ctime>

#include "core/chat/jinja_builtins.h"
#include "core/chat/jinja_error.h"

namespace tsr::jinja {
namespace {

// Jinja's sandbox refuses ranges longer than this.
constexpr int64_t kMaxRange = 100000;

int64_t int_argument(const Value& v) {
  if (!(v.is_int() || v.is_bool())) throw BuiltinError("range() expects integers, got '" + v.type_name() + "'");
  return v.as_int();
}

Value range(const CallArgs& args) {
  const auto& p = args.positional;
  if (p.empty() || p.size() > 3) throw BuiltinError("range() expects 1 to 3 arguments");
  int64_t start = p.size() == 1 ? 0 : int_argument(p[0]);
  int64_t stop = int_argument(p.size() == 1 ? p[0] : p[1]);
  int64_t step = p.size() == 3 ? int_argument(p[2]) : 1;
  if (step == 0) throw BuiltinError("range() step must not be zero");
  List out;
  for (int64_t i = start; step > 0 ? i < stop : i > stop;) {
    if (static_cast<int64_t>(out.size()) >= kMaxRange) throw BuiltinError("range too big");
    out.emplace_back(i);
    if (__builtin_add_overflow(i, step, &i)) break;  // past the int64 range: past stop too
  }
  return out;
}

// dict(mapping, **kwargs) as Python builds it; namespace() is the same, but mutable.
Dict build_dict(const CallArgs& args) {
  Dict d;
  if (!args.positional.empty()) {
    if (args.positional.size() > 1 || !args.positional[0].is_dict()) throw BuiltinError("expected at most one mapping argument");
    d = args.positional[0].as_dict();
  }
  for (const auto& [k, v] : args.named) d.set(k, v);
  return d;
}

Value namespace_(const CallArgs& args) {
  Dict d = build_dict(args);
  d.is_namespace = true;
  return d;
}

// The template's own message, unchanged, so that callers can show it to users.
Value raise_exception(const CallArgs& args) {
  throw Error(args.positional.empty() ? "raise_exception called" : to_str(args.positional[0]));
}

Value strftime_now(const CallArgs& args) {
  if (args.positional.empty() || !args.positional[0].is_string()) throw BuiltinError("strftime_now() expects a format string");
  std::time_t now = std::time(nullptr);
  std::tm local{};
  localtime_r(&now, &local);
  char buf[256];
  size_t n = std::strftime(buf, sizeof buf, args.positional[0].as_string().c_str(), &local);
  return std::string(buf, n);
}

}  // namespace

Dict global_functions() {
  Dict d;
  d.set("range", Function(range));
  d.set("namespace", Function(namespace_));
  d.set("dict", Function([](const CallArgs& a) { return Value(build_dict(a)); }));
  d.set("raise_exception", Function(raise_exception));
  d.set("strftime_now", Function(strftime_now));
  return d;
}

}  // namespace tsr::jinja
