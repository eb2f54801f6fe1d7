#include "jinja/parser.h"

#include <algorithm>
#include <initializer_list>

#include "jinja/error.h"
#include "jinja/lexer.h"

namespace revis::jinja {
namespace {

class Parser {
 public:
  Parser(std::vector<Token> tokens, int max_depth) : t_(std::move(tokens)), max_depth_(max_depth) {}

  std::unique_ptr<Template> run() {
    auto tpl = std::make_unique<Template>();
    tpl->body = parse_body({}, nullptr);
    return tpl;
  }

 private:
  std::vector<Token> t_;
  size_t i_ = 0;
  int depth_ = 0;
  int max_depth_;

  struct DepthGuard {
    Parser& p;
    explicit DepthGuard(Parser& parser) : p(parser) {
      if (++p.depth_ > p.max_depth_) p.error("template nested deeper than " + std::to_string(p.max_depth_) + " levels");
    }
    ~DepthGuard() { --p.depth_; }
  };

  const Token& cur() const { return t_[i_]; }
  const Token& peek(size_t k = 1) const { return t_[std::min(i_ + k, t_.size() - 1)]; }
  void advance() {
    if (i_ + 1 < t_.size()) ++i_;
  }
  bool is_op(const char* op) const { return cur().type == Tok::kOp && cur().text == op; }
  bool is_name(const char* name) const { return cur().type == Tok::kName && cur().text == name; }
  bool skip_op(const char* op) {
    if (!is_op(op)) return false;
    advance();
    return true;
  }
  bool skip_name(const char* name) {
    if (!is_name(name)) return false;
    advance();
    return true;
  }

  [[noreturn]] void error(const std::string& what) const {
    throw TemplateError("line " + std::to_string(cur().line) + ": " + what);
  }

  std::string describe(const Token& t) const {
    switch (t.type) {
      case Tok::kEof: return "end of template";
      case Tok::kBlockEnd: return "end of statement block";
      case Tok::kVarEnd: return "end of print statement";
      case Tok::kText: return "template text";
      default: return "'" + t.text + "'";
    }
  }

  void expect_op(const char* op) {
    if (!skip_op(op)) error(std::string("expected '") + op + "', found " + describe(cur()));
  }
  std::string expect_name() {
    if (cur().type != Tok::kName) error("expected a name, found " + describe(cur()));
    std::string n = cur().text;
    advance();
    return n;
  }
  void expect_block_end() {
    if (cur().type != Tok::kBlockEnd) error("expected end of statement block, found " + describe(cur()));
    advance();
  }

  // Records a finished node's height and refuses trees deeper than the
  // limit: chains such as a|f|f|f... or 1+1+1... grow in a loop rather than
  // by recursion, and evaluating or freeing a deep tree recurses.
  ExprPtr finish(ExprPtr e) {
    int h = 0;
    for (const ExprPtr& c : e->children)
      if (c) h = std::max(h, c->height);
    for (const Arg& a : e->args) h = std::max(h, a.value->height);
    e->height = h + 1;
    if (e->height > max_depth_) error("expression nested deeper than " + std::to_string(max_depth_) + " levels");
    return e;
  }

  static ExprPtr node(ExprKind kind, int line) {
    auto e = std::make_unique<Expr>();
    e->kind = kind;
    e->line = line;
    return e;
  }

  // --- statements -------------------------------------------------------

