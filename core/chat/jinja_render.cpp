#include "core/chat/jinja_render.h"

#include <memory>

#include "core/chat/jinja_builtins.h"
#include "core/chat/jinja_operators.h"

namespace tsr::jinja {
namespace {

constexpr size_t kMaxOutput = size_t{32} << 20;
// Chat templates loop over messages and tools: far fewer iterations than this.
constexpr uint64_t kMaxIterations = 200'000;
// Counts render and eval frames together; macros recurse through both.
constexpr int kMaxDepth = 256;
// Expression evaluations per render: loops, filters and nested loops all pass through
// eval, so this bounds a template's time (a chat template needs a few per message).
constexpr uint64_t kMaxSteps = 10'000'000;

// Jinja's scoping: a for-loop iteration and a macro call get their own scope, `if`
// does not; lookups walk outwards and `set` writes to the innermost scope.
struct Scope {
  std::shared_ptr<Scope> parent;
  Dict vars;

  const Value* lookup(std::string_view name) const {
    for (const Scope* s = this; s; s = s->parent.get()) {
      if (const Value* v = s->vars.find(name)) return v;
    }
    return nullptr;
  }
};
using ScopePtr = std::shared_ptr<Scope>;

ScopePtr child_of(const ScopePtr& parent) {
  auto s = std::make_shared<Scope>();
  s->parent = parent;
  return s;
}

enum class Flow { Normal, Break, Continue };

class Renderer {
 public:
  std::string run(const Body& body, const Dict& variables) {
    auto globals = std::make_shared<Scope>();
    globals->vars = global_functions();
    auto root = child_of(globals);
    root->vars = variables;
    try {
      render_body(body, root);
    } catch (const BuiltinError& e) {  // one a call site did not position: still a tsr::Error
      throw Error(std::string("chat template: ") + e.what());
    }
    return std::move(out_);
  }

 private:
  class Nest {
   public:
    Nest(Renderer& r, Pos pos) : r_(r) {
      if (++r_.depth_ > kMaxDepth) fail_at(pos, "nesting too deep (runaway macro recursion?)");
    }
    ~Nest() { --r_.depth_; }
    Nest(const Nest&) = delete;
    Nest& operator=(const Nest&) = delete;

   private:
    Renderer& r_;
  };

  Flow render_body(const Body& body, const ScopePtr& scope) {
    for (const NodePtr& node : body) {
      Flow flow = render_node(*node, scope);
      if (flow != Flow::Normal) return flow;
    }
    return Flow::Normal;
  }

  Flow render_node(const Node& n, const ScopePtr& scope) {
    Nest nest(*this, n.pos);
    switch (n.kind) {
      case Node::Kind::Text: emit(n.text, n.pos); break;
      case Node::Kind::Output: {
        const Value v = eval(*n.expr, scope);
        emit(guarded(n.pos, [&] { return to_str(v); }), n.pos);
        break;
      }
      case Node::Kind::If: return render_if(n, scope);
      case Node::Kind::For: render_for(n, scope); break;
      case Node::Kind::Set: assign(n, eval(*n.expr, scope), scope); break;
      case Node::Kind::SetBlock: assign(n, capture(n.body, scope), scope); break;
      case Node::Kind::Macro: define_macro(n, scope); break;
      case Node::Kind::Break: return Flow::Break;
      case Node::Kind::Continue: return Flow::Continue;
    }
    return Flow::Normal;
  }

  void emit(const std::string& text, Pos pos) {
    if (out_.size() + text.size() > kMaxOutput) fail_at(pos, "output exceeds 32 MiB");
    out_ += text;
  }

  // Renders `body` into a string of its own (block set, macro call).
  std::string capture(const Body& body, const ScopePtr& scope) {
    std::string saved = std::move(out_);
    out_.clear();
    render_body(body, scope);
    return std::exchange(out_, std::move(saved));
  }

  Flow render_if(const Node& n, const ScopePtr& scope) {
    for (const auto& [condition, body] : n.branches) {
      if (!condition || eval(*condition, scope).truthy()) return render_body(body, scope);
    }
    return Flow::Normal;
  }

  void bind(const std::vector<std::string>& targets, const Value& value, Scope& scope, Pos pos) {
    if (targets.size() == 1) {
      scope.vars.set(targets[0], value);
      return;
    }
    List items = guarded(pos, [&] { return iterate(value); });
    if (items.size() != targets.size()) {
      fail_at(pos, "cannot unpack " + std::to_string(items.size()) + " values into " +
                       std::to_string(targets.size()) + " names");
    }
    for (size_t i = 0; i < targets.size(); ++i) scope.vars.set(targets[i], items[i]);
  }

