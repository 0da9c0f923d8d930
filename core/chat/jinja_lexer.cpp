#include "core/chat/jinja_lexer.h"

#include <algorithm>
#include <cctype>

namespace tsr::jinja {
namespace {

bool is_space(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v'; }
bool is_name_start(char c) { return std::isalpha(static_cast<unsigned char>(c)) || c == '_'; }
bool is_name_char(char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_'; }
bool is_digit(char c) { return c >= '0' && c <= '9'; }

// Jinja normalizes newlines to "\n" and, without keep_trailing_newline (HF does not
// set it), drops one newline at the very end of the template.
std::string normalize(std::string_view source) {
  std::string out;
  out.reserve(source.size());
  for (size_t i = 0; i < source.size(); ++i) {
    if (source[i] == '\r') {
      out += '\n';
      if (i + 1 < source.size() && source[i + 1] == '\n') ++i;
    } else {
      out += source[i];
    }
  }
  if (!out.empty() && out.back() == '\n') out.pop_back();
  return out;
}

void append_utf8(std::string& out, uint32_t cp) {
  if (cp < 0x80) {
    out += static_cast<char>(cp);
  } else if (cp < 0x800) {
    out += static_cast<char>(0xc0 | (cp >> 6));
    out += static_cast<char>(0x80 | (cp & 0x3f));
  } else if (cp < 0x10000) {
    out += static_cast<char>(0xe0 | (cp >> 12));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3f));
    out += static_cast<char>(0x80 | (cp & 0x3f));
  } else {
    out += static_cast<char>(0xf0 | (cp >> 18));
    out += static_cast<char>(0x80 | ((cp >> 12) & 0x3f));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3f));
    out += static_cast<char>(0x80 | (cp & 0x3f));
  }
}

class Lexer {
 public:
  Lexer(std::string_view source, const LexOptions& options) : src_(normalize(source)), opt_(options) {
    line_starts_.push_back(0);
    for (size_t i = 0; i < src_.size(); ++i) {
      if (src_[i] == '\n') line_starts_.push_back(i + 1);
    }
  }

  std::vector<Token> run() {
    size_t pos = 0;
    while (pos < src_.size()) pos = lex_text_and_tag(pos);
    tokens_.push_back({TokenKind::End, "", position(src_.size())});
    return std::move(tokens_);
  }

 private:
  Pos position(size_t offset) const {
    auto it = std::upper_bound(line_starts_.begin(), line_starts_.end(), offset);
    size_t line = static_cast<size_t>(it - line_starts_.begin());
    return {static_cast<int>(line), static_cast<int>(offset - line_starts_[line - 1] + 1)};
  }

  [[noreturn]] void fail(size_t offset, const std::string& message) const {
    fail_at(position(offset), message);
  }

  size_t find_tag(size_t from) const {
    for (size_t i = src_.find('{', from); i != std::string::npos; i = src_.find('{', i + 1)) {
      if (i + 1 < src_.size() && (src_[i + 1] == '{' || src_[i + 1] == '%' || src_[i + 1] == '#')) return i;
    }
    return src_.size();
  }

  // The text up to the next tag, whitespace-controlled, then the tag itself.
  size_t lex_text_and_tag(size_t pos) {
    size_t tag = find_tag(pos);
    std::string text = take_leading_text(pos, tag);
    if (tag == src_.size()) {
      emit_text(std::move(text), pos);
      return tag;
    }
    char kind = src_[tag + 1];
    char modifier = tag + 2 < src_.size() ? src_[tag + 2] : '\0';
    strip_before_tag(text, kind, modifier);
    emit_text(std::move(text), pos);
    size_t inner = tag + 2 + (modifier == '-' || modifier == '+' ? 1 : 0);
    if (kind == '#') return lex_comment(tag, inner);
    if (kind == '%') {
      if (size_t after = raw_tag_end(inner, "raw"); after != 0) return lex_raw(tag, inner, after);
    }
    return lex_tag(tag, inner, kind == '%');
  }

  // Applies the previous tag's right-hand whitespace control to the text after it.
  std::string take_leading_text(size_t pos, size_t end) {
    std::string text = src_.substr(pos, end - pos);
    line_starting_ = pos == 0 || src_[pos - 1] == '\n';
    if (strip_next_) {
      size_t n = 0;
      while (n < text.size() && is_space(text[n])) ++n;
      text.erase(0, n);
    } else if (trim_newline_ && !text.empty() && text[0] == '\n') {
      text.erase(0, 1);
      line_starting_ = true;
    }
    strip_next_ = trim_newline_ = false;
    return text;
  }

