#include "core/chat/jinja_value.h"

#include <charconv>
#include <cmath>
#include <cstdlib>

#include "core/chat/jinja_error.h"

namespace tsr::jinja {

const Value* Dict::find(std::string_view key) const {
  for (const auto& [k, v] : entries) {
    if (k == key) return &v;
  }
  return nullptr;
}

void Dict::set(std::string key, Value value) {
  for (auto& [k, v] : entries) {
    if (k == key) {
      v = std::move(value);
      return;
    }
  }
  entries.emplace_back(std::move(key), std::move(value));
}

int64_t Value::as_int() const { return is_bool() ? int64_t{as_bool()} : std::get<int64_t>(v_); }

double Value::as_double() const {
  return is_float() ? std::get<double>(v_) : static_cast<double>(as_int());
}

const void* Value::identity() const {
  if (is_list()) return &as_list();
  if (is_dict()) return &as_dict();
  return nullptr;
}

bool Value::truthy() const {
  switch (kind()) {
    case Kind::Undefined:
    case Kind::None: return false;
    case Kind::Bool: return as_bool();
    case Kind::Int: return as_int() != 0;
    case Kind::Float: return as_double() != 0.0;
    case Kind::String: return !as_string().empty();
    case Kind::List: return !as_list().empty();
    case Kind::Dict: return !as_dict().entries.empty();
    case Kind::Function: return true;
  }
  return false;
}

std::string Value::type_name() const {
  static const char* const names[] = {"Undefined", "NoneType", "bool", "int", "float",
                                      "str", "list", "dict", "function"};
  return names[static_cast<int>(kind())];
}

std::string format_float(double d) {
  if (std::isnan(d)) return "nan";
  if (std::isinf(d)) return d < 0 ? "-inf" : "inf";
  char buf[64];
  auto res = std::to_chars(buf, buf + sizeof buf, d, std::chars_format::scientific);
  std::string sci(buf, res.ptr);
  // sci is "-d.ddde+XX": split into sign, digits and decimal exponent.
  std::string sign = sci[0] == '-' ? "-" : "";
  if (!sign.empty()) sci.erase(0, 1);
  size_t e = sci.find('e');
  int exponent = std::atoi(sci.c_str() + e + 1);
  std::string digits = sci.substr(0, e);
  if (digits.size() > 1) digits.erase(1, 1);  // drop the '.'
  if (exponent < -4 || exponent >= 16) {  // Python's repr switches to exponent form here
    std::string mant = digits.size() > 1 ? digits.substr(0, 1) + "." + digits.substr(1) : digits;
    std::string exp = std::to_string(std::abs(exponent));
    if (exp.size() < 2) exp = "0" + exp;
    return sign + mant + "e" + (exponent < 0 ? "-" : "+") + exp;
  }
  if (exponent < 0) return sign + "0." + std::string(-exponent - 1, '0') + digits;
  size_t int_len = static_cast<size_t>(exponent) + 1;
  if (digits.size() <= int_len) return sign + digits + std::string(int_len - digits.size(), '0') + ".0";
  return sign + digits.substr(0, int_len) + "." + digits.substr(int_len);
}

namespace {

void check_depth(int depth) {
  if (depth > kMaxNesting) throw BuiltinError("value nested too deeply (cyclic?)");
}

std::string repr_string(const std::string& s) {
  char quote = s.find('\'') != std::string::npos && s.find('"') == std::string::npos ? '"' : '\'';
  std::string out(1, quote);
  for (unsigned char c : s) {
    if (c == '\\') out += "\\\\";
    else if (c == static_cast<unsigned char>(quote)) out += std::string("\\") + quote;
    else if (c == '\n') out += "\\n";
    else if (c == '\r') out += "\\r";
    else if (c == '\t') out += "\\t";
    else if (c < 0x20 || c == 0x7f) {
      static const char hex[] = "0123456789abcdef";
      out += std::string("\\x") + hex[c >> 4] + hex[c & 15];
    } else {
      out += static_cast<char>(c);
    }
  }
  return out + quote;
}

// A walk over a value (printing, comparing, searching). Lists and dicts share their items,
// so a small value can stand for exponentially many nodes ([x, x] nested forty deep): a
// walk visits at most kMaxWalk of them and prints at most kMaxWalkOutput bytes.
constexpr uint64_t kMaxWalk = uint64_t{1} << 22;
constexpr size_t kMaxWalkOutput = size_t{32} << 20;
struct Walk {
  uint64_t nodes = 0;
  void visit(int depth) {
    check_depth(depth);
    if (++nodes > kMaxWalk) throw BuiltinError("value too large to walk (over " + std::to_string(kMaxWalk) + " items)");
  }
  static void check_size(size_t bytes) {
    if (bytes > kMaxWalkOutput) throw BuiltinError("result too large");
  }
};

std::string str_at(const Value& v, bool as_repr, int depth, Walk& walk) {
  walk.visit(depth);
  switch (v.kind()) {
    case Value::Kind::Undefined: return "";
    case Value::Kind::None: return "None";
    case Value::Kind::Bool: return v.as_bool() ? "True" : "False";
    case Value::Kind::Int: return std::to_string(v.as_int());
    case Value::Kind::Float: return format_float(v.as_double());
    case Value::Kind::String: return as_repr ? repr_string(v.as_string()) : v.as_string();
    case Value::Kind::Function: return "<function>";
    case Value::Kind::List: {
      std::string out = "[";
      for (const Value& item : v.as_list()) {
        if (out.size() > 1) out += ", ";
        out += str_at(item, true, depth + 1, walk);
        walk.check_size(out.size());
      }
      return out + "]";
    }
    case Value::Kind::Dict: {
      std::string out = "{";
      for (const auto& [k, item] : v.as_dict().entries) {
        if (out.size() > 1) out += ", ";
        out += repr_string(k) + ": " + str_at(item, true, depth + 1, walk);
        walk.check_size(out.size());
      }
      return out + "}";
    }
  }
  return "";
}

bool equals_at(const Value& a, const Value& b, int depth, Walk& walk) {
  walk.visit(depth);
  if (a.is_number() && b.is_number()) {
    if (a.is_float() || b.is_float()) return a.as_double() == b.as_double();
    return a.as_int() == b.as_int();
  }
  if (a.kind() != b.kind()) return false;
  switch (a.kind()) {
    case Value::Kind::String: return a.as_string() == b.as_string();
    case Value::Kind::List: {
      const List &x = a.as_list(), &y = b.as_list();
      if (x.size() != y.size()) return false;
      for (size_t i = 0; i < x.size(); ++i) {
        if (!equals_at(x[i], y[i], depth + 1, walk)) return false;
      }
      return true;
    }
    case Value::Kind::Dict: {
      const Dict &x = a.as_dict(), &y = b.as_dict();
      if (x.entries.size() != y.entries.size()) return false;
      for (const auto& [k, v] : x.entries) {
        const Value* other = y.find(k);
        if (!other || !equals_at(v, *other, depth + 1, walk)) return false;
      }
      return true;
    }
    case Value::Kind::Function: return &a.as_function() == &b.as_function();
    default: return true;  // undefined == undefined, none == none
  }
}

bool contains_at(const Value& outer, const void* inner, int depth, Walk& walk) {
  walk.visit(depth);
  if (outer.identity() == inner) return true;
  if (outer.is_list()) {
    for (const Value& item : outer.as_list()) {
      if (contains_at(item, inner, depth + 1, walk)) return true;
    }
  } else if (outer.is_dict()) {
    for (const auto& entry : outer.as_dict().entries) {
      if (contains_at(entry.second, inner, depth + 1, walk)) return true;
    }
  }
  return false;
}

}  // namespace

std::string to_str(const Value& v) {
  Walk walk;
  return str_at(v, false, 0, walk);
}
std::string repr(const Value& v) {
  Walk walk;
  return str_at(v, true, 0, walk);
}
bool equals(const Value& a, const Value& b) {
  Walk walk;
  return equals_at(a, b, 0, walk);
}
bool contains_object(const Value& outer, const void* inner) {
  Walk walk;
  return contains_at(outer, inner, 0, walk);
}

bool less(const Value& a, const Value& b) {
  if (a.is_number() && b.is_number()) {
    if (a.is_float() || b.is_float()) return a.as_double() < b.as_double();
    return a.as_int() < b.as_int();
  }
  if (a.is_string() && b.is_string()) return a.as_string() < b.as_string();
  if (a.is_list() && b.is_list()) {
    const List &x = a.as_list(), &y = b.as_list();
    for (size_t i = 0; i < x.size() && i < y.size(); ++i) {
      if (less(x[i], y[i])) return true;
      if (less(y[i], x[i])) return false;
    }
    return x.size() < y.size();
  }
  throw BuiltinError("'<' not supported between '" + a.type_name() + "' and '" + b.type_name() + "'");
}

std::vector<std::string> code_points(std::string_view s) {
  std::vector<std::string> out;
  for (size_t i = 0; i < s.size();) {
    unsigned char c = static_cast<unsigned char>(s[i]);
    size_t len = c < 0x80 ? 1 : c >= 0xf0 ? 4 : c >= 0xe0 ? 3 : c >= 0xc0 ? 2 : 1;
    len = std::min(len, s.size() - i);
    out.emplace_back(s.substr(i, len));
    i += len;
  }
  return out;
}

}  // namespace tsr::jinja
