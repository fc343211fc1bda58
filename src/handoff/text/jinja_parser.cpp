#include "handoff/text/jinja_parser.h"

#include <algorithm>
#include <initializer_list>
#include <stdexcept>

#include "handoff/error.h"
#include "handoff/text/jinja_limits.h"

namespace handoff::text::jinja {
namespace {

class Parser {
 public:
  explicit Parser(const std::vector<Token>& tokens) : t_(tokens) {}

  Body parse_template() {
    Body body = parse_body({});
    if (peek().type != TokenType::kEnd) error("unexpected '{}'", peek().text);
    return body;
  }

 private:
  const Token& peek(size_t ahead = 0) const { return t_[std::min(pos_ + ahead, t_.size() - 1)]; }
  const Token& next() { return t_[std::min(pos_++, t_.size() - 1)]; }
  bool is_op(const char* op, size_t ahead = 0) const {
    return peek(ahead).type == TokenType::kOperator && peek(ahead).text == op;
  }
  bool is_name(const char* name, size_t ahead = 0) const {
    return peek(ahead).type == TokenType::kName && peek(ahead).text == name;
  }
  bool accept_op(const char* op) {
    if (!is_op(op)) return false;
    ++pos_;
    return true;
  }
  bool accept_name(const char* name) {
    if (!is_name(name)) return false;
    ++pos_;
    return true;
  }
  template <typename... Args>
  [[noreturn]] void error(fmt::format_string<Args...> f, Args&&... args) const {
    fail_input("template line {}: {}", peek().line, fmt::format(f, std::forward<Args>(args)...));
  }
  void expect_op(const char* op) {
    if (!accept_op(op)) error("expected '{}' but found '{}'", op, peek().text);
  }
  void expect(TokenType type, const char* what) {
    if (peek().type != type) error("expected {} but found '{}'", what, peek().text);
    ++pos_;
  }
  std::string expect_name() {
    if (peek().type != TokenType::kName) error("expected a name but found '{}'", peek().text);
    return next().text;
  }

  // Counts recursion of the parser itself (parentheses, `not not ...`, nested blocks): deep
  // input ends with an error instead of overflowing the stack.
  class Deeper {
   public:
    explicit Deeper(Parser& p) : p_(p) {
      if (++p_.depth_ > kMaxNesting) p_.error("template nesting deeper than {}", kMaxNesting);
    }
    ~Deeper() { --p_.depth_; }
    Deeper(const Deeper&) = delete;
    Deeper& operator=(const Deeper&) = delete;

   private:
    Parser& p_;
  };

  // Sets a finished node's depth from its children: loops such as `a + b + c ...` or
  // `x.a.b.c ...` build deep trees without recursing, and evaluating or freeing one recurses.
  ExprPtr done(ExprPtr e) {
    int below = 0;
    const auto child = [&](const ExprPtr& c) {
      if (c) below = std::max(below, c->depth);
    };
    for (const ExprPtr* c : {&e->a, &e->b, &e->c, &e->d}) child(*c);
    for (const auto& c : e->items) child(c);
    for (const auto& c : e->keys) child(c);
    for (const auto& [k, c] : e->kwargs) child(c);
    e->depth = below + 1;
    if (e->depth > kMaxNesting) error("expression nesting deeper than {}", kMaxNesting);
    return e;
  }

  // Parses statements until a {% tag %} whose keyword is in `stops` (left unconsumed).
  Body parse_body(std::initializer_list<const char*> stops) {
    Body body;
    while (peek().type != TokenType::kEnd) {
      const Token& tok = peek();
      if (tok.type == TokenType::kText) {
        auto s = std::make_unique<Stmt>();
        s->kind = Stmt::Kind::kText;
        s->text = tok.text;
        ++pos_;
        body.push_back(std::move(s));
      } else if (tok.type == TokenType::kOpenExpr) {
        ++pos_;
        auto s = std::make_unique<Stmt>();
        s->kind = Stmt::Kind::kOutput;
        s->line = tok.line;
        s->expr = parse_expression();
        expect(TokenType::kCloseExpr, "'}}'");
        body.push_back(std::move(s));
      } else if (tok.type == TokenType::kOpenStmt) {
        for (const char* stop : stops)
          if (is_name(stop, 1)) return body;
        ++pos_;
        body.push_back(parse_statement());
      } else {
        error("unexpected '{}'", tok.text);
      }
    }
    if (stops.size() > 0) error("missing {{% {} %}}", *stops.begin());
    return body;
  }

