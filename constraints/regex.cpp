#include "constraints/internal/regex.h"

#include <vector>

#include "constraints/codepoint_set.h"
#include "constraints/errors.h"
#include "constraints/internal/hex_escape.h"
#include "constraints/internal/gbnf.h"
#include "constraints/internal/json_chars.h"

namespace tsr::constraints {
namespace {

constexpr int kUnbounded = -1;

struct RegexNode {
  enum Kind { alt, seq, chars, repeat, line_start, line_end } kind;
  std::vector<RegexNode> children;
  CodepointSet set;
  int min = 0, max = 0;

  explicit RegexNode(Kind k) : kind(k) {}
};

CodepointSet digit_set() { return CodepointSet('0', '9'); }
CodepointSet word_set() {
  CodepointSet s('0', '9');
  s.add('A', 'Z');
  s.add('a', 'z');
  s.add('_', '_');
  return s;
}
CodepointSet space_set() {  // ECMAScript WhiteSpace and LineTerminator
  CodepointSet s('\t', '\r');
  for (uint32_t c : {0x20u, 0xA0u, 0x1680u, 0x2028u, 0x2029u, 0x202Fu, 0x205Fu, 0x3000u, 0xFEFFu}) {
    s.add(c, c);
  }
  s.add(0x2000, 0x200A);
  return s;
}
CodepointSet dot_set() {  // everything but line terminators
  CodepointSet s('\n', '\n');
  s.add('\r', '\r');
  s.add(0x2028, 0x2029);
  return s.complement();
}

class RegexParser {
  static constexpr int kMaxNesting = 256;

 public:
  explicit RegexParser(std::string_view p) : s_(p) {}

  RegexNode parse() {
    RegexNode root = parse_alt();
    if (pos_ < s_.size()) fail("unbalanced ')'");
    return root;
  }

 private:
  [[noreturn]] void fail(const std::string& what) const {
    throw CompileError("regex /" + std::string(s_) + "/ at offset " + std::to_string(pos_) +
                       ": " + what);
  }
  bool at_end() const { return pos_ >= s_.size(); }
  char peek() const { return at_end() ? '\0' : s_[pos_]; }

  RegexNode parse_alt() {
    RegexNode alt(RegexNode::alt);
    alt.children.push_back(parse_seq());
    while (peek() == '|') {
      ++pos_;
      alt.children.push_back(parse_seq());
    }
    return alt.children.size() == 1 ? std::move(alt.children[0]) : alt;
  }

  RegexNode parse_seq() {
    RegexNode seq(RegexNode::seq);
    while (!at_end() && peek() != '|' && peek() != ')') {
      RegexNode atom = parse_atom();
      seq.children.push_back(parse_quantifiers(std::move(atom)));
    }
    return seq;
  }

  RegexNode parse_atom() {
    char c = s_[pos_++];
    switch (c) {
      case '(': return parse_group();
      case '[': return chars(parse_class());
      case '.': return chars(dot_set());
      case '^': return RegexNode(RegexNode::line_start);
      case '$': return RegexNode(RegexNode::line_end);
      case '\\': return chars(parse_escape(false));
      case '*': case '+': case '?': fail("quantifier without operand");
      default: {
        --pos_;
        std::string tmp(s_.substr(pos_, 4));
        size_t p = 0;
        uint32_t cp = decode_utf8(tmp, p);
        pos_ += p;
        return chars(CodepointSet(cp, cp));
      }
    }
  }

  static RegexNode chars(CodepointSet set) {
    RegexNode n(RegexNode::chars);
    n.set = std::move(set);
    return n;
  }

  RegexNode parse_group() {
    if (peek() == '?') {
      std::string_view rest = s_.substr(pos_);
      if (rest.starts_with("?:")) {
        pos_ += 2;
      } else if (rest.starts_with("?<") && !rest.starts_with("?<=") && !rest.starts_with("?<!")) {
        size_t close = s_.find('>', pos_);
        if (close == std::string_view::npos) fail("unterminated group name");
        pos_ = close + 1;
      } else {
        fail("unsupported regex lookaround or group flag '(" + std::string(rest.substr(0, 3)) + "'");
      }
    }
    // Parsing and every later pass recurse per level: bound it, or a request's
    // "((((...))))" overflows the stack.
    if (++depth_ > kMaxNesting) fail("groups nested deeper than " + std::to_string(kMaxNesting));
    RegexNode inner = parse_alt();
    if (peek() != ')') fail("missing ')'");
    ++pos_;
    --depth_;
    return inner;
  }

