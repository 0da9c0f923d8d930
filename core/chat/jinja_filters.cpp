// Jinja's built-in filters that chat templates use, with Jinja 3's argument names.
#include <algorithm>
#include <cstdint>
#include <cmath>
#include <map>

#include "core/chat/jinja_builtins.h"
#include "core/chat/jinja_error.h"
#include "core/chat/jinja_json.h"
#include "core/chat/jinja_operators.h"
#include "core/chat/jinja_strings.h"

namespace tsr::jinja {
namespace {

using Filter = Value (*)(const Value& subject, const CallArgs& args);

const Value kUndefined;

Value arg(const CallArgs& args, size_t index, std::string_view name) {
  return argument(args, index, name, kUndefined);
}

// A keyword-only argument.
Value keyword(const CallArgs& args, std::string_view name) {
  return argument(args, SIZE_MAX, name, kUndefined);
}

bool flag(const CallArgs& args, size_t index, std::string_view name) {
  return arg(args, index, name).truthy();
}

Value length(const Value& v, const CallArgs&) {
  switch (v.kind()) {
    case Value::Kind::Undefined: return 0;
    case Value::Kind::String: return static_cast<int64_t>(code_points(v.as_string()).size());
    case Value::Kind::List: return static_cast<int64_t>(v.as_list().size());
    case Value::Kind::Dict: return static_cast<int64_t>(v.as_dict().entries.size());
    default: throw BuiltinError("object of type '" + v.type_name() + "' has no len()");
  }
}

Value first(const Value& v, const CallArgs&) {
  List items = iterate(v);
  return items.empty() ? Value() : items.front();
}

Value last(const Value& v, const CallArgs&) {
  List items = iterate(v);
  return items.empty() ? Value() : items.back();
}

Value join(const Value& v, const CallArgs& args) {
  const Value& sep = arg(args, 0, "d");
  const Value& attribute = arg(args, 1, "attribute");
  std::string out;
  bool first_item = true;
  for (const Value& item : iterate(v)) {
    if (!first_item) out += to_str(sep);
    first_item = false;
    out += to_str(attribute.is_undefined() ? item : get_attribute(item, to_str(attribute)));
  }
  return out;
}

Value default_(const Value& v, const CallArgs& args) {
  const Value& fallback = argument(args, 0, "default_value", Value(""));
  bool boolean = flag(args, 1, "boolean");
  return v.is_undefined() || (boolean && !v.truthy()) ? fallback : v;
}

Value tojson(const Value& v, const CallArgs& args) {
  const Value& indent = arg(args, 0, "indent");
  std::optional<int> spaces;
  if (indent.is_int()) spaces = static_cast<int>(std::clamp<int64_t>(indent.as_int(), 0, 64));
  return to_json(v, spaces, flag(args, 1, "sort_keys"));
}

Value string(const Value& v, const CallArgs&) { return to_str(v); }

Value int_(const Value& v, const CallArgs& args) {
  const Value& fallback = argument(args, 0, "default", Value(0));
  if (v.is_int() || v.is_bool()) return v.as_int();
  if (v.is_float()) {
    double d = std::trunc(v.as_double());
    return std::isfinite(d) && std::fabs(d) < 9.2e18 ? Value(static_cast<int64_t>(d)) : fallback;
  }
  if (!v.is_string()) return fallback;
  std::string s = strip(v.as_string(), Value(), true, true);
  try {
    size_t used = 0;
    int64_t i = std::stoll(s, &used);
    if (used == s.size()) return i;
    return int_(Value(std::stod(s, &used)), args);
  } catch (const std::exception&) {
    return fallback;
  }
}

Value float_(const Value& v, const CallArgs& args) {
  const Value& fallback = argument(args, 0, "default", Value(0.0));
  if (v.is_number()) return v.as_double();
  if (!v.is_string()) return fallback;
  try {
    size_t used = 0;
    std::string s = strip(v.as_string(), Value(), true, true);
    double d = std::stod(s, &used);
    return used == s.size() ? Value(d) : fallback;
  } catch (const std::exception&) {
    return fallback;
  }
}

Value list(const Value& v, const CallArgs&) { return iterate(v); }

Value items(const Value& v, const CallArgs&) {
  if (v.is_undefined()) return List{};
  if (!v.is_dict()) throw BuiltinError("items filter expects a mapping, got '" + v.type_name() + "'");
  List out;
  for (const auto& [k, item] : v.as_dict().entries) out.emplace_back(List{Value(k), item});
  return out;
}

Value replace_(const Value& v, const CallArgs& args) {
  const Value& count = arg(args, 2, "count");
  return replace(to_str(v), to_str(arg(args, 0, "old")), to_str(arg(args, 1, "new")),
                 count.is_int() ? count.as_int() : -1);
}

Value trim(const Value& v, const CallArgs& args) { return strip(to_str(v), arg(args, 0, "chars"), true, true); }
Value upper(const Value& v, const CallArgs&) { return to_upper(to_str(v)); }
Value lower(const Value& v, const CallArgs&) { return to_lower(to_str(v)); }
Value capitalize_(const Value& v, const CallArgs&) { return capitalize(to_str(v)); }
Value title_(const Value& v, const CallArgs&) { return title(to_str(v)); }
Value safe(const Value& v, const CallArgs&) { return v; }

Value escape(const Value& v, const CallArgs&) {
  std::string out;
  for (char c : to_str(v)) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&#34;"; break;
      case '\'': out += "&#39;"; break;
      default: out += c;
    }
  }
  return out;
}

