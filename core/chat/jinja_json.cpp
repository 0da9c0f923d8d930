#include "core/chat/jinja_json.h"

#include <algorithm>
#include <cmath>

#include "core/chat/jinja_error.h"
#include "core/chat/jinja_operators.h"

namespace tsr::jinja {
namespace {

std::string quote(const std::string& s) {
  std::string out = "\"";
  for (unsigned char c : s) {
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\r': out += "\\r"; break;
      case '\t': out += "\\t"; break;
      case '\b': out += "\\b"; break;
      case '\f': out += "\\f"; break;
      default:
        if (c < 0x20) {
          static const char hex[] = "0123456789abcdef";
          out += std::string("\\u00") + hex[c >> 4] + hex[c & 15];
        } else {
          out += static_cast<char>(c);
        }
    }
  }
  return out + "\"";
}

class JsonWriter {
 public:
  JsonWriter(std::optional<int> indent, bool sort_keys) : indent_(indent), sort_keys_(sort_keys) {}

  // Shared items can make a small value print as exponentially many (see jinja_value.cpp):
  // the output is bounded as it grows.
  void write(const Value& v, int depth) {
    if (depth > kMaxNesting) throw BuiltinError("tojson: value nested too deeply");
    if (out.size() > kMaxValueSize) throw BuiltinError("tojson: result too large");
    switch (v.kind()) {
      case Value::Kind::Undefined:
      case Value::Kind::None: out += "null"; break;
      case Value::Kind::Bool: out += v.as_bool() ? "true" : "false"; break;
      case Value::Kind::Int: out += std::to_string(v.as_int()); break;
      case Value::Kind::Float: write_float(v.as_double()); break;
      case Value::Kind::String: out += quote(v.as_string()); break;
      case Value::Kind::List: write_list(v.as_list(), depth); break;
      case Value::Kind::Dict: write_dict(v.as_dict(), depth); break;
      case Value::Kind::Function: throw BuiltinError("tojson: a function is not JSON serializable");
    }
  }

  std::string out;

 private:
  void write_float(double d) {
    if (std::isnan(d)) out += "NaN";
    else if (std::isinf(d)) out += d < 0 ? "-Infinity" : "Infinity";
    else out += format_float(d);
  }

  // Python puts each item on its own line when indenting, and ", " between items otherwise.
  void separate(size_t index, int depth) {
    if (index > 0) out += indent_ ? "," : ", ";
    if (indent_) out += "\n" + std::string(static_cast<size_t>(*indent_) * (depth + 1), ' ');
  }

  void close(char bracket, int depth) {
    if (indent_) out += "\n" + std::string(static_cast<size_t>(*indent_) * depth, ' ');
    out += bracket;
  }

  void write_list(const List& list, int depth) {
    if (list.empty()) {
      out += "[]";
      return;
    }
    out += '[';
    for (size_t i = 0; i < list.size(); ++i) {
      separate(i, depth);
      write(list[i], depth + 1);
    }
    close(']', depth);
  }

  void write_dict(const Dict& dict, int depth) {
    if (dict.entries.empty()) {
      out += "{}";
      return;
    }
    std::vector<const std::pair<std::string, Value>*> entries;
    for (const auto& e : dict.entries) entries.push_back(&e);
    if (sort_keys_) {
      std::sort(entries.begin(), entries.end(), [](auto* a, auto* b) { return a->first < b->first; });
    }
    out += '{';
    for (size_t i = 0; i < entries.size(); ++i) {
      separate(i, depth);
      out += quote(entries[i]->first) + ": ";
      write(entries[i]->second, depth + 1);
    }
    close('}', depth);
  }

  std::optional<int> indent_;
  bool sort_keys_;
};

}  // namespace

std::string to_json(const Value& value, std::optional<int> indent, bool sort_keys) {
  JsonWriter writer(indent, sort_keys);
  writer.write(value, 0);
  return std::move(writer.out);
}

Value from_json(const nlohmann::ordered_json& j) {
  using T = nlohmann::ordered_json::value_t;
  switch (j.type()) {
    case T::boolean: return j.get<bool>();
    case T::number_integer:
    case T::number_unsigned: return j.get<int64_t>();
    case T::number_float: return j.get<double>();
    case T::string: return j.get<std::string>();
    case T::array: {
      List l;
      for (const auto& item : j) l.push_back(from_json(item));
      return l;
    }
    case T::object: {
      Dict d;
      for (const auto& [k, v] : j.items()) d.set(k, from_json(v));
      return d;
    }
    default: return Value::none();
  }
}

}  // namespace tsr::jinja