  void render_for(const Node& n, const ScopePtr& scope) {
    List items = guarded(n.pos, [&] { return iterate(eval(*n.expr, scope)); });
    if (n.condition) items = filter_loop(n, std::move(items), scope);
    if (items.empty()) {
      render_body(n.else_body, scope);
      return;
    }
    // One loop object per loop, advanced each iteration, as Jinja's LoopContext is.
    Value loop = Dict();
    for (size_t i = 0; i < items.size(); ++i) {
      if (++iterations_ > kMaxIterations) fail_at(n.pos, "too many loop iterations");
      ScopePtr iteration = child_of(scope);
      bind(n.targets, items[i], *iteration, n.pos);
      advance_loop(loop.as_dict(), items, i);
      iteration->vars.set("loop", loop);
      if (render_body(n.body, iteration) == Flow::Break) break;
    }
  }

  // `for x in xs if cond`: filtered before the loop, so loop.length counts what is left.
  List filter_loop(const Node& n, List items, const ScopePtr& scope) {
    List kept;
    for (Value& item : items) {
      if (++iterations_ > kMaxIterations) fail_at(n.pos, "too many loop iterations");
      ScopePtr probe = child_of(scope);
      bind(n.targets, item, *probe, n.pos);
      if (eval(*n.condition, probe).truthy()) kept.push_back(std::move(item));
    }
    return kept;
  }

  static void advance_loop(Dict& loop, const List& items, size_t i) {
    int64_t index = static_cast<int64_t>(i), length = static_cast<int64_t>(items.size());
    loop.set("index", index + 1);
    loop.set("index0", index);
    loop.set("revindex", length - index);
    loop.set("revindex0", length - index - 1);
    loop.set("first", i == 0);
    loop.set("last", i + 1 == items.size());
    loop.set("length", length);
    loop.set("previtem", i > 0 ? items[i - 1] : Value());
    loop.set("nextitem", i + 1 < items.size() ? items[i + 1] : Value());
    loop.set("depth", 1);
    loop.set("depth0", 0);
  }

  void assign(const Node& n, Value value, const ScopePtr& scope) {
    if (n.attribute.empty()) {
      bind(n.targets, value, *scope, n.pos);
      return;
    }
    const Value* target = scope->lookup(n.targets[0]);
    if (!target || !target->is_dict() || !target->as_dict().is_namespace) {
      fail_at(n.pos, "cannot assign attribute on non-namespace object '" + n.targets[0] + "'");
    }
    if (guarded(n.pos, [&] { return contains_object(value, target->identity()); })) {
      fail_at(n.pos, "cannot store a namespace inside itself");
    }
    target->as_dict().set(n.attribute, std::move(value));
  }

  // A macro is a function value; it sees the scope it was defined in, as in Jinja.
  void define_macro(const Node& n, const ScopePtr& scope) {
    std::weak_ptr<Scope> home = scope;
    const Node* macro = &n;
    scope->vars.set(n.name, Function([this, macro, home](const CallArgs& args) {
                      ScopePtr defining = home.lock();
                      if (!defining) throw BuiltinError("macro '" + macro->name + "' called outside its scope");
                      return Value(call_macro(*macro, defining, args));
                    }));
  }

  std::string call_macro(const Node& macro, const ScopePtr& defining, const CallArgs& args) {
    if (args.positional.size() > macro.params.size()) {
      throw BuiltinError("macro '" + macro.name + "' takes at most " + std::to_string(macro.params.size()) + " arguments");
    }
    ScopePtr scope = child_of(defining);
    for (size_t i = 0; i < macro.params.size(); ++i) {
      const auto& [name, fallback] = macro.params[i];
      Value value = argument(args, i, name, Value());
      if (value.is_undefined() && fallback) value = eval(*fallback, scope);
      scope->vars.set(name, value);
    }
    for (const auto& named : args.named) {
      if (!scope->vars.find(named.first)) {
        throw BuiltinError("macro '" + macro.name + "' has no parameter '" + named.first + "'");
      }
    }
    return capture(macro.body, scope);
  }

  // Runs a builtin, turning its position-less BuiltinError into a positioned tsr::Error.
  template <typename F>
  auto guarded(Pos pos, F&& f) -> decltype(f()) {
    try {
      return f();
    } catch (const BuiltinError& e) {
      fail_at(pos, e.what());
    }
  }

  Value eval(const Expr& e, const ScopePtr& scope) {
    Nest nest(*this, e.pos);
    if (++steps_ > kMaxSteps) fail_at(e.pos, "template takes too many steps");
    return guarded(e.pos, [&] { return eval_kind(e, scope); });
  }

