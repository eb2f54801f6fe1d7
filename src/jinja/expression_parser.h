// The expressions of the Jinja parser (parser.h): jinja2's operator
// precedence (filters and tests bind tighter than arithmetic, `**` is
// left-associative, `a if c else b`, chained comparisons) over the lexer's
// tokens, and the cursor over those tokens that the statements (parser.cpp,
// a class derived from this one) read through too. Nesting deeper than
// max_depth is refused rather than recursed into; errors throw
// TemplateError ("line N: ...").
//
// Thread-safety: one parse, one thread.
#pragma once

#include <algorithm>
#include <string>
#include <vector>

#include "jinja/ast.h"
#include "jinja/error.h"
#include "jinja/lexer.h"

namespace revis::jinja {

class ExpressionParser {
 public:
  ExpressionParser(std::vector<Token> tokens, int max_depth) : t_(std::move(tokens)), max_depth_(max_depth) {}

 protected:
  std::vector<Token> t_;
  size_t i_ = 0;
  int depth_ = 0;
  int max_depth_;

  struct DepthGuard {
    ExpressionParser& p;
    explicit DepthGuard(ExpressionParser& parser) : p(parser) {
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

  // Expressions separated by commas (a tuple), or one; with_cond: each may be `a if c else b`.
  ExprPtr parse_tuple(bool with_cond = true);
  ExprPtr parse_expression();
  // After a `|`: the filter applied to `input` (null in a filter block's chain).
  ExprPtr parse_filter(ExprPtr input);

 private:
  ExprPtr binary(const char* op, ExprPtr a, ExprPtr b, int line);
  ExprPtr parse_or();
  ExprPtr parse_and();
  ExprPtr parse_not();
  ExprPtr parse_compare();
  ExprPtr parse_math1();
  ExprPtr parse_concat();
  ExprPtr parse_math2();
  ExprPtr parse_pow();
  ExprPtr parse_unary(bool with_filter);
  ExprPtr parse_primary();
  ExprPtr parse_postfix(ExprPtr e);
  ExprPtr parse_subscript(ExprPtr obj, int line);
  void parse_args(std::vector<Arg>& args);
  ExprPtr parse_call(ExprPtr callee);
  ExprPtr parse_filter_expr(ExprPtr e);
  std::string expect_dotted_name();
  ExprPtr parse_test(ExprPtr input);
};

}  // namespace revis::jinja
