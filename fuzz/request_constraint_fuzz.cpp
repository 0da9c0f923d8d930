// Hostile clients: schemas, regexes, grammars and tools arriving inside request bodies,
// with recursion depth and input size as dimensions. The flat-bytes fuzzers never built
// the inputs that once crashed the server (a JSON Schema with a 20,000-character
// property name; allOf/anyOf/oneOf nested 100,000 deep in a guided_json string), so here
// the input is a small program that builds the request:
//
//   byte 0     carrier: where the constraint travels (kCarriers below)
//   bytes 1-2  depth = mantissa * 10^exponent (byte 1: exponent % 6, byte 2: mantissa),
//              at most kMaxDepth: how often the nesting construct repeats
//   bytes 3-4  size, the same way (exponent % 7), at most kMaxSize: the length of long
//              names, literals, enums, choices and descriptions
//   byte 5     construct: what nests (JSON Schema: allOf, anyOf, oneOf, not, items,
//              properties, $ref chains, additionalProperties, ...; regex: groups,
//              quantifiers, alternations, counted repetition; GBNF: nested parens, rule
//              chains, recursion)
//   byte 6     leaf: what sits at the bottom (a long property name, a long enum, ...)
//   byte 7     flags: endpoint, tool_choice, chat template, malformed text
//   bytes 8-   keywords and strings; a long string repeats a short pattern read here,
//              so that a seed of a few bytes expands to megabytes
//
// The nesting is built as text, never as an nlohmann tree, so that depth beyond any
// recursive parser is reached. The body then takes the server's path: parsed as
// parse_body parses it (depth bounded at 512: a schema object nested deeper is a 400
// there, a schema inside a string is not), parse_generation, apply_tool_choice and, for
// tools, the chat template rendered with them; then the constraint is compiled by the
// constraints library (the plugins' code) over the synthetic vocabulary and a few tokens
// are decoded through it. Every outcome is success, ApiError, tsr::Error or CompileError;
// anything else escaping, a crash or a stack overflow is a finding.
//
// Cost: each compile runs under a CompileBudget (constraints/compile_budget.h) with a 1 s
// deadline, as the plugins compile under the host's compile_timeout. The budget does not
// bound every part of a compile (the schema's translation and the GBNF text's parse are
// not charged), so a constraint text longer than kMaxCompileText is parsed into the
// request but not compiled: without that cap, one 100 KB property name compiles for
// seconds under ASan and libFuzzer reports timeouts instead of exploring. The depth
// dimension is not capped below the historical 100,000 levels (the libraries refuse such
// nesting early), and bodies up to kMaxSize still go through parse_generation and the
// chat template. A few tokens are decoded after the compile (mask fills, unbudgeted).
#include <spdlog/spdlog.h>

#include <nlohmann/json.hpp>

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "base/error.h"
#include "base/json_depth.h"
#if __has_include("constraints/compile_budget.h")
#include "constraints/compile_budget.h"
#define TESSERA_FUZZ_COMPILE_BUDGET 1
#endif
#include "constraints/compiled_grammar.h"
#include "constraints/errors.h"
#include "constraints/matcher.h"
#include "constraints/synthetic_vocab.h"
#include "core/chat/chat_template.h"
#include "core/chat/tool_calls.h"
#include "server/api_error.h"
#include "server/generation_params.h"
#include "server/http_message.h"
#include "server/openai_api.h"

namespace {

using nlohmann::json;

constexpr size_t kMaxDepth = 200'000;
constexpr size_t kMaxSize = 2'000'000;
constexpr size_t kMaxCompileText = 32 << 10;
constexpr int kMaxBodyDepth = 512;  // server/openai_api.cpp's parse_body
constexpr size_t kWalkSteps = 8;
constexpr std::chrono::milliseconds kCompileDeadline{1000};

// ---------------------------------------------------------------------------------------
// The program's bytes.

class Program {
 public:
  Program(const uint8_t* data, size_t size) : data_(data), size_(size) {}

  uint8_t byte() { return pos_ < size_ ? data_[pos_++] : 0; }
  size_t pick(size_t n) { return byte() % n; }
  bool flag() { return byte() & 1; }
  // mantissa * 10^exponent, capped: exact round values (20,000; 100,000) and log scale.
  size_t scaled(size_t max_exponent, size_t cap) {
    size_t e = byte() % (max_exponent + 1);
    size_t v = byte();
    while (e-- > 0 && v < cap) v *= 10;
    return std::min(v, cap);
  }
  size_t left() const { return size_ - std::min(pos_, size_); }

