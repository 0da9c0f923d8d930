#include "core/chat/jinja_parser.h"

#include <algorithm>
#include <initializer_list>

#include "core/chat/jinja_builtins.h"

namespace tsr::jinja {
namespace {

ExprPtr make_expr(Expr::Kind kind, Pos pos) {
  auto e = std::make_unique<Expr>();
  e->kind = kind;
  e->pos = pos;
  return e;
}

ExprPtr make_binary(Expr::Kind kind, std::string op, ExprPtr left, ExprPtr right) {
  auto e = make_expr(kind, left->pos);
  e->name = std::move(op);
  e->children.push_back(std::move(left));
  e->children.push_back(std::move(right));
  return e;
}

class Parser {
 public:
  explicit Parser(const std::vector<Token>& tokens) : t_(tokens) {}

  Body parse_template() {
    std::string end;
    return parse_body({}, end);
  }

 private:
  // Guards recursion so that deeply nested input fails cleanly instead of overflowing.
  class Nest {
   public:
    explicit Nest(Parser& p) : p_(p) {
      if (++p_.depth_ > kMaxNesting) p_.fail("template nested too deeply");
    }
    ~Nest() { --p_.depth_; }
    Nest(const Nest&) = delete;
    Nest& operator=(const Nest&) = delete;

   private:
    Parser& p_;
  };

  const Token& peek(size_t ahead = 0) const { return t_[std::min(i_ + ahead, t_.size() - 1)]; }
  const Token& next() { return t_[std::min(i_++, t_.size() - 1)]; }
  bool at_op(std::string_view op, size_t ahead = 0) const {
    return peek(ahead).kind == TokenKind::Operator && peek(ahead).text == op;
  }
  bool at_name(std::string_view name, size_t ahead = 0) const {
    return peek(ahead).kind == TokenKind::Name && peek(ahead).text == name;
  }

  static std::string describe(const Token& tok) {
    switch (tok.kind) {
      case TokenKind::End: return "end of template";
      case TokenKind::BlockEnd:
      case TokenKind::VariableEnd: return "end of tag";
      case TokenKind::String: return "string";
      default: return "'" + tok.text + "'";
    }
  }

  [[noreturn]] void fail(const std::string& message) const { fail_at(peek().pos, message); }

  void expect_op(std::string_view op) {
    if (!at_op(op)) fail("expected '" + std::string(op) + "', found " + describe(peek()));
    ++i_;
  }

  void expect(TokenKind kind, const char* what) {
    if (peek().kind != kind) fail(std::string("expected ") + what + ", found " + describe(peek()));
    ++i_;
  }

  std::string expect_name() {
    if (peek().kind != TokenKind::Name) fail("expected a name, found " + describe(peek()));
    return next().text;
  }

  // Statements until a block tag named in `stops`; leaves the position after that name.
  Body parse_body(std::initializer_list<std::string_view> stops, std::string& stop) {
    Nest nest(*this);
    Body body;
    while (true) {
      const Token& tok = peek();
      if (tok.kind == TokenKind::End) {
        if (stops.size() == 0) return body;
        fail("unexpected end of template, expected {% " + std::string(*std::prev(stops.end())) + " %}");
      }
      if (tok.kind == TokenKind::BlockBegin && peek(1).kind == TokenKind::Name &&
          std::find(stops.begin(), stops.end(), peek(1).text) != stops.end()) {
        ++i_;
        stop = next().text;
        return body;
      }
      body.push_back(parse_node());
    }
  }

  NodePtr make_node(Node::Kind kind, Pos pos) {
    auto n = std::make_unique<Node>();
    n->kind = kind;
    n->pos = pos;
    return n;
  }

  NodePtr parse_node() {
    const Token& tok = next();
    if (tok.kind == TokenKind::Text) {
      auto n = make_node(Node::Kind::Text, tok.pos);
      n->text = tok.text;
      return n;
    }
    if (tok.kind == TokenKind::VariableBegin) {
      auto n = make_node(Node::Kind::Output, tok.pos);
      n->expr = parse_expression();
      expect(TokenKind::VariableEnd, "'}}'");
      return n;
    }
    if (tok.kind != TokenKind::BlockBegin) fail_at(tok.pos, "unexpected " + describe(tok));
    return parse_statement();
  }