  Value eval_kind(const Expr& e, const ScopePtr& scope) {
    switch (e.kind) {
      case Expr::Kind::Literal: return e.value;
      case Expr::Kind::Name: {
        const Value* v = scope->lookup(e.name);
        return v ? *v : Value();
      }
      case Expr::Kind::Attribute: return get_attribute(eval(*e.children[0], scope), e.name);
      case Expr::Kind::Item: return get_item(eval(*e.children[0], scope), eval(*e.children[1], scope));
      case Expr::Kind::Slice: return eval_slice(e, scope);
      case Expr::Kind::Call: return eval_call(e, scope);
      case Expr::Kind::Filter: return apply_filter(e.name, eval(*e.children[0], scope), eval_args(e, scope));
      case Expr::Kind::Test: return apply_test(e.name, eval(*e.children[0], scope), eval_args(e, scope)) != e.negated;
      case Expr::Kind::Unary: return eval_unary(e, scope);
      case Expr::Kind::Binary: return eval_binary(e, scope);
      case Expr::Kind::Compare: return eval_compare(e, scope);
      case Expr::Kind::Conditional: {
        if (eval(*e.children[1], scope).truthy()) return eval(*e.children[0], scope);
        return e.children[2] ? eval(*e.children[2], scope) : Value();
      }
      case Expr::Kind::List: {
        List items;
        for (const ExprPtr& child : e.children) items.push_back(eval(*child, scope));
        return items;
      }
      case Expr::Kind::Dict: return eval_dict(e, scope);
    }
    return Value();
  }

  Value eval_slice(const Expr& e, const ScopePtr& scope) {
    auto bound = [&](size_t i) { return e.children[i] ? eval(*e.children[i], scope) : Value(); };
    return slice(eval(*e.children[0], scope), bound(1), bound(2), bound(3));
  }

  Value eval_dict(const Expr& e, const ScopePtr& scope) {
    Dict d;
    for (size_t i = 0; i + 1 < e.children.size(); i += 2) {
      Value key = eval(*e.children[i], scope);
      if (!key.is_string()) throw BuiltinError("dict keys must be strings");
      d.set(key.as_string(), eval(*e.children[i + 1], scope));
    }
    return d;
  }

  // Arguments after the subject (filters, tests) or callee (calls): children[1..].
  CallArgs eval_args(const Expr& e, const ScopePtr& scope) {
    CallArgs args;
    for (size_t i = 1; i < e.children.size(); ++i) args.positional.push_back(eval(*e.children[i], scope));
    for (const auto& [name, value] : e.named) args.named.emplace_back(name, eval(*value, scope));
    return args;
  }

  Value eval_call(const Expr& e, const ScopePtr& scope) {
    const Expr& callee = *e.children[0];
    CallArgs args = eval_args(e, scope);
    if (callee.kind == Expr::Kind::Attribute) {  // obj.method(...), or a function stored in a dict
      Value subject = eval(*callee.children[0], scope);
      const Value* member = subject.is_dict() ? subject.as_dict().find(callee.name) : nullptr;
      if (member && member->is_function()) return member->as_function()(args);
      return call_method(subject, callee.name, args);
    }
    Value f = eval(callee, scope);
    if (f.is_function()) return f.as_function()(args);
    std::string what = callee.kind == Expr::Kind::Name ? "'" + callee.name + "'" : "value";
    throw BuiltinError(what + (f.is_undefined() ? " is undefined" : " is not callable"));
  }

  Value eval_unary(const Expr& e, const ScopePtr& scope) {
    Value v = eval(*e.children[0], scope);
    if (e.name == "not") return !v.truthy();
    if (e.name == "-") return negate(v);
    if (!v.is_number()) throw BuiltinError("bad operand type for unary +: '" + v.type_name() + "'");
    return v;
  }

  // `and`/`or` short-circuit and yield an operand, as in Python.
  Value eval_binary(const Expr& e, const ScopePtr& scope) {
    Value left = eval(*e.children[0], scope);
    if (e.name == "and") return left.truthy() ? eval(*e.children[1], scope) : left;
    if (e.name == "or") return left.truthy() ? left : eval(*e.children[1], scope);
    return binary_op(e.name, left, eval(*e.children[1], scope));
  }

  // a < b < c means a < b and b < c, evaluating b once.
  Value eval_compare(const Expr& e, const ScopePtr& scope) {
    Value left = eval(*e.children[0], scope);
    for (size_t i = 0; i < e.ops.size(); ++i) {
      Value right = eval(*e.children[i + 1], scope);
      if (!binary_op(e.ops[i], left, right).truthy()) return false;
      left = std::move(right);
    }
    return true;
  }

  std::string out_;
  int depth_ = 0;
  uint64_t iterations_ = 0;
  uint64_t steps_ = 0;
};

}  // namespace

std::string render(const Body& body, const Dict& variables) { return Renderer().run(body, variables); }

}  // namespace tsr::jinja