 private:
  const uint8_t* data_;
  size_t size_;
  size_t pos_ = 0;
};

// One byte -> one character (UTF-8): printable ASCII, JSON's awkward characters and
// multi-byte code points.
std::string_view glyph(uint8_t b) {
  static const char* const kOthers[] = {"\n", "\t", "\x01", "\x7f", "\xC3\xA9", "\xE6\x97\xA5", "\xF0\x9F\x98\x80",
                                        "\xE2\x80\xA8", "\xEF\xBF\xBF", "\xC2\x80", "\\", "\"", "a", "_", "0", "/"};
  static const std::string kAscii = [] {
    std::string s;
    for (char c = 0x20; c < 0x7f; ++c) s += c;
    return s;
  }();
  if (b < kAscii.size()) return std::string_view(kAscii).substr(b, 1);
  return kOthers[(b - kAscii.size()) % std::size(kOthers)];
}

// A string of about `len` bytes: a pattern of 1 to 16 glyphs read from the program,
// repeated. `alphabet` (when not empty) maps each byte into it instead.
std::string text_of(Program& p, size_t len, std::string_view alphabet = {}) {
  const size_t k = 1 + p.pick(16);
  std::vector<std::string_view> pattern;
  for (size_t i = 0; i < k; ++i) {
    const uint8_t b = p.byte();
    pattern.push_back(alphabet.empty() ? glyph(b) : alphabet.substr(b % alphabet.size(), 1));
  }
  std::string out;
  out.reserve(len + 4);
  for (size_t i = 0; out.size() < len; ++i) out += pattern[i % k];
  return out;
}

constexpr std::string_view kNameChars = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-";
constexpr std::string_view kLiteralChars = "abcxyz012 _-";

// The first `n` bytes of `s`, or fewer: never part of a UTF-8 sequence.
std::string utf8_prefix(const std::string& s, size_t n) {
  if (n >= s.size()) return s;
  while (n > 0 && (static_cast<unsigned char>(s[n]) & 0xC0) == 0x80) --n;
  return s.substr(0, n);
}

std::string json_string(std::string_view s) {
  std::string out = "\"";
  for (const char c : s) {
    const auto u = static_cast<unsigned char>(c);
    if (c == '"') out += "\\\"";
    else if (c == '\\') out += "\\\\";
    else if (u < 0x20) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\u%04x", u);
      out += buf;
    } else out += c;
  }
  return out + "\"";
}

std::string number(Program& p) {
  static const char* const kNumbers[] = {"0", "1", "-1", "3", "10", "255", "1e3", "0.5", "-2.5", "1000000",
                                         "2147483647", "-9223372036854775808", "18446744073709551616", "1e308", "1e-7",
                                         "123456789012345678901234567890"};
  return kNumbers[p.pick(std::size(kNumbers))];
}

// ---------------------------------------------------------------------------------------
// JSON Schema text.

// Small schemas built from a table of keywords and values (the "rest" of the program).
std::string free_schema(Program& p, size_t size) {
  static const char* const kTypes[] = {"\"string\"", "\"integer\"", "\"number\"", "\"boolean\"", "\"null\"",
                                       "\"object\"", "\"array\"", "[\"string\", \"null\"]", "\"bogus\"", "7"};
  static const char* const kFormats[] = {"date-time", "date", "time", "email", "uuid", "uri", "ipv4", "ipv6",
                                         "hostname", "duration", "regex", "unknown"};
  std::string out = "{";
  const size_t n = 1 + p.pick(4);
  for (size_t i = 0; i < n; ++i) {
    if (i) out += ", ";
    switch (p.pick(16)) {
      case 0: out += std::string("\"type\": ") + kTypes[p.pick(std::size(kTypes))]; break;
      case 1: out += "\"minLength\": " + number(p); break;
      case 2: out += "\"maxLength\": " + number(p); break;
      case 3: out += "\"minimum\": " + number(p); break;
      case 4: out += "\"maximum\": " + number(p); break;
      case 5: out += "\"exclusiveMinimum\": " + number(p); break;
      case 6: out += "\"multipleOf\": " + number(p); break;
      case 7: out += "\"minItems\": " + number(p); break;
      case 8: out += "\"maxItems\": " + number(p); break;
      case 9: out += std::string("\"format\": \"") + kFormats[p.pick(std::size(kFormats))] + "\""; break;
      case 10: out += "\"pattern\": " + json_string(text_of(p, 1 + p.pick(24))); break;
      case 11: out += "\"const\": " + json_string(text_of(p, std::min<size_t>(size, 64))); break;
      case 12: out += "\"required\": [" + json_string(text_of(p, 1 + p.pick(8), kNameChars)) + "]"; break;
      case 13: out += "\"uniqueItems\": true"; break;
      case 14: out += "\"additionalProperties\": false"; break;
      default: out += "\"$ref\": \"#\""; break;
    }
  }
  return out + "}";
}