  NodePtr parse_statement() {
    Pos pos = peek().pos;
    std::string keyword = expect_name();
    if (keyword == "if") return parse_if(pos);
    if (keyword == "for") return parse_for(pos);
    if (keyword == "set") return parse_set(pos);
    if (keyword == "macro") return parse_macro(pos);
    if (keyword == "break" || keyword == "continue") return parse_loop_control(pos, keyword);
    if (keyword == "generation") return parse_generation(pos);
    fail_at(pos, "unknown or misplaced tag '" + keyword + "'");
  }

  NodePtr parse_if(Pos pos) {
    auto n = make_node(Node::Kind::If, pos);
    std::string stop = "elif";
    while (stop == "elif") {
      ExprPtr condition = parse_expression();
      expect(TokenKind::BlockEnd, "'%}'");
      n->branches.emplace_back(std::move(condition), parse_body({"elif", "else", "endif"}, stop));
    }
    if (stop == "else") {
      expect(TokenKind::BlockEnd, "'%}'");
      n->branches.emplace_back(nullptr, parse_body({"endif"}, stop));
    }
    expect(TokenKind::BlockEnd, "'%}'");
    return n;
  }

  std::vector<std::string> parse_targets() {
    bool parens = at_op("(");
    if (parens) ++i_;
    std::vector<std::string> names{expect_name()};
    while (at_op(",")) {
      ++i_;
      names.push_back(expect_name());
    }
    if (parens) expect_op(")");
    return names;
  }

  NodePtr parse_for(Pos pos) {
    auto n = make_node(Node::Kind::For, pos);
    n->targets = parse_targets();
    if (!at_name("in")) fail("expected 'in', found " + describe(peek()));
    ++i_;
    n->expr = parse_or();  // not a conditional: a trailing `if` filters the loop
    if (at_name("if")) {
      ++i_;
      n->condition = parse_expression();
    }
    if (at_name("recursive")) fail("recursive loops are not supported");
    expect(TokenKind::BlockEnd, "'%}'");
    ++loop_depth_;
    std::string stop;
    n->body = parse_body({"else", "endfor"}, stop);
    --loop_depth_;
    if (stop == "else") {
      expect(TokenKind::BlockEnd, "'%}'");
      n->else_body = parse_body({"endfor"}, stop);
    }
    expect(TokenKind::BlockEnd, "'%}'");
    return n;
  }

  NodePtr parse_set(Pos pos) {
    auto n = make_node(Node::Kind::Set, pos);
    n->targets = parse_targets();
    if (n->targets.size() == 1 && at_op(".")) {
      ++i_;
      n->attribute = expect_name();
    }
    if (peek().kind == TokenKind::BlockEnd && n->targets.size() == 1 && n->attribute.empty()) {
      ++i_;
      n->kind = Node::Kind::SetBlock;
      std::string stop;
      n->body = parse_body({"endset"}, stop);
    } else {
      expect_op("=");
      n->expr = parse_expression();
    }
    expect(TokenKind::BlockEnd, "'%}'");
    return n;
  }

  NodePtr parse_macro(Pos pos) {
    auto n = make_node(Node::Kind::Macro, pos);
    n->name = expect_name();
    expect_op("(");
    while (!at_op(")")) {
      std::string param = expect_name();
      ExprPtr fallback;
      if (at_op("=")) {
        ++i_;
        fallback = parse_expression();
      }
      n->params.emplace_back(std::move(param), std::move(fallback));
      if (!at_op(")")) expect_op(",");
    }
    ++i_;
    expect(TokenKind::BlockEnd, "'%}'");
    int loops = std::exchange(loop_depth_, 0);  // a macro body is not inside the caller's loop
    std::string stop;
    n->body = parse_body({"endmacro"}, stop);
    loop_depth_ = loops;
    expect(TokenKind::BlockEnd, "'%}'");
    return n;
  }

