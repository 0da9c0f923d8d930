#include "constraints/internal/gbnf.h"

#include <cstdio>
#include <string>
#include <vector>

#include "constraints/errors.h"
#include "constraints/internal/hex_escape.h"

namespace tsr::constraints {
namespace {

constexpr int kUnbounded = -1;
// Repetitions shorter than this gain nothing from sharing masks between positions.
constexpr uint32_t kMinChainBlocks = 16;

// The parsed form of a rule body, built into NFA fragments afterwards (repetitions need
// several copies of their operand).
struct Node {
  enum Kind { alt, seq, chars, literal, ref, repeat } kind;
  std::vector<Node> children;
  CodepointSet set;
  std::string text;  // literal bytes or rule name
  int min = 0, max = 0;

  explicit Node(Kind k) : kind(k) {}
  static Node of_chars(CodepointSet s) {
    Node n(chars);
    n.set = std::move(s);
    return n;
  }
  static Node of_ref(std::string name) {
    Node n(ref);
    n.text = std::move(name);
    return n;
  }
};

class GbnfParser {
  static constexpr int kMaxNesting = 256;

 public:
  explicit GbnfParser(std::string_view text) : s_(text) {}

  Grammar parse(std::string_view root_rule) {
    std::vector<std::pair<std::string, Node>> rules;
    skip_space(true);
    while (pos_ < s_.size()) {
      std::string name = parse_name();
      skip_space(false);
      if (s_.substr(pos_, 3) != "::=") fail("expected '::='");
      pos_ += 3;
      skip_space(true);
      rules.emplace_back(name, parse_alternates(false));
      skip_space(true);
    }
    return build(rules, root_rule);
  }

 private:
  [[noreturn]] void fail(const std::string& what) const {
    size_t line = 1, col = 1;
    for (size_t i = 0; i < pos_ && i < s_.size(); ++i) {
      if (s_[i] == '\n') {
        ++line;
        col = 1;
      } else {
        ++col;
      }
    }
    throw CompileError("GBNF " + std::to_string(line) + ":" + std::to_string(col) + ": " + what);
  }

  bool at_end() const { return pos_ >= s_.size(); }
  char peek() const { return at_end() ? '\0' : s_[pos_]; }
  static bool is_name_char(char c) {
    return std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_';
  }

  void skip_space(bool newlines) {
    while (!at_end()) {
      char c = s_[pos_];
      if (c == '#') {
        while (!at_end() && s_[pos_] != '\n') ++pos_;
      } else if (c == ' ' || c == '\t' || c == '\r' || (newlines && c == '\n')) {
        ++pos_;
      } else {
        return;
      }
    }
  }

  // At a newline outside parentheses: does the rule go on (no `name ::=` follows)?
  bool rule_continues() {
    size_t save = pos_;
    skip_space(true);
    bool continues = !at_end();
    if (continues && is_name_char(peek())) {
      size_t p = pos_;
      while (p < s_.size() && is_name_char(s_[p])) ++p;
      while (p < s_.size() && (s_[p] == ' ' || s_[p] == '\t')) ++p;
      continues = s_.substr(p, 3) != "::=";
    }
    if (!continues) pos_ = save;
    return continues;
  }

  std::string parse_name() {
    size_t start = pos_;
    while (!at_end() && is_name_char(s_[pos_])) ++pos_;
    if (start == pos_) fail("expected a rule name");
    return std::string(s_.substr(start, pos_ - start));
  }

  // Skips spaces; returns false where the current sequence ends.
  bool space_in_sequence(bool nested) {
    skip_space(nested);
    if (!nested && peek() == '\n') return rule_continues();
    return true;
  }

  Node parse_alternates(bool nested) {
    Node alt(Node::alt);
    alt.children.push_back(parse_sequence(nested));
    while (peek() == '|') {
      ++pos_;
      skip_space(true);
      alt.children.push_back(parse_sequence(nested));
    }
    return alt.children.size() == 1 ? std::move(alt.children[0]) : alt;
  }

  Node parse_sequence(bool nested) {
    Node seq(Node::seq);
    while (!at_end()) {
      char c = peek();
      if (c == '|' || c == ')' || c == '\n') break;
      seq.children.push_back(parse_postfix(parse_primary()));
      if (!space_in_sequence(nested)) break;
    }
    return seq;
  }

