#include "jinja/parser.h"

#include <algorithm>
#include <initializer_list>

#include "jinja/expression_parser.h"
#include "jinja/lexer.h"

namespace revis::jinja {
namespace {

class Parser : public ExpressionParser {
 public:
  using ExpressionParser::ExpressionParser;

  std::unique_ptr<Template> run() {
    auto tpl = std::make_unique<Template>();
    tpl->body = parse_body({}, nullptr);
    return tpl;
  }

 private:
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
};

}  // namespace

std::unique_ptr<Template> parse(std::string_view source, int max_depth) {
  return Parser(tokenize(source), max_depth).run();
}

}  // namespace revis::jinja