  NodePtr parse_loop_control(Pos pos, const std::string& keyword) {
    if (loop_depth_ == 0) fail_at(pos, "'" + keyword + "' outside of a loop");
    expect(TokenKind::BlockEnd, "'%}'");
    return make_node(keyword == "break" ? Node::Kind::Break : Node::Kind::Continue, pos);
  }

  // HF's {% generation %} only marks assistant text for training masks; it renders its body.
  NodePtr parse_generation(Pos pos) {
    expect(TokenKind::BlockEnd, "'%}'");
    auto n = make_node(Node::Kind::If, pos);
    auto always = make_expr(Expr::Kind::Literal, pos);
    always->value = true;
    std::string stop;
    n->branches.emplace_back(std::move(always), parse_body({"endgeneration"}, stop));
    expect(TokenKind::BlockEnd, "'%}'");
    return n;
  }

  // ---- expressions, lowest precedence first ----

  ExprPtr parse_expression() {
    Nest nest(*this);
    ExprPtr e = parse_or();
    int links = 0;
    while (at_name("if")) {
      link(links);
      auto c = make_expr(Expr::Kind::Conditional, next().pos);
      c->children.push_back(std::move(e));
      c->children.push_back(parse_or());
      ExprPtr otherwise;
      if (at_name("else")) {
        ++i_;
        otherwise = parse_expression();
      }
      c->children.push_back(std::move(otherwise));
      e = std::move(c);
    }
    return e;
  }

  // Left-associative chains (a or b or ..., a.b.c..., x|f|g...) build a tree one level
  // deeper per link; destroying it recurses per level, so a chain is as bounded as nesting.
  void link(int& links) {
    if (++links > kMaxNesting) fail("expression chain longer than " + std::to_string(kMaxNesting) + " links");
  }

  ExprPtr parse_or() {
    ExprPtr e = parse_and();
    int links = 0;
    while (at_name("or")) {
      link(links);
      ++i_;
      e = make_binary(Expr::Kind::Binary, "or", std::move(e), parse_and());
    }
    return e;
  }

  ExprPtr parse_and() {
    ExprPtr e = parse_not();
    int links = 0;
    while (at_name("and")) {
      link(links);
      ++i_;
      e = make_binary(Expr::Kind::Binary, "and", std::move(e), parse_not());
    }
    return e;
  }

  ExprPtr parse_not() {
    if (!at_name("not")) return parse_compare();
    Nest nest(*this);
    auto e = make_expr(Expr::Kind::Unary, next().pos);
    e->name = "not";
    e->children.push_back(parse_not());
    return e;
  }

  ExprPtr parse_compare() {
    ExprPtr first = parse_math1();
    auto e = make_expr(Expr::Kind::Compare, first->pos);
    e->children.push_back(std::move(first));
    static const std::initializer_list<std::string_view> ops = {"==", "!=", "<", ">", "<=", ">="};
    while (true) {
      if (peek().kind == TokenKind::Operator && std::find(ops.begin(), ops.end(), peek().text) != ops.end()) {
        e->ops.push_back(next().text);
      } else if (at_name("in")) {
        e->ops.push_back(next().text);
      } else if (at_name("not") && at_name("in", 1)) {
        i_ += 2;
        e->ops.push_back("not in");
      } else {
        break;
      }
      e->children.push_back(parse_math1());
    }
    return e->ops.empty() ? std::move(e->children[0]) : std::move(e);
  }

  template <typename Next>
  ExprPtr parse_binary_level(std::initializer_list<std::string_view> ops, Next next_level) {
    ExprPtr e = (this->*next_level)();
    int links = 0;
    while (peek().kind == TokenKind::Operator && std::find(ops.begin(), ops.end(), peek().text) != ops.end()) {
      link(links);
      std::string op = next().text;
      e = make_binary(Expr::Kind::Binary, op, std::move(e), (this->*next_level)());
    }
    return e;
  }