  Node parse_primary() {
    char c = peek();
    if (c == '"' || c == '\'') return parse_literal(c);
    if (c == '[') return parse_class();
    if (c == '.') {
      ++pos_;
      return Node::of_chars(CodepointSet(0, kMaxCodepoint));
    }
    if (c == '(') {
      ++pos_;
      // Parsing and every later pass recurse per level: bound it, or a request's
      // "((((...))))" overflows the stack.
      if (++depth_ > kMaxNesting) fail("groups nested deeper than " + std::to_string(kMaxNesting));
      skip_space(true);
      Node inner = parse_alternates(true);
      skip_space(true);
      if (peek() != ')') fail("expected ')'");
      ++pos_;
      --depth_;
      return inner;
    }
    if (c == '<') fail("unsupported GBNF token reference '<...>'");
    if (is_name_char(c)) return Node::of_ref(parse_name());
    fail(std::string("unexpected character '") + c + "'");
  }

  Node parse_postfix(Node node) {
    for (;;) {
      char c = peek();
      int min, max;
      if (c == '*') {
        min = 0, max = kUnbounded, ++pos_;
      } else if (c == '+') {
        min = 1, max = kUnbounded, ++pos_;
      } else if (c == '?') {
        min = 0, max = 1, ++pos_;
      } else if (c == '{') {
        parse_braces(min, max);
      } else {
        return node;
      }
      Node rep(Node::repeat);
      rep.min = min;
      rep.max = max;
      rep.children.push_back(std::move(node));
      node = std::move(rep);
    }
  }

  int parse_int() {
    size_t start = pos_;
    long value = 0;
    while (!at_end() && std::isdigit(static_cast<unsigned char>(s_[pos_]))) {
      value = value * 10 + (s_[pos_++] - '0');
      if (value > 1'000'000) fail("repetition count too large");
    }
    if (start == pos_) fail("expected a number");
    return static_cast<int>(value);
  }

  void parse_braces(int& min, int& max) {
    ++pos_;
    skip_space(false);
    min = parse_int();
    skip_space(false);
    max = min;
    if (peek() == ',') {
      ++pos_;
      skip_space(false);
      max = peek() == '}' ? kUnbounded : parse_int();
      skip_space(false);
    }
    if (peek() != '}') fail("expected '}'");
    ++pos_;
    if (max != kUnbounded && max < min) fail("repetition {m,n} with n < m");
  }

  uint32_t parse_hex(int digits) {
    const std::optional<uint32_t> v = read_hex_digits(s_, pos_, digits);
    if (!v) fail("bad hex escape");
    return *v;
  }

  // One code point of a literal or class, escapes decoded.
  uint32_t parse_char() {
    if (at_end()) fail("unterminated literal or class");
    if (s_[pos_] != '\\') {
      std::string tmp(s_.substr(pos_, 4));
      size_t p = 0;
      uint32_t cp = decode_utf8(tmp, p);
      pos_ += p;
      return cp;
    }
    ++pos_;
    char c = peek();
    ++pos_;
    switch (c) {
      case 'n': return '\n';
      case 'r': return '\r';
      case 't': return '\t';
      case 'f': return '\f';
      case 'v': return '\v';
      case '0': return 0;
      case 'x': return parse_hex(2);
      case 'u': return parse_hex(4);
      case 'U': return parse_hex(8);
      case '\\': case '"': case '\'': case '[': case ']': case '-': case '^': case '/':
      case '.': case '(': case ')': case '|': case '*': case '+': case '?': case '{':
      case '}': case ' ':
        return static_cast<uint8_t>(c);
      default:
        --pos_;
        fail(std::string("unknown escape '\\") + c + "'");
    }
  }

  Node parse_literal(char quote) {
    ++pos_;
    Node lit(Node::literal);
    while (peek() != quote) {
      if (at_end() || peek() == '\n') fail("unterminated string literal");
      append_utf8(lit.text, parse_char());
    }
    ++pos_;
    return lit;
  }

  Node parse_class() {
    ++pos_;
    bool negated = peek() == '^';
    if (negated) ++pos_;
    CodepointSet set;
    while (peek() != ']') {
      if (at_end()) fail("unterminated character class");
      uint32_t lo = parse_char(), hi = lo;
      if (peek() == '-' && pos_ + 1 < s_.size() && s_[pos_ + 1] != ']') {
        ++pos_;
        hi = parse_char();
        if (hi < lo) fail("character range out of order");
      }
      set.add(lo, hi);
    }
    ++pos_;
    return Node::of_chars(negated ? set.complement() : set);
  }

