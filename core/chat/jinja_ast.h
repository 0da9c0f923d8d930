// The syntax tree of a parsed Jinja template. One generic node type for expressions
// and one for statements keep the tree small; the comments name each kind's fields.
#pragma once

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "core/chat/jinja_error.h"
#include "core/chat/jinja_value.h"

namespace tsr::jinja {

struct Expr;
using ExprPtr = std::unique_ptr<Expr>;
using NamedExprs = std::vector<std::pair<std::string, ExprPtr>>;

struct Expr {
  enum class Kind {
    Literal,    // value
    Name,       // name
    Attribute,  // children[0].name
    Item,       // children[0][children[1]]
    Slice,      // children[0][children[1]:children[2]:children[3]], each bound may be null
    Call,       // children[0](children[1..], named)
    Filter,     // children[0] | name(children[1..], named)
    Test,       // children[0] is [not] name(children[1..], named)
    Unary,      // name ("-", "+", "not") applied to children[0]
    Binary,     // children[0] name children[1]: + - * / // % ** ~ and or
    Compare,    // children[0] ops[0] children[1] ops[1] children[2] ... (chained)
    Conditional,  // children[0] if children[1] else children[2] (else may be null)
    List,       // [children...]
    Dict,       // {children[0]: children[1], children[2]: children[3], ...}
  };
  Kind kind;
  Pos pos;
  Value value;
  std::string name;
  std::vector<ExprPtr> children;
  NamedExprs named;
  std::vector<std::string> ops;
  bool negated = false;
};

struct Node;
using NodePtr = std::unique_ptr<Node>;
using Body = std::vector<NodePtr>;

struct Node {
  enum class Kind {
    Text,      // text
    Output,    // {{ expr }}
    If,        // branches: (condition, body); a null condition is the else branch
    For,       // for targets in expr [if condition]: body [else: else_body]
    Set,       // set targets = expr, or set targets[0].attribute = expr
    SetBlock,  // set targets[0] %}body{% endset
    Macro,     // macro name(params with default exprs): body
    Break,
    Continue,
  };
  Kind kind;
  Pos pos;
  std::string text;
  ExprPtr expr;
  ExprPtr condition;
  std::vector<std::pair<ExprPtr, Body>> branches;
  std::vector<std::string> targets;
  std::string attribute;
  std::string name;
  NamedExprs params;
  Body body, else_body;
};

}  // namespace tsr::jinja
