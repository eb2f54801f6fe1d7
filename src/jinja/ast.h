// The syntax tree of a parsed template: expressions (Expr) and statements
// (Stmt), one generic node type each with the fields every kind uses. A
// Template owns its tree; it is immutable after parsing and may be rendered
// from several threads at once.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "jinja/value.h"

namespace revis::jinja {

struct Expr;
struct Stmt;
using ExprPtr = std::unique_ptr<Expr>;
using StmtPtr = std::unique_ptr<Stmt>;
using Body = std::vector<StmtPtr>;

enum class ExprKind {
  kLiteral,   // literal
  kName,      // name
  kList,      // children
  kTuple,     // children
  kDict,      // children: key, value, key, value...
  kAttr,      // children[0].name
  kItem,      // children[0][children[1]]
  kSlice,     // children[0][children[1]:children[2]:children[3]] (null parts absent)
  kCall,      // children[0](args)
  kFilter,    // children[0] | name(args); children[0] null in a filter block's chain
  kTest,      // children[0] is [not] name(args)
  kUnary,     // name ("-", "+", "not") children[0]
  kBinary,    // children[0] name children[1]: + - * / // % ** and or ~ in
  kCompare,   // children[0] ops[0] children[1] ops[1] children[2]... (Python's chained comparison)
  kCond,      // children[0] if children[1] else children[2] (children[2] may be null)
};

// An argument in a call: positional (name empty), keyword, *args ("*") or **kwargs ("**").
// Also a macro parameter: name and default value (value may be null).
struct Arg {
  std::string name;
  ExprPtr value;
};

struct Expr {
  ExprKind kind;
  int line = 0;
  Value literal;
  std::string name;
  std::vector<ExprPtr> children;
  std::vector<Arg> args;
  std::vector<std::string> ops;
  bool negated = false;  // kTest: "is not"
  int height = 1;        // levels of the tree below and including this node
};

enum class StmtKind {
  kText,         // text
  kOutput,       // {{ expr }}
  kIf,           // branches (cond, body)...; else_body
  kFor,          // for targets in expr [if cond] body else else_body
  kSet,          // set targets = expr   (attr_target: targets = {namespace, attribute})
  kSetBlock,     // set targets[0] | filters... body endset
  kMacro,        // macro name(params) body
  kCallBlock,    // call(params) expr body
  kFilterBlock,  // filter filters... body
  kBreak,
  kContinue,
  kScope,        // body run in place ({% generation %})
};

struct Stmt {
  StmtKind kind;
  int line = 0;
  std::string text;
  std::string name;
  ExprPtr expr;
  ExprPtr cond;
  std::vector<std::string> targets;
  bool tuple_target = false;  // "for a, b in" / "set a, b =": unpack even one name
  bool attr_target = false;
  std::vector<std::pair<ExprPtr, Body>> branches;
  Body body, else_body;
  std::vector<ExprPtr> filters;  // kFilter nodes with no input
  std::vector<Arg> params;
};

struct Template {
  Body body;
};

}  // namespace revis::jinja