  ExprPtr parse_math1() { return parse_binary_level({"+", "-"}, &Parser::parse_concat); }
  ExprPtr parse_concat() { return parse_binary_level({"~"}, &Parser::parse_math2); }
  ExprPtr parse_math2() { return parse_binary_level({"*", "/", "//", "%"}, &Parser::parse_pow); }
  ExprPtr parse_pow() { return parse_binary_level({"**"}, &Parser::parse_unary_filtered); }
  ExprPtr parse_unary_filtered() { return parse_unary(true); }

  ExprPtr parse_unary(bool with_filters) {
    Nest nest(*this);
    ExprPtr e;
    if (at_op("-") || at_op("+")) {
      e = make_expr(Expr::Kind::Unary, peek().pos);
      e->name = next().text;
      e->children.push_back(parse_unary(false));
    } else {
      e = parse_primary();
    }
    e = parse_postfix(std::move(e));
    return with_filters ? parse_filters(std::move(e)) : std::move(e);
  }

  ExprPtr parse_postfix(ExprPtr e) {
    for (int links = 0;; link(links)) {
      if (at_op(".")) {
        e = parse_dot(std::move(e));
      } else if (at_op("[")) {
        e = parse_subscript(std::move(e));
      } else if (at_op("(")) {
        e = parse_call(std::move(e));
      } else {
        return e;
      }
    }
  }

  ExprPtr parse_dot(ExprPtr subject) {
    Pos pos = next().pos;
    if (peek().kind == TokenKind::Integer) {  // x.0 is x[0]
      auto index = make_expr(Expr::Kind::Literal, peek().pos);
      index->value = parse_integer(next());
      return make_binary(Expr::Kind::Item, "", std::move(subject), std::move(index));
    }
    auto e = make_expr(Expr::Kind::Attribute, pos);
    e->name = expect_name();
    e->children.push_back(std::move(subject));
    return e;
  }

  ExprPtr parse_subscript(ExprPtr subject) {
    Pos pos = next().pos;
    ExprPtr start = at_op(":") ? nullptr : parse_expression();
    if (!at_op(":")) {
      expect_op("]");
      auto e = make_binary(Expr::Kind::Item, "", std::move(subject), std::move(start));
      e->pos = pos;
      return e;
    }
    auto e = make_expr(Expr::Kind::Slice, pos);
    e->children.push_back(std::move(subject));
    e->children.push_back(std::move(start));
    ++i_;
    e->children.push_back(at_op(":") || at_op("]") ? nullptr : parse_expression());
    ExprPtr step;
    if (at_op(":")) {
      ++i_;
      if (!at_op("]")) step = parse_expression();
    }
    e->children.push_back(std::move(step));
    expect_op("]");
    return e;
  }

  void parse_call_args(Expr& e) {
    expect_op("(");
    while (!at_op(")")) {
      if (peek().kind == TokenKind::Name && at_op("=", 1)) {
        std::string name = next().text;
        ++i_;
        e.named.emplace_back(std::move(name), parse_expression());
      } else {
        if (!e.named.empty()) fail("positional argument after keyword argument");
        e.children.push_back(parse_expression());
      }
      if (!at_op(")")) expect_op(",");
    }
    ++i_;
  }

  ExprPtr parse_call(ExprPtr callee) {
    auto e = make_expr(Expr::Kind::Call, peek().pos);
    e->children.push_back(std::move(callee));
    parse_call_args(*e);
    return e;
  }

  ExprPtr parse_filters(ExprPtr e) {
    for (int links = 0;; link(links)) {
      if (at_op("|")) {
        e = parse_filter(std::move(e));
      } else if (at_name("is")) {
        e = parse_test(std::move(e));
      } else if (at_op("(")) {
        e = parse_call(std::move(e));
      } else {
        return e;
      }
    }
  }

  ExprPtr parse_filter(ExprPtr subject) {
    ++i_;
    auto e = make_expr(Expr::Kind::Filter, peek().pos);
    e->name = expect_name();
    if (!is_filter(e->name)) fail_at(e->pos, "unknown filter '" + e->name + "'");
    e->children.push_back(std::move(subject));
    if (at_op("(")) parse_call_args(*e);
    return e;
  }