  void strip_before_tag(std::string& text, char kind, char modifier) {
    if (modifier == '-') {
      while (!text.empty() && is_space(text.back())) text.pop_back();
    } else if (opt_.lstrip_blocks && kind != '{' && modifier != '+') {
      lstrip_line(text);
    }
  }

  // lstrip_blocks: spaces between the start of the line and a block tag are dropped.
  void lstrip_line(std::string& text) const {
    size_t line_start = text.rfind('\n');
    line_start = line_start == std::string::npos ? 0 : line_start + 1;
    if (line_start == 0 && !line_starting_) return;
    bool blank = std::all_of(text.begin() + static_cast<long>(line_start), text.end(), is_space);
    if (blank) text.resize(line_start);
  }

  void emit_text(std::string text, size_t pos) {
    if (!text.empty()) tokens_.push_back({TokenKind::Text, std::move(text), position(pos)});
  }

  // Records the whitespace control of a closing "-%}" / "+%}" / "%}".
  void close_tag(size_t close, bool block) {
    bool minus = close > 0 && src_[close - 1] == '-';
    bool plus = close > 0 && src_[close - 1] == '+';
    strip_next_ = minus;
    trim_newline_ = block && opt_.trim_blocks && !minus && !plus;
  }

  size_t lex_comment(size_t tag, size_t inner) {
    size_t close = src_.find("#}", inner);
    if (close == std::string::npos) fail(tag, "unterminated comment");
    close_tag(close, true);
    return close + 2;
  }

  // If a block tag starting at `inner` is exactly `{% <word> %}` (with optional - or +),
  // returns the offset after it, else 0.
  size_t raw_tag_end(size_t inner, std::string_view word) const {
    size_t i = inner;
    while (i < src_.size() && is_space(src_[i])) ++i;
    if (src_.compare(i, word.size(), word) != 0) return 0;
    i += word.size();
    if (i < src_.size() && is_name_char(src_[i])) return 0;
    while (i < src_.size() && is_space(src_[i])) ++i;
    if (i < src_.size() && (src_[i] == '-' || src_[i] == '+')) ++i;
    return src_.compare(i, 2, "%}") == 0 ? i + 2 : 0;
  }

  // {% raw %}...{% endraw %}: the body is text, whatever it contains.
  size_t lex_raw(size_t tag, size_t inner, size_t body) {
    close_tag(body - 2, true);
    for (size_t end = src_.find("{%", body); end != std::string::npos; end = src_.find("{%", end + 1)) {
      char modifier = end + 2 < src_.size() ? src_[end + 2] : '\0';
      size_t end_inner = end + 2 + (modifier == '-' || modifier == '+' ? 1 : 0);
      size_t after = raw_tag_end(end_inner, "endraw");
      if (after == 0) continue;
      std::string text = take_leading_text(body, end);
      strip_before_tag(text, '%', modifier);
      emit_text(std::move(text), body);
      close_tag(after - 2, true);
      return after;
    }
    fail(tag, "unterminated {% raw %} block");
  }

  size_t lex_tag(size_t tag, size_t pos, bool block) {
    tokens_.push_back({block ? TokenKind::BlockBegin : TokenKind::VariableBegin, "", position(tag)});
    const std::string_view closer = block ? "%}" : "}}";
    while (true) {
      while (pos < src_.size() && is_space(src_[pos])) ++pos;
      if (pos >= src_.size()) fail(tag, block ? "unterminated {% tag" : "unterminated {{ tag");
      size_t close = pos;
      if ((src_[pos] == '-' || (block && src_[pos] == '+')) && src_.compare(pos + 1, 2, closer) == 0) ++close;
      if (src_.compare(close, 2, closer) == 0) {
        tokens_.push_back({block ? TokenKind::BlockEnd : TokenKind::VariableEnd, "", position(pos)});
        close_tag(close, block);
        return close + 2;
      }
      pos = lex_token(pos);
    }
  }