// The value a sorting or uniqueness filter compares: an attribute, lowercased unless
// case_sensitive (Jinja's default is case-insensitive).
Value sort_key(const Value& item, const Value& attribute, bool case_sensitive) {
  Value key = attribute.is_undefined() ? item : get_attribute(item, to_str(attribute));
  return key.is_string() && !case_sensitive ? Value(to_lower(key.as_string())) : key;
}

Value unique(const Value& v, const CallArgs& args) {
  bool case_sensitive = flag(args, 0, "case_sensitive");
  const Value& attribute = arg(args, 1, "attribute");
  List out, seen;
  for (const Value& item : iterate(v)) {
    Value key = sort_key(item, attribute, case_sensitive);
    if (std::none_of(seen.begin(), seen.end(), [&](const Value& s) { return equals(s, key); })) {
      seen.push_back(key);
      out.push_back(item);
    }
  }
  return out;
}

// Remaining positional arguments after the first `skip`, passed on to a filter or test.
CallArgs rest(const CallArgs& args, size_t skip) {
  CallArgs out;
  if (args.positional.size() > skip) out.positional.assign(args.positional.begin() + static_cast<long>(skip), args.positional.end());
  return out;
}

Value map(const Value& v, const CallArgs& args) {
  List out;
  const Value& attribute = keyword(args, "attribute");
  if (!attribute.is_undefined()) {
    const Value& fallback = keyword(args, "default");
    for (const Value& item : iterate(v)) {
      Value got = get_attribute(item, to_str(attribute));
      out.push_back(got.is_undefined() ? fallback : got);
    }
    return out;
  }
  if (args.positional.empty() || !args.positional[0].is_string()) throw BuiltinError("map requires a filter name or attribute=");
  const std::string& name = args.positional[0].as_string();
  if (!is_filter(name)) throw BuiltinError("unknown filter '" + name + "'");
  for (const Value& item : iterate(v)) out.push_back(apply_filter(name, item, rest(args, 1)));
  return out;
}

// select/reject and selectattr/rejectattr: a test (truthiness when none is named)
// applied to each item or to one of its attributes.
Value select_items(const Value& v, const CallArgs& args, bool by_attribute, bool keep) {
  size_t test_index = by_attribute ? 1 : 0;
  std::string attribute = by_attribute ? to_str(arg(args, 0, "attribute")) : "";
  const Value& test = arg(args, test_index, "test");
  if (!test.is_undefined() && !is_test(to_str(test))) throw BuiltinError("unknown test '" + to_str(test) + "'");
  List out;
  for (const Value& item : iterate(v)) {
    Value subject = by_attribute ? get_attribute(item, attribute) : item;
    bool pass = test.is_undefined() ? subject.truthy() : apply_test(to_str(test), subject, rest(args, test_index + 1));
    if (pass == keep) out.push_back(item);
  }
  return out;
}

Value select(const Value& v, const CallArgs& args) { return select_items(v, args, false, true); }
Value reject(const Value& v, const CallArgs& args) { return select_items(v, args, false, false); }
Value selectattr(const Value& v, const CallArgs& args) { return select_items(v, args, true, true); }
Value rejectattr(const Value& v, const CallArgs& args) { return select_items(v, args, true, false); }

Value number(const Value& v, const char* filter) {
  if (!v.is_number()) throw BuiltinError(std::string(filter) + " filter expects a number, got '" + v.type_name() + "'");
  return v;
}

// Python's round() on floats: ties go to the even neighbour.
Value round_(const Value& v, const CallArgs& args) {
  double x = number(v, "round").as_double();
  const Value& precision = arg(args, 0, "precision");
  std::string method = to_str(argument(args, 1, "method", Value("common")));
  double scale = std::pow(10.0, precision.is_int() ? static_cast<double>(precision.as_int()) : 0.0);
  double scaled = x * scale;
  if (method == "ceil") scaled = std::ceil(scaled);
  else if (method == "floor") scaled = std::floor(scaled);
  else if (method == "common") scaled = std::nearbyint(scaled);
  else throw BuiltinError("round method must be 'common', 'ceil' or 'floor'");
  return scaled / scale;
}

Value abs_(const Value& v, const CallArgs&) {
  Value n = number(v, "abs");
  if (n.is_float()) return std::fabs(n.as_double());
  return n.as_int() < 0 ? negate(n) : Value(n.as_int());
}