  void end_tag() { expect(TokenType::kCloseStmt, "'%}'"); }
  void keyword(const char* name) {
    expect(TokenType::kOpenStmt, "'{%'");
    if (!accept_name(name)) error("expected '{}'", name);
  }

  StmtPtr parse_statement() {
    const Deeper guard(*this);
    const size_t line = peek().line;
    const std::string word = expect_name();
    auto s = std::make_unique<Stmt>();
    s->line = line;
    if (word == "if") {
      parse_if_rest(*s);
    } else if (word == "for") {
      s->kind = Stmt::Kind::kFor;
      do s->names.push_back(expect_name());
      while (accept_op(","));
      if (!accept_name("in")) error("expected 'in'");
      s->expr = parse_ternary_no_cond();
      if (accept_name("if")) s->cond = parse_or();
      end_tag();
      s->body = parse_body({"else", "endfor"});
      if (is_name("else", 1)) {
        keyword("else");
        end_tag();
        s->else_body = parse_body({"endfor"});
      }
      keyword("endfor");
      end_tag();
    } else if (word == "set") {
      s->kind = Stmt::Kind::kSet;
      s->target = parse_primary();
      while (accept_op(".")) {
        auto attr = std::make_unique<Expr>();
        attr->kind = Expr::Kind::kAttr;
        attr->name = expect_name();
        attr->a = std::move(s->target);
        s->target = done(std::move(attr));
      }
      if (is_op(",")) {  // tuple unpacking: set a, b = ...
        auto tuple = std::make_unique<Expr>();
        tuple->kind = Expr::Kind::kTuple;
        tuple->items.push_back(std::move(s->target));
        while (accept_op(",")) tuple->items.push_back(parse_primary());
        s->target = done(std::move(tuple));
      }
      if (accept_op("=")) {
        s->expr = parse_expression();
        end_tag();
      } else {
        end_tag();
        s->body = parse_body({"endset"});
        keyword("endset");
        end_tag();
      }
    } else if (word == "macro") {
      s->kind = Stmt::Kind::kMacro;
      s->text = expect_name();
      expect_op("(");
      while (!accept_op(")")) {
        s->names.push_back(expect_name());
        s->defaults.push_back(accept_op("=") ? parse_expression() : nullptr);
        if (!is_op(")")) expect_op(",");
      }
      end_tag();
      s->body = parse_body({"endmacro"});
      keyword("endmacro");
      end_tag();
    } else if (word == "break" || word == "continue") {
      s->kind = word == "break" ? Stmt::Kind::kBreak : Stmt::Kind::kContinue;
      end_tag();
    } else if (word == "generation" || word == "endgeneration") {
      // HF marks assistant spans for training masks; rendering ignores the markers.
      s->kind = Stmt::Kind::kText;
      end_tag();
    } else {
      error("unknown statement '{}'", word);
    }
    return s;
  }

  void parse_if_rest(Stmt& s) {
    const Deeper guard(*this);
    s.kind = Stmt::Kind::kIf;
    s.expr = parse_expression();
    end_tag();
    s.body = parse_body({"elif", "else", "endif"});
    if (is_name("elif", 1)) {
      keyword("elif");
      auto nested = std::make_unique<Stmt>();
      nested->line = peek().line;
      parse_if_rest(*nested);  // consumes the shared endif
      s.else_body.push_back(std::move(nested));
      return;
    }
    if (is_name("else", 1)) {
      keyword("else");
      end_tag();
      s.else_body = parse_body({"endif"});
    }
    keyword("endif");
    end_tag();
  }

  ExprPtr make(Expr::Kind kind) {
    auto e = std::make_unique<Expr>();
    e->kind = kind;
    e->line = peek().line;
    return e;
  }