  // Parses until one of `ends` opens a block tag; consumes "{% end_name" and
  // stores the name in *ended (the rest of that tag is the caller's).
  Body parse_body(std::initializer_list<const char*> ends, std::string* ended) {
    DepthGuard guard(*this);
    Body body;
    for (;;) {
      const Token& tok = cur();
      if (tok.type == Tok::kEof) {
        if (ends.size() == 0) return body;
        std::string expected;
        for (const char* e : ends) expected += (expected.empty() ? "" : " or ") + std::string("{% ") + e + " %}";
        error("unexpected end of template: expected " + expected);
      }
      if (tok.type == Tok::kText) {
        auto s = std::make_unique<Stmt>();
        s->kind = StmtKind::kText;
        s->line = tok.line;
        s->text = tok.text;
        body.push_back(std::move(s));
        advance();
      } else if (tok.type == Tok::kVarBegin) {
        auto s = std::make_unique<Stmt>();
        s->kind = StmtKind::kOutput;
        s->line = tok.line;
        advance();
        s->expr = parse_tuple();
        if (cur().type != Tok::kVarEnd) error("expected end of print statement, found " + describe(cur()));
        advance();
        body.push_back(std::move(s));
      } else if (tok.type == Tok::kBlockBegin) {
        advance();
        if (cur().type != Tok::kName) error("expected a statement name, found " + describe(cur()));
        for (const char* e : ends) {
          if (cur().text == e) {
            *ended = e;
            advance();
            return body;
          }
        }
        body.push_back(parse_statement());
      } else {
        error("unexpected " + describe(tok));
      }
    }
  }

  StmtPtr parse_statement() {
    const std::string name = cur().text;
    auto s = std::make_unique<Stmt>();
    s->line = cur().line;
    advance();
    std::string ended;
    if (name == "if") {
      s->kind = StmtKind::kIf;
      ExprPtr cond = parse_expression();
      for (;;) {
        expect_block_end();
        Body body = parse_body({"elif", "else", "endif"}, &ended);
        s->branches.emplace_back(std::move(cond), std::move(body));
        if (ended == "elif") {
          cond = parse_expression();
          continue;
        }
        if (ended == "else") {
          expect_block_end();
          s->else_body = parse_body({"endif"}, &ended);
        }
        break;
      }
    } else if (name == "for") {
      s->kind = StmtKind::kFor;
      parse_targets(*s);
      if (!skip_name("in")) error("expected 'in' in a for loop, found " + describe(cur()));
      s->expr = parse_tuple(/*with_cond=*/false);
      if (skip_name("if")) s->cond = parse_expression();
      if (is_name("recursive")) error("recursive for loops are not supported");
      expect_block_end();
      s->body = parse_body({"else", "endfor"}, &ended);
      if (ended == "else") {
        expect_block_end();
        s->else_body = parse_body({"endfor"}, &ended);
      }
    } else if (name == "set") {
      if (cur().type == Tok::kName && peek().type == Tok::kOp && peek().text == ".") {
        s->kind = StmtKind::kSet;
        s->attr_target = true;
        s->targets.push_back(expect_name());
        advance();
        s->targets.push_back(expect_name());
        expect_op("=");
        s->expr = parse_tuple();
      } else {
        parse_targets(*s);
        if (skip_op("=")) {
          s->kind = StmtKind::kSet;
          s->expr = parse_tuple();
        } else {
          if (s->targets.size() != 1 || s->tuple_target) error("a block set takes one name");
          s->kind = StmtKind::kSetBlock;
          parse_filter_chain(*s);
          expect_block_end();
          s->body = parse_body({"endset"}, &ended);
        }
      }
    } else if (name == "macro") {
      s->kind = StmtKind::kMacro;
      s->name = expect_name();
      parse_params(*s);
      expect_block_end();
      s->body = parse_body({"endmacro"}, &ended);
      if (cur().type == Tok::kName) advance();  // {% endmacro name %}
    } else if (name == "call") {
      s->kind = StmtKind::kCallBlock;
      if (is_op("(")) parse_params(*s);
      s->expr = parse_expression();
      if (s->expr->kind != ExprKind::kCall) error("{% call %} needs a macro call");
      expect_block_end();
      s->body = parse_body({"endcall"}, &ended);
    } else if (name == "filter") {
      s->kind = StmtKind::kFilterBlock;
      s->filters.push_back(parse_filter(nullptr));
      parse_filter_chain(*s);
      expect_block_end();
      s->body = parse_body({"endfilter"}, &ended);
    } else if (name == "break" || name == "continue") {
      s->kind = name == "break" ? StmtKind::kBreak : StmtKind::kContinue;
    } else if (name == "generation") {
      s->kind = StmtKind::kScope;
      expect_block_end();
      s->body = parse_body({"endgeneration"}, &ended);
    } else {
      error("unknown or unsupported statement '" + name + "'");
    }
    expect_block_end();
    return s;
  }