  Grammar build(std::vector<std::pair<std::string, Node>>& rules, std::string_view root_rule) {
    for (auto& [name, body] : rules) {
      uint32_t id = g_.rule_id(name);
      uint32_t start = g_.add_state(), accept = g_.add_state();
      emit(body, start, accept);
      g_.define_rule(id, start, accept);
    }
    bool has_root = false;
    for (auto& [name, body] : rules) has_root |= name == root_rule;
    if (!has_root) throw CompileError("GBNF grammar has no '" + std::string(root_rule) + "' rule");
    g_.set_root(g_.rule_id(root_rule));
    g_.finish();
    return std::move(g_);
  }

  // Adds paths from `from` to `to` for `node`. Never adds edges into `from` or out of `to`
  // (repetitions loop through a fresh state), so alternatives can share both ends.
  void emit(const Node& node, uint32_t from, uint32_t to) {
    switch (node.kind) {
      case Node::literal: g_.add_literal(from, node.text, to); return;
      case Node::chars: g_.add_codepoints(from, node.set, to); return;
      case Node::ref: g_.add_call(from, g_.rule_id(node.text), to); return;
      case Node::alt:
        for (const Node& child : node.children) emit(child, from, to);
        return;
      case Node::seq: emit_sequence(node.children, from, to); return;
      case Node::repeat: emit_repeat(node, from, to); return;
    }
  }

  void emit_sequence(const std::vector<Node>& items, uint32_t from, uint32_t to) {
    if (items.empty()) {
      g_.add_epsilon(from, to);
      return;
    }
    uint32_t cur = from;
    for (size_t i = 0; i < items.size(); ++i) {
      uint32_t next = i + 1 == items.size() ? to : g_.add_state();
      emit(items[i], cur, next);
      cur = next;
    }
  }

  void emit_repeat(const Node& node, uint32_t from, uint32_t to) {
    const Node& item = node.children[0];
    uint32_t cur = g_.add_state();
    g_.add_epsilon(from, cur);
    RepeatChain chain{cur, static_cast<uint32_t>(g_.n_states()), 0, 0, node.min, node.max};
    for (int i = 0; i < node.min; ++i) {
      uint32_t next = g_.add_state();
      emit(item, cur, next);
      cur = next;
    }
    if (node.max != kUnbounded) {
      for (int i = node.min; i < node.max; ++i) {
        uint32_t next = g_.add_state();
        emit(item, cur, next);
        g_.add_epsilon(cur, to);
        cur = next;
      }
    }
    chain.blocks = static_cast<uint32_t>(node.max == kUnbounded ? node.min : node.max);
    if (chain.blocks > kMinChainBlocks) {
      chain.block_size = static_cast<uint32_t>(g_.n_states() - chain.first) / chain.blocks;
      g_.add_repeat_chain(chain);
    }
    if (node.max == kUnbounded) emit(item, cur, cur);
    g_.add_epsilon(cur, to);
  }

  std::string_view s_;
  size_t pos_ = 0;
  int depth_ = 0;  // groups open at pos_
  Grammar g_;
};

void append_escaped(std::string& out, uint32_t cp, bool in_class) {
  bool plain = cp < 0x80 && std::isalnum(static_cast<int>(cp));
  plain |= cp >= 0x80 && cp != 0x2028 && cp != 0x2029;
  plain |= cp == ' ' || (!in_class && cp >= 0x20 && cp < 0x7F && cp != '"' && cp != '\\');
  if (plain) {
    append_utf8(out, cp);
    return;
  }
  char buf[16];
  if (cp <= 0xFF) {
    std::snprintf(buf, sizeof buf, "\\x%02X", cp);
  } else if (cp <= 0xFFFF) {
    std::snprintf(buf, sizeof buf, "\\u%04X", cp);
  } else {
    std::snprintf(buf, sizeof buf, "\\U%08X", cp);
  }
  out += buf;
}

}  // namespace

Grammar parse_gbnf(std::string_view text, std::string_view root_rule) {
  return GbnfParser(text).parse(root_rule);
}

std::string gbnf_literal(std::string_view text) {
  std::string out = "\"";
  std::string s(text);
  for (size_t pos = 0; pos < s.size();) append_escaped(out, decode_utf8(s, pos), false);
  return out + "\"";
}

std::string gbnf_class(const CodepointSet& set) {
  std::string out = "[";
  for (const CodepointRange& r : set.ranges()) {
    append_escaped(out, r.lo, true);
    if (r.hi != r.lo) {
      out += '-';
      append_escaped(out, r.hi, true);
    }
  }
  return out + "]";
}

}  // namespace tsr::constraints