  // A {m}, {m,} or {m,n} quantifier at pos_, or false (then `{` is a literal, as in JS).
  bool parse_braces(int& min, int& max) {
    size_t p = pos_ + 1;
    auto number = [&](int& out) {
      size_t start = p;
      long v = 0;
      while (p < s_.size() && std::isdigit(static_cast<unsigned char>(s_[p]))) {
        v = std::min(v * 10 + (s_[p++] - '0'), 10'000'000L);
      }
      out = static_cast<int>(v);
      return p > start;
    };
    if (!number(min)) return false;
    max = min;
    if (p < s_.size() && s_[p] == ',') {
      ++p;
      if (!number(max)) max = kUnbounded;
    }
    if (p >= s_.size() || s_[p] != '}') return false;
    pos_ = p + 1;
    if (max != kUnbounded && max < min) fail("quantifier {m,n} with n < m");
    return true;
  }

  RegexNode parse_quantifiers(RegexNode atom) {
    for (;;) {
      int min, max;
      char c = peek();
      if (c == '*') {
        min = 0, max = kUnbounded, ++pos_;
      } else if (c == '+') {
        min = 1, max = kUnbounded, ++pos_;
      } else if (c == '?') {
        min = 0, max = 1, ++pos_;
      } else if (c == '{' && parse_braces(min, max)) {
      } else {
        return atom;
      }
      if (peek() == '?') ++pos_;  // lazy: the same language
      if (atom.kind == RegexNode::line_start || atom.kind == RegexNode::line_end) {
        fail("quantified anchor");
      }
      RegexNode rep(RegexNode::repeat);
      rep.min = min;
      rep.max = max;
      rep.children.push_back(std::move(atom));
      atom = std::move(rep);
    }
  }

  uint32_t parse_hex(int digits) {
    const std::optional<uint32_t> v = read_hex_digits(s_, pos_, digits);
    if (!v) fail("bad hex escape");
    return *v;
  }

  CodepointSet parse_escape(bool in_class) {
    if (at_end()) fail("trailing backslash");
    char c = s_[pos_++];
    switch (c) {
      case 'd': return digit_set();
      case 'D': return digit_set().complement();
      case 'w': return word_set();
      case 'W': return word_set().complement();
      case 's': return space_set();
      case 'S': return space_set().complement();
      case 'n': return CodepointSet('\n', '\n');
      case 'r': return CodepointSet('\r', '\r');
      case 't': return CodepointSet('\t', '\t');
      case 'f': return CodepointSet('\f', '\f');
      case 'v': return CodepointSet('\v', '\v');
      case '0': return CodepointSet(0, 0);
      case 'x': { uint32_t v = parse_hex(2); return CodepointSet(v, v); }
      case 'u': { uint32_t v = parse_hex(4); return CodepointSet(v, v); }
      case 'b':
        if (in_class) return CodepointSet('\b', '\b');
        fail("unsupported regex word boundary '\\b'");
      case 'B': fail("unsupported regex non-word-boundary '\\B'");
      case 'p': case 'P': fail("unsupported regex Unicode property escape '\\p{...}'");
      case 'c': fail("unsupported regex control escape '\\c'");
      case 'k': fail("unsupported regex named backreference '\\k'");
      default:
        if (c >= '1' && c <= '9') fail("unsupported regex backreference '\\" + std::string(1, c) + "'");
        return CodepointSet(static_cast<uint8_t>(c), static_cast<uint8_t>(c));
    }
  }

