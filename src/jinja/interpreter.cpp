#include "jinja/interpreter.h"

#include "jinja/builtins.h"
#include "jinja/error.h"
#include "jinja/python_text.h"

namespace revis::jinja {

const Value* CallArgs::get(size_t index, std::string_view name) const {
  if (index < positional.size()) return &positional[index];
  for (const auto& [n, v] : named)
    if (n == name) return &v;
  return nullptr;
}

Value CallArgs::get_or(size_t index, std::string_view name, Value fallback) const {
  const Value* v = get(index, name);
  return v ? *v : fallback;
}

Interpreter::Interpreter(Limits limits, std::unordered_map<std::string, Value> globals)
    : limits_(limits),
      globals_(std::move(globals)),
      deadline_(std::chrono::steady_clock::now() + std::chrono::milliseconds(limits.max_milliseconds)) {}

Interpreter::~Interpreter() {
  for (const FramePtr& f : closure_frames_) f->vars.clear();
  for (const Value& ns : namespaces_) ns.ns().attrs.items.clear();
}

Interpreter::DepthGuard::DepthGuard(Interpreter& interp) : in(interp) {
  if (++in.depth_ > in.limits_.max_depth)
    fail("nesting deeper than " + std::to_string(in.limits_.max_depth) + " levels (runaway recursion?)");
}

void Interpreter::step() {
  if (++steps_ > limits_.max_steps)
    fail("template ran past " + std::to_string(limits_.max_steps) + " evaluation steps (endless loop?)");
  if (steps_ % 16 == 0 && std::chrono::steady_clock::now() > deadline_)
    fail("template ran past its " + std::to_string(limits_.max_milliseconds) + " ms (runaway work?)");
}

void Interpreter::check_string(size_t bytes) const {
  if (bytes > limits_.max_string)
    fail("template built a string of over " + std::to_string(limits_.max_string) + " bytes");
}

void Interpreter::check_items(size_t count) const {
  if (count > limits_.max_items) fail("template built a list of over " + std::to_string(limits_.max_items) + " items");
}

void Interpreter::append(std::string& out, std::string_view text) const {
  check_string(out.size() + text.size());
  out += text;
}

std::string Interpreter::render(const Template& tpl, const Dict& variables) {
  auto root = std::make_shared<Frame>();
  for (const auto& [k, v] : variables.items)
    if (k.is_string()) root->vars[k.str()] = v;
  std::string out;
  exec(tpl.body, root, out);
  return out;
}

Interpreter::Flow Interpreter::exec(const Body& body, const FramePtr& frame, std::string& out) {
  DepthGuard guard(*this);
  for (const StmtPtr& s : body) {
    const Flow flow = exec_stmt(*s, frame, out);
    if (flow != Flow::kNormal) return flow;
  }
  return Flow::kNormal;
}

std::string Interpreter::capture(const Body& body, const FramePtr& frame) {
  std::string out;
  exec(body, frame, out);  // break/continue outside a loop body cannot parse, so flow is normal
  return out;
}

Interpreter::Flow Interpreter::exec_stmt(const Stmt& s, const FramePtr& frame, std::string& out) {
  step();
  try {
    switch (s.kind) {
      case StmtKind::kText: append(out, s.text); return Flow::kNormal;
      case StmtKind::kOutput: append(out, py_str(eval(*s.expr, frame))); return Flow::kNormal;
      case StmtKind::kIf:
        for (const auto& [cond, body] : s.branches)
          if (eval(*cond, frame).truthy()) return exec(body, frame, out);
        return exec(s.else_body, frame, out);
      case StmtKind::kFor: return exec_for(s, frame, out);
      case StmtKind::kSet: assign(s, eval(*s.expr, frame), frame); return Flow::kNormal;
      case StmtKind::kSetBlock: {
        Value v = Value::string(capture(s.body, frame));
        for (const ExprPtr& f : s.filters) v = filter(*f, std::move(v), frame);
        frame->vars[s.targets[0]] = v;
        return Flow::kNormal;
      }
      case StmtKind::kMacro: frame->vars[s.name] = make_macro(s, s.name, frame); return Flow::kNormal;
      case StmtKind::kCallBlock: {
        const Expr& call = *s.expr;
        Value callee = eval(*call.children[0], frame);
        CallArgs args = eval_args(call.args, frame);
        args.named.emplace_back("caller", make_macro(s, "caller", frame));
        append(out, py_str(this->call(callee, args)));
        return Flow::kNormal;
      }
      case StmtKind::kFilterBlock: {
        Value v = Value::string(capture(s.body, frame));
        for (const ExprPtr& f : s.filters) v = filter(*f, std::move(v), frame);
        append(out, py_str(v));
        return Flow::kNormal;
      }
      case StmtKind::kBreak: return Flow::kBreak;
      case StmtKind::kContinue: return Flow::kContinue;
      case StmtKind::kScope: return exec(s.body, frame, out);
    }
  } catch (const TemplateError& e) {
    const std::string msg = e.what();
    if (e.raised() || msg.rfind("line ", 0) == 0) throw;
    throw TemplateError("line " + std::to_string(s.line) + ": " + msg);
  }
  return Flow::kNormal;
}

Interpreter::Flow Interpreter::exec_for(const Stmt& s, const FramePtr& frame, std::string& out) {
  ValueList items = iterate(*this, eval(*s.expr, frame));
  if (s.cond) {
    ValueList kept;
    for (Value& item : items) {
      step();
      auto scope = std::make_shared<Frame>();
      scope->parent = frame;
      bind_targets(s.targets, s.tuple_target, item, *scope);
      if (eval(*s.cond, scope).truthy()) kept.push_back(std::move(item));
    }
    items = std::move(kept);
  }
  if (items.empty()) return exec(s.else_body, frame, out);
  const int64_t n = static_cast<int64_t>(items.size());
  for (int64_t i = 0; i < n; ++i) {
    step();
    auto scope = std::make_shared<Frame>();
    scope->parent = frame;
    bind_targets(s.targets, s.tuple_target, items[i], *scope);
    Dict loop;
    loop.items.reserve(14);
    loop.items.emplace_back(Value::string("index"), Value::integer(i + 1));
    loop.items.emplace_back(Value::string("index0"), Value::integer(i));
    loop.items.emplace_back(Value::string("revindex"), Value::integer(n - i));
    loop.items.emplace_back(Value::string("revindex0"), Value::integer(n - i - 1));
    loop.items.emplace_back(Value::string("first"), Value::boolean(i == 0));
    loop.items.emplace_back(Value::string("last"), Value::boolean(i == n - 1));
    loop.items.emplace_back(Value::string("length"), Value::integer(n));
    loop.items.emplace_back(Value::string("depth"), Value::integer(1));
    loop.items.emplace_back(Value::string("depth0"), Value::integer(0));
    loop.items.emplace_back(Value::string("previtem"),
                            i > 0 ? items[i - 1] : Value::undefined("there is no previous item"));
    loop.items.emplace_back(Value::string("nextitem"),
                            i + 1 < n ? items[i + 1] : Value::undefined("there is no next item"));
    loop.items.emplace_back(Value::string("cycle"), Value::function("loop.cycle", [i](Interpreter&, CallArgs& a) {
                              if (a.positional.empty()) fail("no items for cycling given");
                              return a.positional[static_cast<size_t>(i) % a.positional.size()];
                            }));
    scope->vars["loop"] = Value::dict(std::move(loop));
    const Flow flow = exec(s.body, scope, out);
    if (flow == Flow::kBreak) break;
  }
  return Flow::kNormal;
}

void Interpreter::bind_targets(const std::vector<std::string>& targets, bool tuple, const Value& value, Frame& frame) {
  if (!tuple && targets.size() == 1) {
    frame.vars[targets[0]] = value;
    return;
  }
  ValueList parts = iterate(*this, value);
  if (parts.size() != targets.size())
    fail("cannot unpack " + std::to_string(parts.size()) + " values into " + std::to_string(targets.size()) + " names");
  for (size_t i = 0; i < targets.size(); ++i) frame.vars[targets[i]] = parts[i];
}

void Interpreter::assign(const Stmt& s, const Value& value, const FramePtr& frame) {
  if (s.attr_target) {
    const Value target = lookup(s.targets[0], frame);
    if (!target.is_namespace()) fail("cannot assign attribute on non-namespace object '" + s.targets[0] + "'");
    target.ns().attrs.set(Value::string(s.targets[1]), value);
    return;
  }
  bind_targets(s.targets, s.tuple_target, value, *frame);
}

Value Interpreter::lookup(const std::string& name, const FramePtr& frame) const {
  for (const Frame* f = frame.get(); f; f = f->parent.get()) {
    auto it = f->vars.find(name);
    if (it != f->vars.end()) return it->second;
  }
  auto it = globals_.find(name);
  if (it != globals_.end()) return it->second;
  return Value::undefined("'" + name + "' is undefined");
}

Value Interpreter::make_macro(const Stmt& s, const std::string& name, const FramePtr& frame) {
  const Stmt* stmt = &s;
  FramePtr defining = frame;
  closure_frames_.push_back(frame);
  return Value::function(name, [stmt, defining](Interpreter& in, CallArgs& args) {
    return in.call_macro(*stmt, defining, args);
  });
}

Value Interpreter::call_macro(const Stmt& s, const FramePtr& defining, CallArgs& args) {
  auto scope = std::make_shared<Frame>();
  scope->parent = defining;
  size_t next = 0;
  std::vector<bool> used(args.named.size(), false);
  for (const Arg& p : s.params) {
    const Value* v = nullptr;
    if (next < args.positional.size()) {
      v = &args.positional[next++];
    } else {
      for (size_t k = 0; k < args.named.size(); ++k) {
        if (args.named[k].first == p.name) {
          v = &args.named[k].second;
          used[k] = true;
        }
      }
    }
    if (v) {
      scope->vars[p.name] = *v;
    } else if (p.value) {
      scope->vars[p.name] = eval(*p.value, scope);
    } else {
      scope->vars[p.name] = Value::undefined("parameter '" + p.name + "' was not provided");
    }
  }
  ValueList varargs(args.positional.begin() + static_cast<ptrdiff_t>(next), args.positional.end());
  Dict kwargs;
  for (size_t k = 0; k < args.named.size(); ++k) {
    if (used[k]) continue;
    if (args.named[k].first == "caller")
      scope->vars["caller"] = args.named[k].second;
    else
      kwargs.set(Value::string(args.named[k].first), args.named[k].second);
  }
  scope->vars["varargs"] = Value::tuple(std::move(varargs));
  scope->vars["kwargs"] = Value::dict(std::move(kwargs));
  return Value::string(capture(s.body, scope));
}

Value Interpreter::call(const Value& callee, CallArgs& args) {
  step();
  if (callee.is_undefined()) fail(callee.undefined_reason());
  if (!callee.is_function()) fail(std::string("'") + callee.type_name() + "' object is not callable");
  DepthGuard guard(*this);
  return callee.fn().call(*this, args);
}

CallArgs Interpreter::eval_args(const std::vector<Arg>& args, const FramePtr& frame) {
  CallArgs out;
  for (const Arg& a : args) {
    Value v = eval(*a.value, frame);
    if (a.name.empty()) {
      out.positional.push_back(std::move(v));
    } else if (a.name == "*") {
      for (Value& x : iterate(*this, v)) out.positional.push_back(std::move(x));
    } else if (a.name == "**") {
      if (!v.is_dict()) fail("argument after ** must be a mapping");
      for (const auto& [k, x] : v.dict().items) out.named.emplace_back(py_str(k), x);
    } else {
      out.named.emplace_back(a.name, std::move(v));
    }
  }
  return out;
}

Value Interpreter::filter(const Expr& f, Value input, const FramePtr& frame) {
  CallArgs args = eval_args(f.args, frame);
  step();
  return apply_filter(*this, f.name, input, args);
}

Value Interpreter::eval(const Expr& e, const FramePtr& frame) {
  step();
  DepthGuard guard(*this);
  switch (e.kind) {
    case ExprKind::kLiteral: return e.literal;
    case ExprKind::kName: return lookup(e.name, frame);
    case ExprKind::kList:
    case ExprKind::kTuple: {
      ValueList items;
      items.reserve(e.children.size());
      for (const ExprPtr& c : e.children) items.push_back(eval(*c, frame));
      return e.kind == ExprKind::kList ? Value::list(std::move(items)) : Value::tuple(std::move(items));
    }
    case ExprKind::kDict: {
      Dict d;
      for (size_t i = 0; i + 1 < e.children.size(); i += 2) d.set(eval(*e.children[i], frame), eval(*e.children[i + 1], frame));
      return Value::dict(std::move(d));
    }
    case ExprKind::kAttr: return get_attr(eval(*e.children[0], frame), e.name);
    case ExprKind::kItem: return get_item(eval(*e.children[0], frame), eval(*e.children[1], frame));
    case ExprKind::kSlice: {
      Value obj = eval(*e.children[0], frame);
      Value parts[3];
      for (int i = 0; i < 3; ++i) parts[i] = e.children[i + 1] ? eval(*e.children[i + 1], frame) : Value::none();
      return get_slice(obj, parts[0], parts[1], parts[2]);
    }
    case ExprKind::kCall: {
      Value callee = eval(*e.children[0], frame);
      CallArgs args = eval_args(e.args, frame);
      return call(callee, args);
    }
    case ExprKind::kFilter: return filter(e, eval(*e.children[0], frame), frame);
    case ExprKind::kTest: {
      Value v = eval(*e.children[0], frame);
      CallArgs args = eval_args(e.args, frame);
      return Value::boolean(apply_test(*this, e.name, v, args) != e.negated);
    }
    case ExprKind::kUnary: {
      Value v = eval(*e.children[0], frame);
      if (e.name == "not") return Value::boolean(!v.truthy());
      if (v.is_undefined()) fail(v.undefined_reason());
      if (e.name == "-") return negate(v);
      if (!v.is_number()) fail(std::string("bad operand type for unary +: '") + v.type_name() + "'");
      return v.is_bool() ? Value::integer(v.as_int()) : v;
    }
    case ExprKind::kBinary: return eval_binary(e, frame);
    case ExprKind::kCompare: return eval_compare(e, frame);
    case ExprKind::kCond:
      if (eval(*e.children[1], frame).truthy()) return eval(*e.children[0], frame);
      if (e.children[2]) return eval(*e.children[2], frame);
      return Value::undefined("the inline if expression evaluated to false and no else section was defined");
  }
  return Value();
}

Value Interpreter::eval_binary(const Expr& e, const FramePtr& frame) {
  Value a = eval(*e.children[0], frame);
  if (e.name == "and") return a.truthy() ? eval(*e.children[1], frame) : a;
  if (e.name == "or") return a.truthy() ? a : eval(*e.children[1], frame);
  Value b = eval(*e.children[1], frame);
  if (e.name == "~") {
    std::string s = py_str(a);
    const std::string t = py_str(b);
    check_string(s.size() + t.size());
    return Value::string(s + t);
  }
  return binary_op(*this, e.name, a, b);
}

Value Interpreter::eval_compare(const Expr& e, const FramePtr& frame) {
  Value left = eval(*e.children[0], frame);
  for (size_t i = 0; i < e.ops.size(); ++i) {
    Value right = eval(*e.children[i + 1], frame);
    const std::string& op = e.ops[i];
    bool r;
    if (op == "==") {
      r = py_equal(left, right);
    } else if (op == "!=") {
      r = !py_equal(left, right);
    } else if (op == "in" || op == "not in") {
      r = contains(right, left) == (op == "in");
    } else {
      if (left.is_undefined()) fail(left.undefined_reason());
      if (right.is_undefined()) fail(right.undefined_reason());
      if (op == "<") r = py_less(left, right);
      else if (op == ">") r = py_less(right, left);
      else if (op == "<=") r = !py_less(right, left);
      else r = !py_less(left, right);
    }
    if (!r) return Value::boolean(false);
    left = std::move(right);
  }
  return Value::boolean(true);
}

}  // namespace revis::jinja