  // Whether the token after a test name starts its single unparenthesized argument
  // (`x is divisibleby 3`, `x is sameas false`).
  bool starts_test_argument() const {
    const Token& tok = peek();
    if (tok.kind == TokenKind::Name) {
      static const std::initializer_list<std::string_view> stop = {"else", "or", "and", "if", "is", "in", "not"};
      return std::find(stop.begin(), stop.end(), tok.text) == stop.end();
    }
    return tok.kind == TokenKind::String || tok.kind == TokenKind::Integer || tok.kind == TokenKind::Float ||
           at_op("[") || at_op("{");
  }

  ExprPtr parse_test(ExprPtr subject) {
    ++i_;
    auto e = make_expr(Expr::Kind::Test, peek().pos);
    if (at_name("not")) {
      ++i_;
      e->negated = true;
    }
    e->name = expect_name();
    if (!is_test(e->name)) fail_at(e->pos, "unknown test '" + e->name + "'");
    e->children.push_back(std::move(subject));
    if (at_op("(")) {
      parse_call_args(*e);
    } else if (starts_test_argument()) {
      e->children.push_back(parse_postfix(parse_primary()));
    }
    return e;
  }

  Value parse_integer(const Token& tok) const {
    try {
      return Value(static_cast<int64_t>(std::stoll(tok.text)));
    } catch (const std::out_of_range&) {
      fail_at(tok.pos, "integer literal out of range");
    }
  }

  ExprPtr parse_primary() {
    const Token& tok = peek();
    auto e = make_expr(Expr::Kind::Literal, tok.pos);
    switch (tok.kind) {
      case TokenKind::Name: return parse_name();
      case TokenKind::String:
        e->value = std::string();
        while (peek().kind == TokenKind::String) e->value = e->value.as_string() + next().text;
        return e;
      case TokenKind::Integer: e->value = parse_integer(next()); return e;
      case TokenKind::Float: e->value = std::strtod(next().text.c_str(), nullptr); return e;  // 1e999: inf, as Python
      default: break;
    }
    if (at_op("(")) return parse_parenthesized();
    if (at_op("[")) return parse_list();
    if (at_op("{")) return parse_dict();
    fail("unexpected " + describe(tok));
  }

  ExprPtr parse_name() {
    const Token& tok = next();
    auto e = make_expr(Expr::Kind::Literal, tok.pos);
    if (tok.text == "true" || tok.text == "True") e->value = true;
    else if (tok.text == "false" || tok.text == "False") e->value = false;
    else if (tok.text == "none" || tok.text == "None") e->value = Value::none();
    else {
      e->kind = Expr::Kind::Name;
      e->name = tok.text;
    }
    return e;
  }

  // (x) is x; (x, y) and () are tuples, which behave as lists here.
  ExprPtr parse_parenthesized() {
    auto tuple = make_expr(Expr::Kind::List, next().pos);
    if (at_op(")")) {
      ++i_;
      return tuple;
    }
    ExprPtr first = parse_expression();
    if (at_op(")")) {
      ++i_;
      return first;
    }
    tuple->children.push_back(std::move(first));
    while (at_op(",")) {
      ++i_;
      if (at_op(")")) break;
      tuple->children.push_back(parse_expression());
    }
    expect_op(")");
    return tuple;
  }

  ExprPtr parse_list() {
    auto e = make_expr(Expr::Kind::List, next().pos);
    while (!at_op("]")) {
      e->children.push_back(parse_expression());
      if (!at_op("]")) expect_op(",");
    }
    ++i_;
    return e;
  }

  ExprPtr parse_dict() {
    auto e = make_expr(Expr::Kind::Dict, next().pos);
    while (!at_op("}")) {
      e->children.push_back(parse_expression());
      expect_op(":");
      e->children.push_back(parse_expression());
      if (!at_op("}")) expect_op(",");
    }
    ++i_;
    return e;
  }

  const std::vector<Token>& t_;
  size_t i_ = 0;
  int depth_ = 0;
  int loop_depth_ = 0;
};

}  // namespace

Body parse(const std::vector<Token>& tokens) { return Parser(tokens).parse_template(); }

}  // namespace tsr::jinja