  // One class member: a character or an escape (which may stand for a set).
  CodepointSet class_atom(bool& single, uint32_t& cp) {
    single = true;
    if (peek() == '\\') {
      ++pos_;
      CodepointSet set = parse_escape(true);
      single = set.ranges().size() == 1 && set.ranges()[0].lo == set.ranges()[0].hi;
      cp = set.ranges().empty() ? 0 : set.ranges()[0].lo;
      return set;
    }
    std::string tmp(s_.substr(pos_, 4));
    size_t p = 0;
    cp = decode_utf8(tmp, p);
    pos_ += p;
    return CodepointSet(cp, cp);
  }

  CodepointSet parse_class() {
    bool negated = peek() == '^';
    if (negated) ++pos_;
    CodepointSet set;
    while (peek() != ']') {
      if (at_end()) fail("unterminated character class");
      bool single_lo;
      uint32_t lo;
      CodepointSet first = class_atom(single_lo, lo);
      if (single_lo && peek() == '-' && pos_ + 1 < s_.size() && s_[pos_ + 1] != ']') {
        ++pos_;
        bool single_hi;
        uint32_t hi;
        CodepointSet second = class_atom(single_hi, hi);
        if (!single_hi) fail("class range with a set escape");
        if (hi < lo) fail("class range out of order");
        set.add(lo, hi);
      } else {
        set.add(first);
      }
    }
    ++pos_;
    return negated ? set.complement() : set;
  }

  std::string_view s_;
  size_t pos_ = 0;
  int depth_ = 0;  // groups open at pos_
};

class RegexEmitter {
 public:
  explicit RegexEmitter(RegexMode mode) : mode_(mode) {}

  std::string top(RegexNode root) {
    std::vector<RegexNode> alternatives;
    if (root.kind == RegexNode::alt) {
      alternatives = std::move(root.children);
    } else {
      alternatives.push_back(std::move(root));
    }
    std::string out;
    for (RegexNode& a : alternatives) out += (out.empty() ? "" : " | ") + anchored(std::move(a));
    return "( " + out + " )";
  }

 private:
  // One top-level alternative: strips ^ and $ at its ends; in search mode an unanchored
  // end may be preceded / followed by anything.
  std::string anchored(RegexNode node) {
    std::vector<RegexNode> items;
    if (node.kind == RegexNode::seq) {
      items = std::move(node.children);
    } else {
      items.push_back(std::move(node));
    }
    bool start = !items.empty() && items.front().kind == RegexNode::line_start;
    if (start) items.erase(items.begin());
    bool end = !items.empty() && items.back().kind == RegexNode::line_end;
    if (end) items.pop_back();
    std::string body = "(";
    for (const RegexNode& item : items) body += " " + emit(item);
    body += " )";
    if (mode_ == RegexMode::full_match) return body;
    std::string any = any_char() + "*";
    return (start ? "" : any + " ") + body + (end ? "" : " " + any);
  }

  std::string any_char() const {
    return mode_ == RegexMode::full_match ? "[\\x00-\\U0010FFFF]" : kJsonCharGbnf;
  }

  std::string emit(const RegexNode& node) {
    switch (node.kind) {
      case RegexNode::chars:
        return mode_ == RegexMode::full_match ? gbnf_class(node.set) : json_chars_gbnf(node.set);
      case RegexNode::seq: {
        std::string out = "(";
        for (const RegexNode& c : node.children) out += " " + emit(c);
        return out + " )";
      }
      case RegexNode::alt: {
        std::string out;
        for (const RegexNode& c : node.children) out += (out.empty() ? "" : " | ") + emit(c);
        return "( " + out + " )";
      }
      case RegexNode::repeat: {
        std::string inner = "( " + emit(node.children[0]) + " )";
        if (node.max == kUnbounded) return inner + "{" + std::to_string(node.min) + ",}";
        return inner + "{" + std::to_string(node.min) + "," + std::to_string(node.max) + "}";
      }
      case RegexNode::line_start:
      case RegexNode::line_end:
        throw CompileError("unsupported regex anchor inside a pattern (only at the ends)");
    }
    return "";
  }

  RegexMode mode_;
};

}  // namespace

std::string regex_to_gbnf(std::string_view pattern, RegexMode mode) {
  return RegexEmitter(mode).top(RegexParser(pattern).parse());
}

}  // namespace tsr::constraints