std::string leaf_schema(Program& p, size_t leaf, size_t size) {
  switch (leaf % 13) {
    case 0: return R"({"type": "string"})";
    case 1:  // a long property name next to additionalProperties: the key trie (historical)
      return R"({"type": "object", "properties": {)" + json_string(text_of(p, size)) +
             R"(: {"type": "integer"}}, "additionalProperties": {"type": "string"}})";
    case 2: {  // an enum of about `size` bytes
      const size_t len = 1 + p.pick(64);
      std::string out = R"({"enum": [)";
      const std::string base = text_of(p, len);
      for (size_t i = 0; i * (len + 4) < std::max<size_t>(size, 1); ++i) {
        out += (i ? ", " : "") + json_string(base + std::to_string(i));
      }
      return out + "]}";
    }
    case 3: return R"({"const": )" + json_string(text_of(p, size)) + "}";
    case 4: return R"({"type": "string", "pattern": )" + json_string(text_of(p, size)) + "}";
    case 5: return R"({"type": "integer", "minimum": )" + number(p) + R"(, "maximum": )" + number(p) + "}";
    case 6: return R"({"type": "string", "minLength": )" + number(p) + R"(, "maxLength": )" + std::to_string(size) + "}";
    case 7:
      return R"({"type": "array", "items": {"type": "boolean"}, "minItems": )" + number(p) + R"(, "maxItems": )" +
             std::to_string(size) + "}";
    case 8: {  // many properties, all required: about `size` bytes of names
      const size_t len = 1 + p.pick(32);
      const std::string base = text_of(p, len, kNameChars);
      std::string props, required;
      for (size_t i = 0; i * (len + 16) < std::max<size_t>(size, 1); ++i) {
        const std::string name = json_string(base + std::to_string(i));
        props += (i ? ", " : "") + name + R"(: {"type": "integer"})";
        required += (i ? ", " : "") + name;
      }
      return R"({"type": "object", "properties": {)" + props + R"(}, "required": [)" + required + "]}";
    }
    case 9:  // a long name among properties, required, with patternProperties beside it
      return R"({"type": "object", "properties": {)" + json_string(text_of(p, size)) + R"(: {"type": "null"}}, "required": [)" +
             json_string(text_of(p, 4)) + R"(], "patternProperties": {"^x": {"type": "string"}}})";
    case 10: return R"({"$ref": "#"})";
    case 11: return "true";
    default: return free_schema(p, size);
  }
}

// Wraps `inner` once in construct `c`: {prefix} inner {suffix}.
void wrap_schema(Program& p, size_t c, std::string& prefix, std::string& suffix) {
  switch (c % 11) {
    case 0: prefix += R"({"allOf": [)"; suffix += "]}"; break;
    case 1: prefix += R"({"anyOf": [)"; suffix += R"(, {"type": "null"}]})"; break;
    case 2: prefix += R"({"oneOf": [)"; suffix += "]}"; break;
    case 3: prefix += R"({"not": )"; suffix += "}"; break;
    case 4: prefix += R"({"type": "array", "items": )"; suffix += "}"; break;
    case 5: prefix += R"({"type": "object", "properties": {"p": )"; suffix += R"(}, "required": ["p"]})"; break;
    case 6: prefix += R"({"type": "object", "additionalProperties": )"; suffix += "}"; break;
    case 7: prefix += R"({"$defs": {"d": )"; suffix += R"(}, "$ref": "#/$defs/d"})"; break;
    case 8: prefix += R"({"patternProperties": {"^a": )"; suffix += "}}"; break;
    case 9: prefix += R"({"if": {"type": "string"}, "then": )"; suffix += R"(, "else": {"type": "null"}})"; break;
    default: prefix += R"({"prefixItems": [)"; suffix += R"(], "items": false})"; break;
  }
}