  size_t lex_token(size_t pos) {
    char c = src_[pos];
    if (is_name_start(c)) {
      size_t end = pos;
      while (end < src_.size() && is_name_char(src_[end])) ++end;
      tokens_.push_back({TokenKind::Name, src_.substr(pos, end - pos), position(pos)});
      return end;
    }
    if (is_digit(c)) return lex_number(pos);
    if (c == '\'' || c == '"') return lex_string(pos);
    static const char* const two[] = {"**", "//", "==", "!=", "<=", ">="};
    for (const char* op : two) {
      if (src_.compare(pos, 2, op) == 0) {
        tokens_.push_back({TokenKind::Operator, op, position(pos)});
        return pos + 2;
      }
    }
    if (std::string_view("+-*/%~<>=()[]{},.:|").find(c) != std::string_view::npos) {
      tokens_.push_back({TokenKind::Operator, std::string(1, c), position(pos)});
      return pos + 1;
    }
    fail(pos, std::string("unexpected character '") + c + "'");
  }

  size_t lex_number(size_t pos) {
    size_t end = pos;
    while (end < src_.size() && is_digit(src_[end])) ++end;
    bool is_float = false;
    if (end + 1 < src_.size() && src_[end] == '.' && is_digit(src_[end + 1])) {
      is_float = true;
      for (++end; end < src_.size() && is_digit(src_[end]);) ++end;
    }
    if (end < src_.size() && (src_[end] == 'e' || src_[end] == 'E')) {
      size_t exp = end + 1;
      if (exp < src_.size() && (src_[exp] == '+' || src_[exp] == '-')) ++exp;
      if (exp < src_.size() && is_digit(src_[exp])) {
        is_float = true;
        for (end = exp; end < src_.size() && is_digit(src_[end]);) ++end;
      }
    }
    tokens_.push_back({is_float ? TokenKind::Float : TokenKind::Integer, src_.substr(pos, end - pos),
                       position(pos)});
    return end;
  }

  // Python string literal escapes, as Jinja decodes them.
  size_t lex_string(size_t start) {
    char quote = src_[start];
    std::string value;
    size_t pos = start + 1;
    while (pos < src_.size() && src_[pos] != quote) {
      if (src_[pos] != '\\' || pos + 1 >= src_.size()) {
        value += src_[pos++];
        continue;
      }
      pos = decode_escape(pos, value);
    }
    if (pos >= src_.size()) fail(start, "unterminated string literal");
    tokens_.push_back({TokenKind::String, std::move(value), position(start)});
    return pos + 1;
  }

  size_t decode_escape(size_t pos, std::string& value) const {
    char e = src_[pos + 1];
    using namespace std::string_view_literals;  // simple_to holds a NUL
    static constexpr std::string_view simple_from = "ntr0\\'\"abfv\n"sv;
    static constexpr std::string_view simple_to = "\n\t\r\0\\'\"\a\b\f\v"sv;
    if (size_t k = simple_from.find(e); k != std::string_view::npos) {
      if (e != '\n') value += simple_to[k];  // backslash-newline is a line continuation
      return pos + 2;
    }
    size_t digits = e == 'x' ? 2 : e == 'u' ? 4 : e == 'U' ? 8 : 0;
    if (digits == 0 || pos + 2 + digits > src_.size()) {
      value += '\\';  // Python keeps unknown escapes verbatim
      return pos + 1;
    }
    std::string hex = src_.substr(pos + 2, digits);
    if (!std::all_of(hex.begin(), hex.end(), [](char h) { return std::isxdigit(static_cast<unsigned char>(h)); })) {
      fail(pos, "invalid \\" + std::string(1, e) + " escape in string literal");
    }
    uint32_t cp = static_cast<uint32_t>(std::stoul(hex, nullptr, 16));
    if (cp > 0x10ffff) fail(pos, "invalid code point in string literal");
    append_utf8(value, cp);
    return pos + 2 + digits;
  }

  std::string src_;
  LexOptions opt_;
  std::vector<size_t> line_starts_;
  std::vector<Token> tokens_;
  bool strip_next_ = false;     // the previous tag ended with '-': strip all whitespace
  bool trim_newline_ = false;   // the previous block tag ended plainly: trim_blocks applies
  bool line_starting_ = true;   // the current text starts at the beginning of a line
};

}  // namespace

std::vector<Token> lex(std::string_view source, const LexOptions& options) {
  return Lexer(source, options).run();
}

}  // namespace tsr::jinja
