#include "jinja/expression_parser.h"

namespace revis::jinja {

ExprPtr ExpressionParser::parse_tuple(bool with_cond) {
  const int line = cur().line;
  ExprPtr first = with_cond ? parse_expression() : parse_or();
  if (!is_op(",")) return first;
  auto t = node(ExprKind::kTuple, line);
  t->children.push_back(std::move(first));
  while (skip_op(",")) {
    if (cur().type == Tok::kVarEnd || cur().type == Tok::kBlockEnd || is_op(")") || is_name("if")) break;
    t->children.push_back(with_cond ? parse_expression() : parse_or());
  }
  return finish(std::move(t));
}

ExprPtr ExpressionParser::parse_expression() {
  DepthGuard guard(*this);
  ExprPtr e = parse_or();
  while (is_name("if")) {
    const int line = cur().line;
    advance();
    auto c = node(ExprKind::kCond, line);
    ExprPtr cond = parse_or();
    ExprPtr other = skip_name("else") ? parse_expression() : nullptr;
    c->children.push_back(std::move(e));
    c->children.push_back(std::move(cond));
    c->children.push_back(std::move(other));
    e = finish(std::move(c));
  }
  return e;
}

ExprPtr ExpressionParser::binary(const char* op, ExprPtr a, ExprPtr b, int line) {
  auto e = node(ExprKind::kBinary, line);
  e->name = op;
  e->children.push_back(std::move(a));
  e->children.push_back(std::move(b));
  return finish(std::move(e));
}

ExprPtr ExpressionParser::parse_or() {
  ExprPtr e = parse_and();
  while (is_name("or")) {
    const int line = cur().line;
    advance();
    e = binary("or", std::move(e), parse_and(), line);
  }
  return e;
}

ExprPtr ExpressionParser::parse_and() {
  ExprPtr e = parse_not();
  while (is_name("and")) {
    const int line = cur().line;
    advance();
    e = binary("and", std::move(e), parse_not(), line);
  }
  return e;
}

ExprPtr ExpressionParser::parse_not() {
  if (is_name("not")) {
    DepthGuard guard(*this);
    auto e = node(ExprKind::kUnary, cur().line);
    advance();
    e->name = "not";
    e->children.push_back(parse_not());
    return finish(std::move(e));
  }
  return parse_compare();
}

ExprPtr ExpressionParser::parse_compare() {
  const int line = cur().line;
  ExprPtr first = parse_math1();
  ExprPtr cmp;
  for (;;) {
    std::string op;
    if (cur().type == Tok::kOp && (cur().text == "==" || cur().text == "!=" || cur().text == "<" ||
                                   cur().text == "<=" || cur().text == ">" || cur().text == ">=")) {
      op = cur().text;
      advance();
    } else if (is_name("in")) {
      op = "in";
      advance();
    } else if (is_name("not") && peek().type == Tok::kName && peek().text == "in") {
      op = "not in";
      advance();
      advance();
    } else {
      break;
    }
    if (!cmp) {
      cmp = node(ExprKind::kCompare, line);
      cmp->children.push_back(std::move(first));
    }
    cmp->ops.push_back(op);
    cmp->children.push_back(parse_math1());
  }
  return cmp ? finish(std::move(cmp)) : std::move(first);
}

ExprPtr ExpressionParser::parse_math1() {
  ExprPtr e = parse_concat();
  while (is_op("+") || is_op("-")) {
    const std::string op = cur().text;
    const int line = cur().line;
    advance();
    e = binary(op == "+" ? "+" : "-", std::move(e), parse_concat(), line);
  }
  return e;
}

ExprPtr ExpressionParser::parse_concat() {
  ExprPtr e = parse_math2();
  while (is_op("~")) {
    const int line = cur().line;
    advance();
    e = binary("~", std::move(e), parse_math2(), line);
  }
  return e;
}

ExprPtr ExpressionParser::parse_math2() {
  ExprPtr e = parse_pow();
  while (is_op("*") || is_op("/") || is_op("//") || is_op("%")) {
    static const char* const kOps[] = {"*", "/", "//", "%"};
    const char* op = nullptr;
    for (const char* o : kOps)
      if (cur().text == o) op = o;
    const int line = cur().line;
    advance();
    e = binary(op, std::move(e), parse_pow(), line);
  }
  return e;
}

ExprPtr ExpressionParser::parse_pow() {
  ExprPtr e = parse_unary(true);
  while (is_op("**")) {
    const int line = cur().line;
    advance();
    e = binary("**", std::move(e), parse_unary(true), line);
  }
  return e;
}

ExprPtr ExpressionParser::parse_unary(bool with_filter) {
  DepthGuard guard(*this);
  ExprPtr e;
  if (is_op("-") || is_op("+")) {
    e = node(ExprKind::kUnary, cur().line);
    e->name = cur().text;
    advance();
    e->children.push_back(parse_unary(false));
    e = finish(std::move(e));
  } else {
    e = parse_primary();
  }
  e = parse_postfix(std::move(e));
  if (with_filter) e = parse_filter_expr(std::move(e));
  return e;
}

ExprPtr ExpressionParser::parse_primary() {
  const Token& tok = cur();
  const int line = tok.line;
  if (tok.type == Tok::kName) {
    auto e = node(ExprKind::kLiteral, line);
    const std::string& n = tok.text;
    if (n == "true" || n == "True") {
      e->literal = Value::boolean(true);
    } else if (n == "false" || n == "False") {
      e->literal = Value::boolean(false);
    } else if (n == "none" || n == "None") {
      e->literal = Value::none();
    } else {
      e->kind = ExprKind::kName;
      e->name = n;
    }
    advance();
    return e;
  }
  if (tok.type == Tok::kString) {
    std::string s;
    while (cur().type == Tok::kString) {
      s += cur().text;
      advance();
    }
    auto e = node(ExprKind::kLiteral, line);
    e->literal = Value::string(std::move(s));
    return e;
  }
  if (tok.type == Tok::kInt || tok.type == Tok::kFloat) {
    auto e = node(ExprKind::kLiteral, line);
    e->literal = tok.type == Tok::kInt ? Value::integer(tok.int_value) : Value::number(tok.float_value);
    advance();
    return e;
  }
  if (skip_op("(")) {
    if (skip_op(")")) return node(ExprKind::kTuple, line);
    ExprPtr e = parse_expression();
    if (is_op(",")) {
      auto t = node(ExprKind::kTuple, line);
      t->children.push_back(std::move(e));
      while (skip_op(",") && !is_op(")")) t->children.push_back(parse_expression());
      e = finish(std::move(t));
    }
    expect_op(")");
    return e;
  }
  if (skip_op("[")) {
    auto e = node(ExprKind::kList, line);
    while (!is_op("]")) {
      if (!e->children.empty()) expect_op(",");
      if (is_op("]")) break;
      e->children.push_back(parse_expression());
    }
    expect_op("]");
    return finish(std::move(e));
  }
  if (skip_op("{")) {
    auto e = node(ExprKind::kDict, line);
    while (!is_op("}")) {
      if (!e->children.empty()) expect_op(",");
      if (is_op("}")) break;
      e->children.push_back(parse_expression());
      expect_op(":");
      e->children.push_back(parse_expression());
    }
    expect_op("}");
    return finish(std::move(e));
  }
  error("unexpected " + describe(tok));
}

ExprPtr ExpressionParser::parse_postfix(ExprPtr e) {
  for (;;) {
    const int line = cur().line;
    if (skip_op(".")) {
      if (cur().type == Tok::kInt) {
        auto item = node(ExprKind::kItem, line);
        auto key = node(ExprKind::kLiteral, line);
        key->literal = Value::integer(cur().int_value);
        advance();
        item->children.push_back(std::move(e));
        item->children.push_back(std::move(key));
        e = finish(std::move(item));
      } else {
        auto attr = node(ExprKind::kAttr, line);
        attr->name = expect_name();
        attr->children.push_back(std::move(e));
        e = finish(std::move(attr));
      }
    } else if (skip_op("[")) {
      e = parse_subscript(std::move(e), line);
    } else if (is_op("(")) {
      e = parse_call(std::move(e));
    } else {
      return e;
    }
  }
}

ExprPtr ExpressionParser::parse_subscript(ExprPtr obj, int line) {
  DepthGuard guard(*this);
  ExprPtr parts[3];
  int part = 0;
  bool slice = false;
  for (;;) {
    if (is_op("]")) break;
    if (skip_op(":")) {
      slice = true;
      if (++part > 2) error("a slice takes at most three parts");
      continue;
    }
    if (parts[part]) error("expected ':' or ']' in a subscript, found " + describe(cur()));
    parts[part] = parse_expression();
  }
  expect_op("]");
  auto e = node(slice ? ExprKind::kSlice : ExprKind::kItem, line);
  e->children.push_back(std::move(obj));
  if (!slice) {
    if (!parts[0]) error("empty subscript");
    e->children.push_back(std::move(parts[0]));
    return finish(std::move(e));
  }
  for (auto& p : parts) e->children.push_back(std::move(p));
  return finish(std::move(e));
}

void ExpressionParser::parse_args(std::vector<Arg>& args) {
  expect_op("(");
  while (!is_op(")")) {
    if (!args.empty()) expect_op(",");
    if (is_op(")")) break;
    Arg a;
    if (skip_op("**")) {
      a.name = "**";
    } else if (skip_op("*")) {
      a.name = "*";
    } else if (cur().type == Tok::kName && peek().type == Tok::kOp && peek().text == "=") {
      a.name = cur().text;
      advance();
      advance();
    }
    a.value = parse_expression();
    args.push_back(std::move(a));
  }
  expect_op(")");
}

ExprPtr ExpressionParser::parse_call(ExprPtr callee) {
  DepthGuard guard(*this);
  auto e = node(ExprKind::kCall, cur().line);
  e->children.push_back(std::move(callee));
  parse_args(e->args);
  return finish(std::move(e));
}

// A filter's or a test's name, which may have dots ("a.b").
std::string ExpressionParser::expect_dotted_name() {
  std::string name = expect_name();
  while (skip_op(".")) {
    name += '.';
    name += expect_name();
  }
  return name;
}

ExprPtr ExpressionParser::parse_filter(ExprPtr input) {
  auto e = node(ExprKind::kFilter, cur().line);
  e->name = expect_dotted_name();
  e->children.push_back(std::move(input));
  if (is_op("(")) parse_args(e->args);
  return finish(std::move(e));
}

ExprPtr ExpressionParser::parse_filter_expr(ExprPtr e) {
  for (;;) {
    if (skip_op("|")) {
      e = parse_filter(std::move(e));
    } else if (is_name("is")) {
      e = parse_test(std::move(e));
    } else if (is_op("(")) {
      e = parse_call(std::move(e));
    } else {
      return e;
    }
  }
}

ExprPtr ExpressionParser::parse_test(ExprPtr input) {
  auto e = node(ExprKind::kTest, cur().line);
  advance();  // "is"
  e->negated = skip_name("not");
  e->name = expect_dotted_name();
  e->children.push_back(std::move(input));
  const Token& t = cur();
  if (is_op("(")) {
    parse_args(e->args);
  } else if ((t.type == Tok::kName || t.type == Tok::kString || t.type == Tok::kInt || t.type == Tok::kFloat ||
              is_op("[") || is_op("{")) &&
             !is_name("else") && !is_name("or") && !is_name("and")) {
    if (is_name("is")) error("you cannot chain multiple tests with is");
    Arg a;
    a.value = parse_postfix(parse_primary());
    e->args.push_back(std::move(a));
  }
  return finish(std::move(e));
}

}  // namespace revis::jinja