// A schema: `depth` levels of the construct around a leaf; construct 11 is a flat $ref
// chain (each definition refers to the next), 12 picks each level's construct from the
// program's bytes (cycling through a pattern).
std::string schema_text(Program& p, size_t depth, size_t size, size_t construct, size_t leaf) {
  const std::string bottom = leaf_schema(p, leaf, size);
  if (construct % 13 == 11) {
    std::string defs = R"({"$ref": "#/$defs/d0", "$defs": {)";
    for (size_t i = 0; i < depth; ++i) {
      defs += "\"d" + std::to_string(i) + R"(": {"$ref": "#/$defs/d)" + std::to_string(i + 1) + "\"}, ";
    }
    return defs + "\"d" + std::to_string(depth) + "\": " + bottom + "}}";
  }
  std::vector<size_t> pattern{construct};
  if (construct % 13 == 12) {
    pattern.clear();
    for (size_t i = 0, k = 1 + p.pick(8); i < k; ++i) pattern.push_back(p.byte());
  }
  std::string prefix, suffix;
  std::vector<size_t> suffix_at;  // where each level's suffix starts, to reverse them
  for (size_t i = 0; i < depth; ++i) {
    suffix_at.push_back(suffix.size());
    wrap_schema(p, pattern[i % pattern.size()], prefix, suffix);
  }
  std::string out = prefix + bottom;
  out.reserve(out.size() + suffix.size());
  for (size_t i = suffix_at.size(); i-- > 0;) {
    const size_t end = i + 1 < suffix_at.size() ? suffix_at[i + 1] : suffix.size();
    out.append(suffix, suffix_at[i], end - suffix_at[i]);
  }
  return out;
}

// ---------------------------------------------------------------------------------------
// Regex and GBNF text.

std::string regex_atom(Program& p, size_t size, bool raw) {
  std::string s = text_of(p, std::max<size_t>(size, 1), raw ? std::string_view() : kLiteralChars);
  return s;
}

std::string regex_text(Program& p, size_t depth, size_t size, size_t construct, bool raw) {
  static const char* const kQuantifiers[] = {"*", "+", "?", "{2}", "{1,3}", "{0,}", "*?", "{3,5}"};
  const std::string atom = regex_atom(p, std::min<size_t>(size, 4096), raw);
  std::string out;
  switch (construct % 10) {
    case 0:  // nested groups
      for (size_t i = 0; i < depth; ++i) out += '(';
      out += atom;
      for (size_t i = 0; i < depth; ++i) out += ')';
      return out;
    case 1: {  // nested quantified groups
      const size_t q = p.byte();
      for (size_t i = 0; i < depth; ++i) out += '(';
      out += atom;
      for (size_t i = 0; i < depth; ++i) out += std::string(")") + kQuantifiers[(q + i) % std::size(kQuantifiers)];
      return out;
    }
    case 2:  // nested alternations
      for (size_t i = 0; i < depth; ++i) out += "(" + std::to_string(i % 10) + "|";
      out += atom;
      for (size_t i = 0; i < depth; ++i) out += ')';
      return out;
    case 3:  // flat alternation of `depth` branches
      for (size_t i = 0; i <= depth; ++i) out += (i ? "|" : "") + utf8_prefix(atom, 8) + std::to_string(i);
      return out;
    case 4:  // a long concatenation of quantified atoms
      for (size_t i = 0; i <= depth; ++i) {
        const char c = atom[i % atom.size()];
        out += std::string(1, static_cast<unsigned char>(c) < 0x80 ? c : 'u') + kQuantifiers[i % 3];  // whole UTF-8 only
      }
      return out;
    case 5:  // nested non-capturing groups
      for (size_t i = 0; i < depth; ++i) out += "(?:";
      out += atom;
      for (size_t i = 0; i < depth; ++i) out += ')';
      return out;
    case 6:  // a long character class
      return "[" + text_of(p, size) + "]" + kQuantifiers[p.pick(std::size(kQuantifiers))];
    case 7: {  // nested counted repetition: the expansion multiplies per level
      const std::string count = "{" + std::to_string(p.byte()) + (p.flag() ? "," + std::to_string(p.byte()) : "") + "}";
      for (size_t i = 0; i < depth; ++i) out += '(';
      out += utf8_prefix(atom, 4);
      for (size_t i = 0; i < depth; ++i) out += ")" + count;
      return out;
    }
    case 8: {  // features outside the supported subset, nested
      static const char* const kOpen[] = {"(?=", "(?!", "(?<=", "(?<n>", "(?i)(", "\\1("};
      const char* open = kOpen[p.pick(std::size(kOpen))];
      for (size_t i = 0; i < depth; ++i) out += open;
      out += atom;
      for (size_t i = 0; i < depth; ++i) out += ')';
      return out;
    }
    default:  // the atom alone, as long as `size`
      return regex_atom(p, size, raw);
  }
}

std::string gbnf_literal(Program& p, size_t size, bool raw) {
  return raw ? text_of(p, std::max<size_t>(size, 1)) : json_string(text_of(p, std::max<size_t>(size, 1), kLiteralChars));
}

std::string gbnf_text(Program& p, size_t depth, size_t size, size_t construct, bool raw) {
  static const char* const kQuantifiers[] = {"*", "+", "?", "{2}", "{1,3}", "{0,}", "", "{2,}"};
  const std::string lit = gbnf_literal(p, std::min<size_t>(size, 4096), raw);
  std::string out = "root ::= ";
  switch (construct % 10) {
    case 0:  // nested parentheses
      for (size_t i = 0; i < depth; ++i) out += "( ";
      out += lit;
      for (size_t i = 0; i < depth; ++i) out += " )";
      return out + "\n";
    case 1: {  // nested quantified groups
      const size_t q = p.byte();
      for (size_t i = 0; i < depth; ++i) out += "(";
      out += lit;
      for (size_t i = 0; i < depth; ++i) out += std::string(")") + kQuantifiers[(q + i) % std::size(kQuantifiers)];
      return out + "\n";
    }
    case 2:  // a chain of rules, each the next
      out += "r0\n";
      for (size_t i = 0; i < depth; ++i) out += "r" + std::to_string(i) + " ::= r" + std::to_string(i + 1) + " \"x\"?\n";
      return out + "r" + std::to_string(depth) + " ::= " + lit + "\n";
    case 3: {  // a chain that closes a cycle: recursion through `depth` rules
      const std::string short_lit = gbnf_literal(p, std::min<size_t>(size, 8), raw);  // once per rule
      out += "r0\n";
      for (size_t i = 0; i < depth; ++i) {
        out += "r" + std::to_string(i) + " ::= \"(\" r" + std::to_string(i + 1) + " \")\" | " + short_lit + "\n";
      }
      return out + "r" + std::to_string(depth) + " ::= root | " + lit + "\n";
    }
    case 4:  // nested alternations
      for (size_t i = 0; i < depth; ++i) out += "( \"" + std::to_string(i % 10) + "\" | ";
      out += lit;
      for (size_t i = 0; i < depth; ++i) out += " )";
      return out + "\n";
    case 5:  // a flat alternation of `depth` literals
      for (size_t i = 0; i <= depth; ++i) out += (i ? " | \"" : "\"") + std::to_string(i) + "\"";
      return out + "\n";
    case 6:  // left recursion, `depth` alternatives deep
      out += "root " + lit + " | " + lit;
      for (size_t i = 0; i < std::min<size_t>(depth, 64); ++i) out += " | root \"" + std::to_string(i) + "\"";
      return out + "\n";
    case 7:  // a long character class
      return out + "[" + text_of(p, size) + "]" + kQuantifiers[p.pick(std::size(kQuantifiers))] + "\n";
    case 8: {  // nested counted repetition
      const std::string count = "{" + std::to_string(p.byte()) + (p.flag() ? "," + std::to_string(p.byte()) : "") + "}";
      for (size_t i = 0; i < depth; ++i) out += "(";
      out += lit;
      for (size_t i = 0; i < depth; ++i) out += ")" + count;
      return out + "\n";
    }
    default:  // the literal alone, as long as `size`
      return out + gbnf_literal(p, size, raw) + "\n";
  }
}

// ---------------------------------------------------------------------------------------
// Chat templates that render tools, one per tool-call format, and ChatML (which renders
// none: the tools become hermes text in the system message).

constexpr const char* kHermesTemplate =
    "{%- if tools %}<|im_start|>system\n{% if messages[0]['role'] == 'system' %}{{ messages[0]['content'] }}\n\n"
    "{% endif %}# Tools\n\n<tools>{% for tool in tools %}\n{{ tool | tojson }}{% endfor %}\n</tools>\n\n"
    "For each function call, return a json object within <tool_call></tool_call> XML tags:\n<tool_call>\n"
    "{\"name\": <function-name>, \"arguments\": <args-json-object>}\n</tool_call><|im_end|>\n"
    "{%- elif messages[0]['role'] == 'system' %}<|im_start|>system\n{{ messages[0]['content'] }}<|im_end|>\n{%- endif %}"
    "{%- for message in messages %}{%- if message.role != 'system' %}"
    "<|im_start|>{{ message.role }}\n{{ message.content }}<|im_end|>\n{%- endif %}{%- endfor %}"
    "{%- if add_generation_prompt %}<|im_start|>assistant\n{%- endif %}";

constexpr const char* kLlama3Template =
    "{{- bos_token }}{%- if tools is not none %}<|start_header_id|>user<|end_header_id|>\n\n"
    "Given the following functions, respond with a JSON for a function call with its proper arguments that best "
    "answers the given prompt.\n\nRespond in the format {\"name\": function name, \"parameters\": dictionary of "
    "argument name and its value}.\n\n{%- for t in tools %}{{- t | tojson(indent=4) }}{{- \"\\n\\n\" }}{%- endfor %}"
    "<|eot_id|>{%- endif %}{%- for message in messages %}<|start_header_id|>{{ message['role'] }}<|end_header_id|>\n\n"
    "{{ message['content'] | trim }}<|eot_id|>{%- endfor %}"
    "{%- if add_generation_prompt %}<|start_header_id|>assistant<|end_header_id|>\n\n{%- endif %}";

constexpr const char* kMistralTemplate =
    "{{- bos_token }}{%- for message in messages %}{%- if message['role'] == 'user' %}"
    "{%- if tools is not none and loop.last %}[AVAILABLE_TOOLS] [{%- for tool in tools %}"
    "{%- set t = tool.function %}{\"type\": \"function\", \"function\": {\"name\": {{ t.name | tojson }}, "
    "\"parameters\": {{ t.parameters | tojson }}}}{%- if not loop.last %}, {% endif %}{%- endfor %}][/AVAILABLE_TOOLS]"
    "{%- endif %}[INST] {{ message['content'] }}[/INST]{%- elif message['role'] == 'assistant' %}"
    "{{ message['content'] }}{{ eos_token }}{%- endif %}{%- endfor %}{# [TOOL_CALLS] #}";

const char* chat_template(size_t i) {
  switch (i % 4) {
    case 0: return kHermesTemplate;
    case 1: return kLlama3Template;
    case 2: return kMistralTemplate;
    default: return tsr::kDefaultChatTemplate;
  }
}

// ---------------------------------------------------------------------------------------
// The request body.

enum Carrier {
  RESPONSE_FORMAT,        // response_format {type: json_schema, json_schema: {schema}} (object)
  GUIDED_JSON_STRING,     // guided_json "..."
  GUIDED_JSON_OBJECT,     // guided_json {...}
  CONSTRAINT_JSON_SCHEMA, // constraint {kind: json_schema, text}
  CONSTRAINT_REGEX,       // constraint {kind: regex, text}
  CONSTRAINT_GBNF,        // constraint {kind: gbnf, text}
  GUIDED_REGEX,
  GUIDED_GRAMMAR,
  GUIDED_CHOICE,          // [strings]: an alternation of literals
  TOOLS,                  // chat tools[].function.parameters
  GRAMMAR,                // Tessera's grammar / regex, and constraint.kind tool_call
  kCarriers
};

struct Request {
  std::string body;
  tsr::server::Endpoint endpoint = tsr::server::Endpoint::COMPLETIONS;
  const char* chat_template = nullptr;
};

std::string tools_json(Program& p, const std::string& parameters, size_t size, uint8_t flags, std::string& first_name) {
  const size_t n = p.byte() % 4 == 3 ? 1 + p.pick(160) : 1 + p.pick(3);  // beyond 128: a 400
  std::string out = "[";
  for (size_t i = 0; i < n; ++i) {
    std::string name = (flags & 0x20) && i == 0 ? text_of(p, 1 + p.pick(80)) : text_of(p, 1 + p.pick(12), kNameChars);
    if (i) name += "_" + std::to_string(i);
    if (i == 0) first_name = name;
    out += (i ? ", " : "") + std::string(R"({"type": "function", "function": {"name": )") + json_string(name);
    if (i == 0 || p.flag()) out += R"(, "description": )" + json_string(text_of(p, i == 0 ? size : 8));
    out += R"(, "parameters": )" + (i == 0 ? parameters : R"({"type": "object", "properties": {}})") + "}}";
  }
  return out + "]";
}

Request build(Program& p) {
  const size_t carrier = p.byte() % kCarriers;
  const size_t depth = p.scaled(5, kMaxDepth);
  const size_t size = p.scaled(6, kMaxSize);
  const size_t construct = p.byte();
  const size_t leaf = p.byte();
  const uint8_t flags = p.byte();
  const bool raw = flags & 0x20;  // malformed text allowed (regex and GBNF metacharacters)

  Request r;
  r.endpoint = (flags & 1) || carrier == TOOLS ? tsr::server::Endpoint::CHAT : tsr::server::Endpoint::COMPLETIONS;
  std::string fields;
  switch (carrier) {
    case RESPONSE_FORMAT:
      fields = R"("response_format": {"type": "json_schema", "json_schema": {"name": "s", "strict": true, "schema": )" +
               schema_text(p, depth, size, construct, leaf) + "}}";
      break;
    case GUIDED_JSON_STRING: fields = R"("guided_json": )" + json_string(schema_text(p, depth, size, construct, leaf)); break;
    case GUIDED_JSON_OBJECT: fields = R"("guided_json": )" + schema_text(p, depth, size, construct, leaf); break;
    case CONSTRAINT_JSON_SCHEMA:
      fields = R"("constraint": {"kind": "json_schema", "text": )" + json_string(schema_text(p, depth, size, construct, leaf)) + "}";
      break;
    case CONSTRAINT_REGEX:
      fields = R"("constraint": {"kind": "regex", "text": )" + json_string(regex_text(p, depth, size, construct, raw)) + "}";
      break;
    case CONSTRAINT_GBNF:
      fields = R"("constraint": {"kind": "gbnf", "text": )" + json_string(gbnf_text(p, depth, size, construct, raw)) + "}";
      break;
    case GUIDED_REGEX: fields = R"("guided_regex": )" + json_string(regex_text(p, depth, size, construct, raw)); break;
    case GUIDED_GRAMMAR: fields = R"("guided_grammar": )" + json_string(gbnf_text(p, depth, size, construct, raw)); break;
    case GUIDED_CHOICE: {  // about `size` bytes of choices, `depth` of them sharing prefixes
      const size_t len = 1 + p.pick(64);
      const std::string base = text_of(p, len);
      const size_t count = std::max<size_t>(1, std::min(size / (len + 4), kMaxSize / 8));
      fields = R"("guided_choice": [)";
      for (size_t i = 0; i < count; ++i) {
        std::string choice = construct & 1 ? base + std::to_string(i) : std::to_string(i) + base;
        if (depth && i < depth) choice = std::string(i % 64, 'a') + choice;
        fields += (i ? ", " : "") + json_string(choice);
      }
      fields += "]";
      break;
    }
    case TOOLS: {
      r.chat_template = chat_template(flags >> 3);
      std::string first_name;
      const std::string parameters = schema_text(p, depth, size, construct, leaf);
      fields = R"("tools": )" + tools_json(p, parameters, size, flags, first_name);
      switch ((flags >> 1) & 3) {
        case 0: fields += R"(, "tool_choice": "required")"; break;
        case 1:
          fields += R"(, "tool_choice": {"type": "function", "function": {"name": )" +
                    json_string(p.flag() ? first_name : text_of(p, 3, kNameChars)) + "}}";
          break;
        case 2: fields += R"(, "tool_choice": "auto")"; break;
        default: fields += R"(, "tool_choice": "none")"; break;
      }
      if (p.flag()) fields += R"(, "parallel_tool_calls": false)";
      if (flags & 0x80) fields += R"(, "guided_regex": "a+")";  // a second constraint
      break;
    }
    default: {  // Tessera's own fields, and a tool_call spec by hand
      switch (construct % 3) {
        case 0: fields = R"("grammar": )" + json_string(gbnf_text(p, depth, size, leaf, raw)); break;
        case 1: fields = R"("regex": )" + json_string(regex_text(p, depth, size, leaf, raw)); break;
        default: {
          const std::string spec = R"({"schema": )" + schema_text(p, depth, size, leaf, p.byte()) +
                                   R"(, "begin": "<tool_call>\n", "end": "\n</tool_call>", "max_calls": )" + number(p) + "}";
          fields = R"("constraint": {"kind": "tool_call", "text": )" + json_string(spec) + "}";
        }
      }
    }
  }
  const std::string input = r.endpoint == tsr::server::Endpoint::CHAT
                                ? R"("messages": [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hi"}])"
                                : R"("prompt": "Hi")";
  r.body = R"({"model": "m", "max_tokens": 16, )" + input + ", " + fields + "}";
  return r;
}