  // expression := ternary, or a bare tuple "a, b" where a tuple is allowed.
  ExprPtr parse_expression() { return parse_ternary(); }

  ExprPtr parse_ternary() {
    const Deeper guard(*this);
    ExprPtr value = parse_or();
    if (!is_name("if")) return value;
    ++pos_;
    auto e = make(Expr::Kind::kTernary);
    e->a = parse_or();
    e->b = std::move(value);
    if (accept_name("else")) e->c = parse_ternary();
    return done(std::move(e));
  }

  // In `for x in seq if cond`, the `if` belongs to the loop, not to a ternary.
  ExprPtr parse_ternary_no_cond() { return parse_or(); }

  ExprPtr binary(const std::string& op, ExprPtr a, ExprPtr b) {
    auto e = make(Expr::Kind::kBinary);
    e->name = op;
    e->a = std::move(a);
    e->b = std::move(b);
    return done(std::move(e));
  }

  ExprPtr parse_or() {
    ExprPtr left = parse_and();
    while (accept_name("or")) left = binary("or", std::move(left), parse_and());
    return left;
  }
  ExprPtr parse_and() {
    ExprPtr left = parse_not();
    while (accept_name("and")) left = binary("and", std::move(left), parse_not());
    return left;
  }
  ExprPtr parse_not() {
    if (accept_name("not")) {
      const Deeper guard(*this);
      auto e = make(Expr::Kind::kUnary);
      e->name = "not";
      e->a = parse_not();
      return done(std::move(e));
    }
    return parse_compare();
  }
  ExprPtr parse_compare() {
    ExprPtr left = parse_concat();
    while (true) {
      std::string op;
      if (peek().type == TokenType::kOperator &&
          (peek().text == "==" || peek().text == "!=" || peek().text == "<" || peek().text == ">" ||
           peek().text == "<=" || peek().text == ">=")) {
        op = next().text;
      } else if (is_name("in")) {
        ++pos_;
        op = "in";
      } else if (is_name("not") && is_name("in", 1)) {
        pos_ += 2;
        op = "not in";
      } else {
        return left;
      }
      left = binary(op, std::move(left), parse_concat());
    }
  }
  ExprPtr parse_concat() {
    ExprPtr left = parse_additive();
    while (accept_op("~")) left = binary("~", std::move(left), parse_additive());
    return left;
  }
  ExprPtr parse_additive() {
    ExprPtr left = parse_multiplicative();
    while (is_op("+") || is_op("-")) {
      const std::string op = next().text;
      left = binary(op, std::move(left), parse_multiplicative());
    }
    return left;
  }
  ExprPtr parse_multiplicative() {
    ExprPtr left = parse_unary();
    while (is_op("*") || is_op("/") || is_op("//") || is_op("%")) {
      const std::string op = next().text;
      left = binary(op, std::move(left), parse_unary());
    }
    return left;
  }
  ExprPtr parse_unary() {
    if (is_op("-") || is_op("+")) {
      const Deeper guard(*this);
      auto e = make(Expr::Kind::kUnary);
      e->name = next().text;
      e->a = parse_unary();
      return done(std::move(e));
    }
    return parse_filters(parse_postfix(parse_primary()));
  }

  // `x | f(...)` and `x is [not] test(...)` bind tighter than arithmetic, as in Jinja.
  ExprPtr parse_filters(ExprPtr value) {
    while (true) {
      if (accept_op("|")) {
        auto e = make(Expr::Kind::kFilter);
        e->name = expect_name();
        e->a = std::move(value);
        if (accept_op("(")) parse_call_args(*e);
        value = parse_postfix(done(std::move(e)));
      } else if (accept_name("is")) {
        auto e = make(Expr::Kind::kTest);
        e->negate = accept_name("not");
        e->name = expect_name();
        e->a = std::move(value);
        if (accept_op("(")) {
          parse_call_args(*e);
        } else if (peek().type == TokenType::kString || peek().type == TokenType::kInt ||
                   peek().type == TokenType::kFloat || is_name("none")) {
          e->items.push_back(parse_primary());  // `x is equalto 3`
        }
        value = done(std::move(e));
      } else {
        return value;
      }
    }
  }