  void parse_targets(Stmt& s) {
    const bool paren = skip_op("(");
    s.targets.push_back(expect_name());
    while (skip_op(",")) {
      s.tuple_target = true;
      if (cur().type != Tok::kName) break;
      s.targets.push_back(expect_name());
    }
    if (paren) {
      s.tuple_target = true;
      expect_op(")");
    }
  }

  void parse_filter_chain(Stmt& s) {
    while (skip_op("|")) s.filters.push_back(parse_filter(nullptr));
  }

  void parse_params(Stmt& s) {
    expect_op("(");
    while (!is_op(")")) {
      if (!s.params.empty()) expect_op(",");
      if (is_op(")")) break;
      Arg a;
      a.name = expect_name();
      if (skip_op("=")) a.value = parse_expression();
      s.params.push_back(std::move(a));
    }
    expect_op(")");
  }

  // --- expressions ------------------------------------------------------

  ExprPtr parse_tuple(bool with_cond = true) {
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

  ExprPtr parse_expression() {
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

  ExprPtr binary(const char* op, ExprPtr a, ExprPtr b, int line) {
    auto e = node(ExprKind::kBinary, line);
    e->name = op;
    e->children.push_back(std::move(a));
    e->children.push_back(std::move(b));
    return finish(std::move(e));
  }

  ExprPtr parse_or() {
    ExprPtr e = parse_and();
    while (is_name("or")) {
      const int line = cur().line;
      advance();
      e = binary("or", std::move(e), parse_and(), line);
    }
    return e;
  }

  ExprPtr parse_and() {
    ExprPtr e = parse_not();
    while (is_name("and")) {
      const int line = cur().line;
      advance();
      e = binary("and", std::move(e), parse_not(), line);
    }
    return e;
  }

  ExprPtr parse_not() {
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

  ExprPtr parse_compare() {
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

  ExprPtr parse_math1() {
    ExprPtr e = parse_concat();
    while (is_op("+") || is_op("-")) {
      const std::string op = cur().text;
      const int line = cur().line;
      advance();
      e = binary(op == "+" ? "+" : "-", std::move(e), parse_concat(), line);
    }
    return e;
  }

  ExprPtr parse_concat() {
    ExprPtr e = parse_math2();
    while (is_op("~")) {
      const int line = cur().line;
      advance();
      e = binary("~", std::move(e), parse_math2(), line);
    }
    return e;
  }

  ExprPtr parse_math2() {
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

  ExprPtr parse_pow() {
    ExprPtr e = parse_unary(true);
    while (is_op("**")) {
      const int line = cur().line;
      advance();
      e = binary("**", std::move(e), parse_unary(true), line);
    }
    return e;
  }

  ExprPtr parse_unary(bool with_filter) {
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

  ExprPtr parse_primary() {
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

  ExprPtr parse_postfix(ExprPtr e) {
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

  ExprPtr parse_subscript(ExprPtr obj, int line) {
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

  void parse_args(std::vector<Arg>& args) {
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

  ExprPtr parse_call(ExprPtr callee) {
    DepthGuard guard(*this);
    auto e = node(ExprKind::kCall, cur().line);
    e->children.push_back(std::move(callee));
    parse_args(e->args);
    return finish(std::move(e));
  }

  ExprPtr parse_filter(ExprPtr input) {
    auto e = node(ExprKind::kFilter, cur().line);
    e->name = expect_name();
    while (is_op(".")) {
      advance();
      e->name += "." + expect_name();
    }
    e->children.push_back(std::move(input));
    if (is_op("(")) parse_args(e->args);
    return finish(std::move(e));
  }

  ExprPtr parse_filter_expr(ExprPtr e) {
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

  ExprPtr parse_test(ExprPtr input) {
    auto e = node(ExprKind::kTest, cur().line);
    advance();  // "is"
    e->negated = skip_name("not");
    e->name = expect_name();
    while (is_op(".")) {
      advance();
      e->name += "." + expect_name();
    }
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
};

}  // namespace

std::unique_ptr<Template> parse(std::string_view source, int max_depth) {
  return Parser(tokenize(source), max_depth).run();
}

}  // namespace revis::jinja