// ---------------------------------------------------------------------------------------
// The server's path.

[[noreturn]] void fail(const char* what, const std::string& detail) {
  std::fprintf(stderr, "request_constraint_fuzz: %s: %s\n", what, detail.substr(0, 500).c_str());
  std::abort();
}

// The server's own parse_body: nullopt where it answers 400.
std::optional<json> parse_body(const std::string& text) {
  tsr::server::HttpRequest req;
  req.body = text;
  try {
    return tsr::server::parse_body(req);
  } catch (const tsr::server::ApiError&) {
    // Every body built is JSON (strings escaped, valid UTF-8): only too deep is refused.
    if (!tsr::json_deeper_than(text, kMaxBodyDepth)) fail("built a body the server refuses", text);
    return std::nullopt;
  }
}

// The chat template rendered with the request's tools, as server/prompts.cpp does.
void render(const json& body, const char* template_text) {
  std::optional<tsr::server::ToolRequest> tools;
  try {
    tools = tsr::server::parse_tools(body);
  } catch (const tsr::server::ApiError&) {
    return;
  }
  tsr::ChatTemplateInputs in;
  in.messages = {{"system", "Be brief."}, {"user", "Hi"}};
  in.bos_token = "<s>";
  in.eos_token = "</s>";
  in.tools = tools && tools->choice != tsr::server::ToolChoice::NONE ? tools->tools : nlohmann::ordered_json();
  try {
    if (!tsr::template_renders_tools(template_text)) {
      in.messages = tsr::with_tools_in_prompt(std::move(in.messages), in.tools);
      in.tools = nullptr;
    }
    tsr::apply_chat_template(template_text, in);
  } catch (const tsr::Error&) {
  }
}

