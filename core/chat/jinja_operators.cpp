#include "core/chat/jinja_operators.h"

#include <algorithm>
#include <cmath>

#include "core/chat/jinja_error.h"

namespace tsr::jinja {
namespace {

[[noreturn]] void unsupported(std::string_view op, const Value& a, const Value& b) {
  throw BuiltinError("unsupported operand types for " + std::string(op) + ": '" + a.type_name() +
                     "' and '" + b.type_name() + "'");
}

// Wraps __builtin_*_overflow(a, b, &result), which reports overflow by returning true.
template <typename Op>
int64_t checked(Op op, int64_t a, int64_t b) {
  int64_t result;
  if (op(a, b, &result)) throw BuiltinError("integer overflow");
  return result;
}

bool add_overflow(int64_t a, int64_t b, int64_t* r) { return __builtin_add_overflow(a, b, r); }
bool sub_overflow(int64_t a, int64_t b, int64_t* r) { return __builtin_sub_overflow(a, b, r); }
bool mul_overflow(int64_t a, int64_t b, int64_t* r) { return __builtin_mul_overflow(a, b, r); }

// Bytes a list's items take when copied: strings are held by value, so copying a list of
// long strings copies them (a list item of another kind counts as a small fixed size).
size_t copied_bytes(const List& items) {
  size_t bytes = 0;
  for (const Value& v : items) bytes += v.is_string() ? v.as_string().size() + 16 : 16;
  return bytes;
}

Value repeat(const Value& seq, int64_t times) {
  times = std::max<int64_t>(times, 0);
  size_t unit = seq.is_string() ? seq.as_string().size() : copied_bytes(seq.as_list());
  if (unit != 0 && static_cast<uint64_t>(times) > kMaxValueSize / unit) throw BuiltinError("result too large");
  if (seq.is_string()) {
    std::string out;
    for (int64_t i = 0; i < times; ++i) out += seq.as_string();
    return out;
  }
  List out;
  for (int64_t i = 0; i < times; ++i) out.insert(out.end(), seq.as_list().begin(), seq.as_list().end());
  return out;
}

Value add(const Value& a, const Value& b) {
  if (a.is_string() && b.is_string()) {
    if (a.as_string().size() + b.as_string().size() > kMaxValueSize) throw BuiltinError("result too large");
    return a.as_string() + b.as_string();
  }
  if (a.is_list() && b.is_list()) {
    if (copied_bytes(a.as_list()) + copied_bytes(b.as_list()) > kMaxValueSize) throw BuiltinError("result too large");
    List out = a.as_list();
    out.insert(out.end(), b.as_list().begin(), b.as_list().end());
    return out;
  }
  if (!a.is_number() || !b.is_number()) unsupported("+", a, b);
  if (a.is_float() || b.is_float()) return a.as_double() + b.as_double();
  return checked(add_overflow, a.as_int(), b.as_int());
}

Value multiply(const Value& a, const Value& b) {
  if ((a.is_string() || a.is_list()) && (b.is_int() || b.is_bool())) return repeat(a, b.as_int());
  if ((b.is_string() || b.is_list()) && (a.is_int() || a.is_bool())) return repeat(b, a.as_int());
  if (!a.is_number() || !b.is_number()) unsupported("*", a, b);
  if (a.is_float() || b.is_float()) return a.as_double() * b.as_double();
  return checked(mul_overflow, a.as_int(), b.as_int());
}

// Python's floor division and modulo: the result takes the divisor's sign.
Value divide(std::string_view op, const Value& a, const Value& b) {
  if (!a.is_number() || !b.is_number()) unsupported(op, a, b);
  if (b.as_double() == 0.0) throw BuiltinError(op == "%" ? "modulo by zero" : "division by zero");
  if (op == "/") return a.as_double() / b.as_double();
  if (a.is_float() || b.is_float()) {
    double x = a.as_double(), y = b.as_double();
    double m = std::fmod(x, y);
    if (m != 0 && ((m < 0) != (y < 0))) m += y;
    return op == "%" ? Value(m) : Value(std::floor(x / y));
  }
  int64_t x = a.as_int(), y = b.as_int();
  if (x == INT64_MIN && y == -1) throw BuiltinError("integer overflow");
  int64_t q = x / y, m = x % y;
  if (m != 0 && ((m < 0) != (y < 0))) {
    m += y;
    --q;
  }
  return op == "%" ? m : q;
}

Value power(const Value& a, const Value& b) {
  if (!a.is_number() || !b.is_number()) unsupported("**", a, b);
  if (a.is_float() || b.is_float() || b.as_int() < 0) return std::pow(a.as_double(), b.as_double());
  int64_t result = 1;
  for (int64_t i = 0; i < b.as_int() && result != 0; ++i) {
    result = checked(mul_overflow, result, a.as_int());
    if (result == 1 || result == -1) {  // 1 and -1 repeat; finish by parity
      if (result == -1 && (b.as_int() - i - 1) % 2 == 1) result = 1;
      break;
    }
  }
  return result;
}

bool member(const Value& item, const Value& container) {
  if (container.is_string()) {
    if (!item.is_string()) throw BuiltinError("'in <string>' requires a string as left operand");
    return container.as_string().find(item.as_string()) != std::string::npos;
  }
  if (container.is_dict()) return item.is_string() && container.as_dict().find(item.as_string());
  if (container.is_list()) {
    const List& l = container.as_list();
    return std::any_of(l.begin(), l.end(), [&](const Value& v) { return equals(item, v); });
  }
  if (container.is_undefined()) return false;
  throw BuiltinError("argument of type '" + container.type_name() + "' is not iterable");
}

}  // namespace

Value binary_op(std::string_view op, const Value& a, const Value& b) {
  if (op == "+") return add(a, b);
  if (op == "-") {
    if (!a.is_number() || !b.is_number()) unsupported(op, a, b);
    if (a.is_float() || b.is_float()) return a.as_double() - b.as_double();
    return checked(sub_overflow, a.as_int(), b.as_int());
  }
  if (op == "*") return multiply(a, b);
  if (op == "/" || op == "//" || op == "%") return divide(op, a, b);
  if (op == "**") return power(a, b);
  if (op == "~") {
    std::string s = to_str(a) + to_str(b);
    if (s.size() > kMaxValueSize) throw BuiltinError("result too large");
    return s;
  }
  if (op == "==") return equals(a, b);
  if (op == "!=") return !equals(a, b);
  if (op == "<") return less(a, b);
  if (op == ">") return less(b, a);
  if (op == "<=") return !less(b, a);
  if (op == ">=") return !less(a, b);
  if (op == "in") return member(a, b);
  if (op == "not in") return !member(a, b);
  throw BuiltinError("unknown operator " + std::string(op));
}

Value negate(const Value& v) {
  if (v.is_float()) return -v.as_double();
  if (!v.is_number()) throw BuiltinError("bad operand type for unary -: '" + v.type_name() + "'");
  return checked(sub_overflow, 0, v.as_int());
}

Value get_attribute(const Value& obj, const std::string& name) {
  if (!obj.is_dict()) return Value();
  const Value* found = obj.as_dict().find(name);
  return found ? *found : Value();
}

Value get_item(const Value& obj, const Value& key) {
  if (obj.is_dict()) return key.is_string() ? get_attribute(obj, key.as_string()) : Value();
  if (!(key.is_int() || key.is_bool()) || !(obj.is_list() || obj.is_string())) return Value();
  int64_t i = key.as_int();
  if (obj.is_list()) {
    const List& l = obj.as_list();
    int64_t n = static_cast<int64_t>(l.size());
    if (i < 0) i += n;
    return i >= 0 && i < n ? l[static_cast<size_t>(i)] : Value();
  }
  std::vector<std::string> chars = code_points(obj.as_string());
  int64_t n = static_cast<int64_t>(chars.size());
  if (i < 0) i += n;
  return i >= 0 && i < n ? Value(chars[static_cast<size_t>(i)]) : Value();
}

namespace {

// Python's slice.indices(): clamps the bounds and returns the positions visited.
std::vector<size_t> slice_positions(size_t size, const Value& start, const Value& stop, const Value& step) {
  auto as_bound = [](const Value& v, const char* what) {
    if (!(v.is_int() || v.is_bool())) throw BuiltinError(std::string("slice ") + what + " must be an integer");
    return v.as_int();
  };
  bool no_step = step.is_undefined() || step.is_none();
  int64_t s = no_step ? 1 : as_bound(step, "step");
  if (s == 0) throw BuiltinError("slice step cannot be zero");
  int64_t n = static_cast<int64_t>(size);
  int64_t lower = s > 0 ? 0 : -1, upper = s > 0 ? n : n - 1;
  auto clamp = [&](const Value& v, int64_t fallback, const char* what) {
    if (v.is_undefined() || v.is_none()) return fallback;
    int64_t x = as_bound(v, what);
    return x < 0 ? std::max(x + n, lower) : std::min(x, upper);
  };
  int64_t from = clamp(start, s > 0 ? lower : upper, "start");
  int64_t to = clamp(stop, s > 0 ? upper : lower, "stop");
  std::vector<size_t> out;
  for (int64_t i = from; s > 0 ? i < to : i > to; i += s) out.push_back(static_cast<size_t>(i));
  return out;
}

}  // namespace

Value slice(const Value& obj, const Value& start, const Value& stop, const Value& step) {
  if (obj.is_list()) {
    List out;
    for (size_t i : slice_positions(obj.as_list().size(), start, stop, step)) out.push_back(obj.as_list()[i]);
    return out;
  }
  if (obj.is_string()) {
    std::vector<std::string> chars = code_points(obj.as_string());
    std::string out;
    for (size_t i : slice_positions(chars.size(), start, stop, step)) out += chars[i];
    return out;
  }
  throw BuiltinError("'" + obj.type_name() + "' object is not subscriptable");
}

List iterate(const Value& v) {
  switch (v.kind()) {
    case Value::Kind::Undefined: return {};
    case Value::Kind::List: return v.as_list();
    case Value::Kind::String: {
      List out;
      for (std::string& c : code_points(v.as_string())) out.emplace_back(std::move(c));
      return out;
    }
    case Value::Kind::Dict: {
      List out;
      for (const auto& entry : v.as_dict().entries) out.emplace_back(entry.first);
      return out;
    }
    default: throw BuiltinError("'" + v.type_name() + "' object is not iterable");
  }
}

}  // namespace tsr::jinja
