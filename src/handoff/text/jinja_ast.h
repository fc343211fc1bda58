#pragma once
// Syntax tree of a parsed Jinja template: expressions and statements as tagged nodes.
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "handoff/text/jinja_value.h"

namespace handoff::text::jinja {

struct Expr;
using ExprPtr = std::unique_ptr<Expr>;

struct Expr {
  enum class Kind {
    kLiteral,  // value
    kName,     // name
    kList,     // items
    kTuple,    // items
    kDict,     // keys[i] -> items[i]
    kAttr,     // a.name
    kIndex,    // a[b]
    kSlice,    // a[b:c:d] (null parts omitted)
    kCall,     // a(items, kwargs)
    kFilter,   // a | name(items, kwargs)
    kTest,     // a is [not: negate] name(items)
    kUnary,    // op a
    kBinary,   // a op b
    kTernary,  // b if a else c
  };
  Kind kind;
  Value value;
  std::string name;  // identifier, attribute, filter/test name or operator
  ExprPtr a, b, c, d;
  std::vector<ExprPtr> items;
  std::vector<ExprPtr> keys;
  std::vector<std::pair<std::string, ExprPtr>> kwargs;
  bool negate = false;
  size_t line = 0;
  int depth = 1;  // of this subtree; the parser bounds it by kMaxNesting
};

struct Stmt;
using StmtPtr = std::unique_ptr<Stmt>;
using Body = std::vector<StmtPtr>;

struct Stmt {
  enum class Kind {
    kText,    // text
    kOutput,  // {{ expr }}
    kIf,      // expr, body, else_body (elif chains nest in else_body)
    kFor,     // targets in expr [if cond], body, else_body
    kSet,     // target (name or attribute expr) = expr, or block body
    kMacro,   // name(params with defaults), body
    kBreak,
    kContinue,
  };
  Kind kind;
  std::string text;
  ExprPtr expr, cond, target;
  std::vector<std::string> names;  // for-loop targets / macro params
  std::vector<ExprPtr> defaults;   // macro param defaults (may be null)
  Body body, else_body;
  size_t line = 0;
};

}  // namespace handoff::text::jinja