// The kinds the constraint plugins serve; others are refused by GrammarCache::check_kind.
std::optional<tsr::constraints::ConstraintKind> served_kind(const std::string& kind) {
  using tsr::constraints::ConstraintKind;
  if (kind == "json_schema") return ConstraintKind::json_schema;
  if (kind == "json_object") return ConstraintKind::json_object;
  if (kind == "regex") return ConstraintKind::regex;
  if (kind == "tool_call") return ConstraintKind::tool_call;
  if (kind == "gbnf") return ConstraintKind::gbnf;
  return std::nullopt;
}

// Compiles the constraint and decodes a few tokens through it, choices from the program.
void compile(const tsr::ConstraintSpec& spec, Program& p) {
  const auto kind = served_kind(spec.kind);
  if (!kind || spec.text.size() > kMaxCompileText) return;
  std::shared_ptr<tsr::constraints::CompiledGrammar> grammar;
  try {
#ifdef TESSERA_FUZZ_COMPILE_BUDGET
    // As the plugins compile for the host: under a work budget (a deadline here).
    const auto deadline = std::chrono::steady_clock::now() + kCompileDeadline;
    const tsr::constraints::CompileBudget budget([deadline] { return std::chrono::steady_clock::now() > deadline; });
#endif
    grammar = tsr::constraints::testing::compile_test(*kind, spec.text);
  } catch (const tsr::constraints::CompileError& e) {
    if (std::string_view(e.what()).empty()) fail("a CompileError that names nothing", spec.text);
    return;
  }
  const auto& vocab = grammar->vocab();
  tsr::constraints::Matcher m(grammar);
  std::vector<uint32_t> mask(vocab.mask_words());
  for (size_t step = 0; step < kWalkSteps && !m.is_terminated(); ++step) {
    m.fill_mask(mask.data());
    std::vector<int32_t> allowed;
    for (size_t id = 0; id < vocab.size(); ++id) {
      if (tsr::constraints::testing::mask_has(mask, int32_t(id))) allowed.push_back(int32_t(id));
    }
    if (allowed.empty()) break;
    const int32_t id = allowed[p.byte() % allowed.size()];
    if (!m.accept(id)) fail("a token the mask allows was refused", std::to_string(id));
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const bool quiet = [] {
    spdlog::set_level(spdlog::level::off);  // parse_generation logs unknown fields
    return true;
  }();
  (void)quiet;
  Program p(data, size);
  const Request r = build(p);
  const std::optional<json> body = parse_body(r.body);
  if (!body) return 0;
  tsr::server::GenerationSpec spec;
  bool accepted = true;
  try {
    spec = tsr::server::parse_generation(*body, r.endpoint, tsr::RequestParams{}, 32000);
    tsr::server::expand_choices(spec, {{1, 2, 3}});
    if (r.chat_template) tsr::server::apply_tool_choice(spec, r.chat_template);
  } catch (const tsr::server::ApiError& e) {
    if (std::string_view(e.what()).empty()) fail("an ApiError that names nothing", r.body);
    accepted = false;
  }
  // The server renders only accepted requests; rendering the others too costs little.
  if (r.chat_template) render(*body, r.chat_template);
  if (accepted && spec.constraint) compile(spec.constraint->spec, p);
  return 0;
}