  void parse_call_args(Expr& call) {
    while (!accept_op(")")) {
      if (peek().type == TokenType::kName && is_op("=", 1)) {
        std::string key = next().text;
        ++pos_;
        call.kwargs.emplace_back(std::move(key), parse_expression());
      } else {
        call.items.push_back(parse_expression());
      }
      if (!is_op(")")) expect_op(",");
    }
  }

  ExprPtr parse_postfix(ExprPtr value) {
    while (true) {
      if (accept_op(".")) {
        auto e = make(Expr::Kind::kAttr);
        e->name = expect_name();
        e->a = std::move(value);
        value = done(std::move(e));
      } else if (accept_op("[")) {
        ExprPtr parts[3];
        int colons = 0;
        while (!accept_op("]")) {
          if (accept_op(":")) {
            if (++colons > 2) error("too many ':' in slice");
          } else {
            parts[colons] = parse_expression();
          }
        }
        auto e = make(colons ? Expr::Kind::kSlice : Expr::Kind::kIndex);
        e->a = std::move(value);
        e->b = std::move(parts[0]);
        e->c = std::move(parts[1]);
        e->d = std::move(parts[2]);
        if (!colons && !e->b) error("empty subscript");
        value = done(std::move(e));
      } else if (accept_op("(")) {
        auto e = make(Expr::Kind::kCall);
        e->a = std::move(value);
        parse_call_args(*e);
        value = done(std::move(e));
      } else {
        return value;
      }
    }
  }

  ExprPtr parse_primary() {
    const Token& tok = peek();
    auto literal = [&](Value v) {
      auto e = make(Expr::Kind::kLiteral);
      e->value = std::move(v);
      ++pos_;
      return e;
    };
    switch (tok.type) {
      case TokenType::kString: {
        std::string s = tok.text;
        ++pos_;
        while (peek().type == TokenType::kString) s += next().text;  // 'a' 'b' concatenates
        auto e = make(Expr::Kind::kLiteral);
        e->value = Value(std::move(s));
        return e;
      }
      case TokenType::kInt:
      case TokenType::kFloat:
        try {
          if (tok.type == TokenType::kInt)
            return literal(Value(static_cast<int64_t>(std::stoll(tok.text))));
          return literal(Value(std::stod(tok.text)));
        } catch (const std::out_of_range&) {
          error("number {} is out of range", tok.text);
        }
      case TokenType::kName: {
        if (tok.text == "true" || tok.text == "True") return literal(Value(true));
        if (tok.text == "false" || tok.text == "False") return literal(Value(false));
        if (tok.text == "none" || tok.text == "None") return literal(Value::none());
        auto e = make(Expr::Kind::kName);
        e->name = tok.text;
        ++pos_;
        return e;
      }
      case TokenType::kOperator:
        if (tok.text == "(") {
          ++pos_;
          ExprPtr inner = parse_expression();
          if (is_op(",")) {
            auto tuple = make(Expr::Kind::kTuple);
            tuple->items.push_back(std::move(inner));
            while (accept_op(",") && !is_op(")")) tuple->items.push_back(parse_expression());
            inner = done(std::move(tuple));
          }
          expect_op(")");
          return inner;
        }
        if (tok.text == "[") {
          ++pos_;
          auto e = make(Expr::Kind::kList);
          while (!accept_op("]")) {
            e->items.push_back(parse_expression());
            if (!is_op("]")) expect_op(",");
          }
          return done(std::move(e));
        }
        if (tok.text == "{") {
          ++pos_;
          auto e = make(Expr::Kind::kDict);
          while (!accept_op("}")) {
            e->keys.push_back(parse_expression());
            expect_op(":");
            e->items.push_back(parse_expression());
            if (!is_op("}")) expect_op(",");
          }
          return done(std::move(e));
        }
        break;
      default:
        break;
    }
    error("unexpected '{}' in expression", tok.text);
  }

  const std::vector<Token>& t_;
  size_t pos_ = 0;
  int depth_ = 0;
};

}  // namespace

Body parse(const std::vector<Token>& tokens) { return Parser(tokens).parse_template(); }

}  // namespace handoff::text::jinja