// Jinja 3's indent: every line but the first (unless first=True) gets the prefix;
// blank lines only with blank=True.
Value indent(const Value& v, const CallArgs& args) {
  const Value& width = argument(args, 0, "width", Value(4));
  std::string prefix = width.is_string() ? width.as_string()
                                          : std::string(static_cast<size_t>(std::clamp<int64_t>(width.as_int(), 0, 256)), ' ');
  bool indent_first = flag(args, 1, "first"), blank = flag(args, 2, "blank");
  List lines = split(to_str(v) + "\n", Value("\n"), -1);
  lines.pop_back();
  std::string out;
  for (size_t i = 0; i < lines.size(); ++i) {
    const std::string& line = lines[i].as_string();
    if (i > 0) out += "\n";
    if ((i > 0 || indent_first) && (blank || !line.empty())) out += prefix;
    out += line;
  }
  return out;
}

Value dictsort(const Value& v, const CallArgs& args) {
  bool case_sensitive = flag(args, 0, "case_sensitive");
  bool by_value = to_str(argument(args, 1, "by", Value("key"))) == "value";
  bool reverse = flag(args, 2, "reverse");
  List pairs = items(v, {}).as_list();
  std::stable_sort(pairs.begin(), pairs.end(), [&](const Value& a, const Value& b) {
    size_t k = by_value ? 1 : 0;
    Value x = sort_key(a.as_list()[k], Value(), case_sensitive), y = sort_key(b.as_list()[k], Value(), case_sensitive);
    return reverse ? less(y, x) : less(x, y);
  });
  return pairs;
}

Value sort(const Value& v, const CallArgs& args) {
  bool reverse = flag(args, 0, "reverse"), case_sensitive = flag(args, 1, "case_sensitive");
  const Value& attribute = arg(args, 2, "attribute");
  List out = iterate(v);
  std::stable_sort(out.begin(), out.end(), [&](const Value& a, const Value& b) {
    Value x = sort_key(a, attribute, case_sensitive), y = sort_key(b, attribute, case_sensitive);
    return reverse ? less(y, x) : less(x, y);
  });
  return out;
}

Value reverse(const Value& v, const CallArgs&) {
  List out = iterate(v);
  std::reverse(out.begin(), out.end());
  if (!v.is_string()) return out;
  std::string s;
  for (const Value& c : out) s += c.as_string();
  return s;
}

Value sum(const Value& v, const CallArgs& args) {
  const Value& attribute = arg(args, 0, "attribute");
  Value total = argument(args, 1, "start", Value(0));
  for (const Value& item : iterate(v)) {
    total = binary_op("+", total, attribute.is_undefined() ? item : get_attribute(item, to_str(attribute)));
  }
  return total;
}

Value extreme(const Value& v, const CallArgs& args, bool want_max) {
  bool case_sensitive = flag(args, 0, "case_sensitive");
  const Value& attribute = arg(args, 1, "attribute");
  List all = iterate(v);
  if (all.empty()) return Value();
  auto cmp = [&](const Value& a, const Value& b) {
    return less(sort_key(a, attribute, case_sensitive), sort_key(b, attribute, case_sensitive));
  };
  return want_max ? *std::max_element(all.begin(), all.end(), cmp) : *std::min_element(all.begin(), all.end(), cmp);
}

Value max(const Value& v, const CallArgs& args) { return extreme(v, args, true); }
Value min(const Value& v, const CallArgs& args) { return extreme(v, args, false); }

const std::map<std::string, Filter, std::less<>>& filters() {
  static const std::map<std::string, Filter, std::less<>> table = {
      {"abs", abs_}, {"capitalize", capitalize_}, {"count", length}, {"d", default_},
      {"default", default_}, {"dictsort", dictsort}, {"e", escape}, {"escape", escape},
      {"first", first}, {"float", float_}, {"indent", indent}, {"int", int_},
      {"items", items}, {"join", join}, {"last", last}, {"length", length},
      {"list", list}, {"lower", lower}, {"map", map}, {"max", max}, {"min", min},
      {"reject", reject}, {"rejectattr", rejectattr}, {"replace", replace_},
      {"reverse", reverse}, {"round", round_}, {"safe", safe}, {"select", select},
      {"selectattr", selectattr}, {"sort", sort}, {"string", string}, {"sum", sum},
      {"title", title_}, {"tojson", tojson}, {"trim", trim}, {"unique", unique},
      {"upper", upper},
  };
  return table;
}

}  // namespace

Value argument(const CallArgs& args, size_t index, std::string_view name, const Value& fallback) {
  if (index < args.positional.size()) return args.positional[index];
  for (const auto& [key, value] : args.named) {
    if (key == name) return value;
  }
  return fallback;
}

bool is_filter(std::string_view name) { return filters().count(name) != 0; }

Value apply_filter(std::string_view name, const Value& subject, const CallArgs& args) {
  auto it = filters().find(name);
  if (it == filters().end()) throw BuiltinError("unknown filter '" + std::string(name) + "'");
  return it->second(subject, args);
}

}  // namespace tsr::jinja
