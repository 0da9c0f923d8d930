// The values a Jinja template computes with. They follow Python's semantics as Jinja
// (and so Hugging Face's chat templates) sees them: lists and dicts are shared by
// reference, `undefined` is distinct from `none`, and printing uses Python's str().
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <variant>
#include <vector>

namespace tsr::jinja {

class Value;
using List = std::vector<Value>;

// Insertion-ordered string-keyed mapping (Python dicts keep insertion order, and
// tojson/items output depends on it). Chat-template dicts are small: linear search.
struct Dict {
  std::vector<std::pair<std::string, Value>> entries;
  bool is_namespace = false;  // created by namespace(): the only object `set x.y` may change

  const Value* find(std::string_view key) const;
  void set(std::string key, Value value);
};

struct CallArgs {
  std::vector<Value> positional;
  std::vector<std::pair<std::string, Value>> named;
};
using Function = std::function<Value(const CallArgs&)>;

class Value {
 public:
  enum class Kind { Undefined, None, Bool, Int, Float, String, List, Dict, Function };

  Value() = default;  // undefined
  static Value none() { return Value(nullptr); }
  Value(std::nullptr_t) : v_(nullptr) {}
  Value(bool b) : v_(b) {}
  Value(int i) : v_(int64_t{i}) {}
  Value(int64_t i) : v_(i) {}
  Value(double d) : v_(d) {}
  Value(std::string s) : v_(std::move(s)) {}
  Value(const char* s) : v_(std::string(s)) {}
  Value(List l) : v_(std::make_shared<List>(std::move(l))) {}
  Value(Dict d) : v_(std::make_shared<Dict>(std::move(d))) {}
  Value(Function f) : v_(std::make_shared<Function>(std::move(f))) {}

  Kind kind() const { return static_cast<Kind>(v_.index()); }
  bool is_undefined() const { return kind() == Kind::Undefined; }
  bool is_none() const { return kind() == Kind::None; }
  bool is_bool() const { return kind() == Kind::Bool; }
  bool is_int() const { return kind() == Kind::Int; }
  bool is_float() const { return kind() == Kind::Float; }
  bool is_number() const { return is_int() || is_float() || is_bool(); }
  bool is_string() const { return kind() == Kind::String; }
  bool is_list() const { return kind() == Kind::List; }
  bool is_dict() const { return kind() == Kind::Dict; }
  bool is_function() const { return kind() == Kind::Function; }

  bool as_bool() const { return std::get<bool>(v_); }
  int64_t as_int() const;      // Int or Bool
  double as_double() const;    // any number
  const std::string& as_string() const { return std::get<std::string>(v_); }
  List& as_list() const { return *std::get<std::shared_ptr<List>>(v_); }
  Dict& as_dict() const { return *std::get<std::shared_ptr<Dict>>(v_); }
  const Function& as_function() const { return *std::get<std::shared_ptr<Function>>(v_); }
  const void* identity() const;  // the shared list/dict, for cycle checks; null otherwise

  bool truthy() const;
  std::string type_name() const;  // Python's name: 'str', 'int', 'NoneType', ...

 private:
  std::variant<std::monostate, std::nullptr_t, bool, int64_t, double, std::string,
               std::shared_ptr<List>, std::shared_ptr<Dict>, std::shared_ptr<Function>>
      v_;
};

// Python str(): what {{ value }} prints. Undefined prints as nothing.
std::string to_str(const Value& v);
// Python repr(): how strings look inside a printed list or dict.
std::string repr(const Value& v);
// Python float repr: shortest round-trip digits, "1.0" rather than "1".
std::string format_float(double d);

bool equals(const Value& a, const Value& b);
// Python's `<` for numbers, strings and lists; throws for other combinations.
bool less(const Value& a, const Value& b);
// True when `inner` is `outer` or is reachable from it (to refuse cyclic namespaces).
bool contains_object(const Value& outer, const void* inner);

// UTF-8 code points: Python indexes, slices and measures strings by them.
std::vector<std::string> code_points(std::string_view s);

}  // namespace tsr::jinja
