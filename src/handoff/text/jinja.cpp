#include "handoff/text/jinja.h"

#include <cmath>
#include <unordered_map>

#include "handoff/error.h"
#include "handoff/text/jinja_ast.h"
#include "handoff/text/jinja_builtins.h"
#include "handoff/text/jinja_lexer.h"
#include "handoff/text/jinja_limits.h"
#include "handoff/text/jinja_parser.h"

namespace handoff::text {
namespace jinja {
namespace {

// Variables of one scope; a for-loop body or macro call gets a child scope, so `set` inside a
// loop does not leak out (the reason templates use namespace()).
class Scope {
 public:
  explicit Scope(const Scope* parent = nullptr) : parent_(parent) {}
  Value lookup(const std::string& name) const {
    for (const Scope* s = this; s != nullptr; s = s->parent_) {
      const auto it = s->vars_.find(name);
      if (it != s->vars_.end()) return it->second;
    }
    return Value();
  }
  void set(const std::string& name, Value v) { vars_[name] = std::move(v); }

 private:
  const Scope* parent_;
  std::unordered_map<std::string, Value> vars_;
};

enum class Flow { kNormal, kBreak, kContinue };

// int64 arithmetic ending the render on overflow (Python's ints would just grow).
const auto add = [](int64_t a, int64_t b, int64_t* r) { return __builtin_add_overflow(a, b, r); };
const auto sub = [](int64_t a, int64_t b, int64_t* r) { return __builtin_sub_overflow(a, b, r); };
const auto mul = [](int64_t a, int64_t b, int64_t* r) { return __builtin_mul_overflow(a, b, r); };

template <typename Op>
int64_t checked(Op op, int64_t a, int64_t b, size_t line) {
  int64_t result;
  if (op(a, b, &result)) fail_input("template line {}: integer overflow", line);
  return result;
}

// Appends rendered text, ending the render once it passes kMaxStringBytes.
void emit(std::string& out, const std::string& text) {
  if (text.size() > kMaxStringBytes - std::min(out.size(), kMaxStringBytes))
    fail_input("template output longer than {} bytes", kMaxStringBytes);
  out += text;
}

class Interpreter {
 public:
  Flow exec(const Body& body, Scope& scope, std::string& out) {
    const Deeper guard(*this);
    for (const auto& stmt : body) {
      const Flow flow = exec(*stmt, scope, out);
      if (flow != Flow::kNormal) return flow;
    }
    return Flow::kNormal;
  }

 private:
  // Counts evaluation depth (statements, expressions and macro calls), so recursion that a
  // template builds (a macro calling itself) ends with an error, not a stack overflow.
  class Deeper {
   public:
    explicit Deeper(Interpreter& in) : in_(in) {
      if (++in_.depth_ > kMaxEvalDepth)
        fail_input("template evaluation nested deeper than {} (a recursive macro?)", kMaxEvalDepth);
    }
    ~Deeper() { --in_.depth_; }
    Deeper(const Deeper&) = delete;
    Deeper& operator=(const Deeper&) = delete;

   private:
    Interpreter& in_;
  };

  void count_iteration(size_t line) {
    if (++iterations_ > kMaxLoopIterations)
      fail_input("template line {}: loops ran more than {} iterations", line, kMaxLoopIterations);
  }

  Flow exec(const Stmt& s, Scope& scope, std::string& out) {
    switch (s.kind) {
      case Stmt::Kind::kText:
        emit(out, s.text);
        return Flow::kNormal;
      case Stmt::Kind::kOutput: {
        // `{{ none }}` writes nothing in @huggingface/jinja (GLM's templates rely on it for a
        // tool-calling message's null content); inside a list or dict it is still spelt out.
        const Value v = eval(*s.expr, scope);
        if (!v.is_none()) emit(out, v.to_output());
        return Flow::kNormal;
      }
      case Stmt::Kind::kIf:
        return exec(eval(*s.expr, scope).truthy() ? s.body : s.else_body, scope, out);
      case Stmt::Kind::kFor:
        exec_for(s, scope, out);
        return Flow::kNormal;
      case Stmt::Kind::kSet: {
        Value v;
        if (s.expr) {
          v = eval(*s.expr, scope);
        } else {
          std::string captured;
          exec(s.body, scope, captured);
          v = Value(captured);
        }
        assign(*s.target, std::move(v), scope, s.line);
        return Flow::kNormal;
      }
      case Stmt::Kind::kMacro:
        scope.set(s.text, make_macro(s, scope));
        return Flow::kNormal;
      case Stmt::Kind::kBreak:
        return Flow::kBreak;
      case Stmt::Kind::kContinue:
        return Flow::kContinue;
    }
    return Flow::kNormal;
  }

  void assign(const Expr& target, Value v, Scope& scope, size_t line) {
    if (target.kind == Expr::Kind::kName) {
      scope.set(target.name, std::move(v));
    } else if (target.kind == Expr::Kind::kAttr) {
      const Value object = eval(*target.a, scope);
      if (!object.is_dict())
        fail_input("template line {}: cannot set attribute '{}'", line, target.name);
      object.set(target.name, std::move(v));
    } else if (target.kind == Expr::Kind::kTuple) {
      if (!v.is_list() || v.list().size() != target.items.size())
        fail_input("template line {}: cannot unpack value into {} names", line,
                   target.items.size());
      for (size_t i = 0; i < target.items.size(); ++i)
        assign(*target.items[i], v.list()[i], scope, line);
    } else {
      fail_input("template line {}: invalid assignment target", line);
    }
  }

  static ValueList iterate(const Value& v, size_t line) {
    if (v.is_list()) return v.list();
    if (v.is_dict()) {
      ValueList keys;
      for (const auto& [k, val] : v.dict()) keys.push_back(Value(k));
      return keys;
    }
    if (v.is_string()) return apply_filter("list", v, {}, {}).list();
    if (v.is_undefined() || v.is_none()) return {};
    fail_input("template line {}: value is not iterable", line);
  }

  void bind_targets(const Stmt& s, const Value& item, Scope& scope) {
    if (s.names.size() == 1) {
      scope.set(s.names[0], item);
      return;
    }
    if (!item.is_list() || item.list().size() != s.names.size())
      fail_input("template line {}: cannot unpack loop item into {} names", s.line, s.names.size());
    for (size_t i = 0; i < s.names.size(); ++i) scope.set(s.names[i], item.list()[i]);
  }

  void exec_for(const Stmt& s, Scope& scope, std::string& out) {
    ValueList items = iterate(eval(*s.expr, scope), s.line);
    if (s.cond) {  // `for x in xs if cond` filters before loop.* counts
      ValueList kept;
      for (const Value& item : items) {
        count_iteration(s.line);
        Scope probe(&scope);
        bind_targets(s, item, probe);
        if (eval(*s.cond, probe).truthy()) kept.push_back(item);
      }
      items = std::move(kept);
    }
    if (items.empty()) {
      exec(s.else_body, scope, out);
      return;
    }
    const auto n = static_cast<int64_t>(items.size());
    for (int64_t i = 0; i < n; ++i) {
      count_iteration(s.line);
      Scope inner(&scope);
      bind_targets(s, items[i], inner);
      ValueDict loop{{"index", Value(i + 1)},
                     {"index0", Value(i)},
                     {"revindex", Value(n - i)},
                     {"revindex0", Value(n - i - 1)},
                     {"first", Value(i == 0)},
                     {"last", Value(i == n - 1)},
                     {"length", Value(n)},
                     {"previtem", i > 0 ? items[i - 1] : Value()},
                     {"nextitem", i + 1 < n ? items[i + 1] : Value()}};
      inner.set("loop", Value(std::move(loop)));
      if (exec(s.body, inner, out) == Flow::kBreak) break;
    }
  }

  Value make_macro(const Stmt& s, const Scope& defining) {
    const Stmt* macro = &s;
    const Scope* outer = &defining;
    return Value(Function([this, macro, outer](const ValueList& args, const KwArgs& kwargs) {
      Scope scope(outer);
      for (size_t i = 0; i < macro->names.size(); ++i) {
        Value v;
        if (i < args.size()) {
          v = args[i];
        } else if (macro->defaults[i]) {
          v = eval(*macro->defaults[i], scope);
        }
        for (const auto& [k, kv] : kwargs)
          if (k == macro->names[i]) v = kv;
        scope.set(macro->names[i], v);
      }
      std::string out;
      exec(macro->body, scope, out);
      return Value(out);
    }));
  }

  Value eval(const Expr& e, const Scope& scope) {
    const Deeper guard(*this);
    Value v = eval_node(e, scope);
    if (v.is_string() && v.as_string().size() > kMaxStringBytes)
      fail_input("template line {}: string longer than {} bytes", e.line, kMaxStringBytes);
    return v;
  }

  Value eval_node(const Expr& e, const Scope& scope) {
    switch (e.kind) {
      case Expr::Kind::kLiteral:
        return e.value;
      case Expr::Kind::kName:
        return lookup(e.name, scope);
      case Expr::Kind::kList:
      case Expr::Kind::kTuple: {
        ValueList items;
        for (const auto& item : e.items) items.push_back(eval(*item, scope));
        return Value(std::move(items));
      }
      case Expr::Kind::kDict: {
        ValueDict dict;
        Value result(std::move(dict));
        for (size_t i = 0; i < e.keys.size(); ++i)
          result.set(eval(*e.keys[i], scope).to_output(), eval(*e.items[i], scope));
        return result;
      }
      case Expr::Kind::kAttr: {
        const Value object = eval(*e.a, scope);
        if (object.is_dict()) {
          Value v = object.get(e.name);
          if (!v.is_undefined()) return v;
        }
        if (auto method = bound_method(object, e.name)) return *method;
        return Value();
      }
      case Expr::Kind::kIndex:
        return index(eval(*e.a, scope), eval(*e.b, scope), e.line);
      case Expr::Kind::kSlice:
        return slice(e, scope);
      case Expr::Kind::kCall: {
        const Value fn = eval(*e.a, scope);
        if (fn.kind() != Value::Kind::kFunction)
          fail_input("template line {}: value is not callable", e.line);
        ValueList args;
        KwArgs kwargs;
        eval_args(e, scope, args, kwargs);
        return fn.function()(args, kwargs);
      }
      case Expr::Kind::kFilter: {
        ValueList args;
        KwArgs kwargs;
        eval_args(e, scope, args, kwargs);
        return apply_filter(e.name, eval(*e.a, scope), args, kwargs);
      }
      case Expr::Kind::kTest: {
        ValueList args;
        KwArgs kwargs;
        eval_args(e, scope, args, kwargs);
        return Value(apply_test(e.name, eval(*e.a, scope), args) != e.negate);
      }
      case Expr::Kind::kUnary: {
        const Value v = eval(*e.a, scope);
        if (e.name == "not") return Value(!v.truthy());
        if (e.name == "-") {
          if (v.kind() == Value::Kind::kInt) return Value(checked(sub, 0, v.as_int(), e.line));
          if (v.kind() == Value::Kind::kFloat) return Value(-v.as_number());
          fail_input("template line {}: cannot negate a non-number", e.line);
        }
        return v;
      }
      case Expr::Kind::kBinary:
        return binary(e, scope);
      case Expr::Kind::kTernary:
        if (eval(*e.a, scope).truthy()) return eval(*e.b, scope);
        return e.c ? eval(*e.c, scope) : Value();
    }
    return Value();
  }

  void eval_args(const Expr& e, const Scope& scope, ValueList& args, KwArgs& kwargs) {
    for (const auto& a : e.items) args.push_back(eval(*a, scope));
    for (const auto& [k, v] : e.kwargs) kwargs.emplace_back(k, eval(*v, scope));
  }

  Value lookup(const std::string& name, const Scope& scope) {
    Value v = scope.lookup(name);
    if (!v.is_undefined()) return v;
    if (name == "namespace") {
      return Value(Function([](const ValueList& args, const KwArgs& kwargs) {
        Value ns{ValueDict{}};
        if (!args.empty() && args[0].is_dict())
          for (const auto& [k, val] : args[0].dict()) ns.set(k, val);
        for (const auto& [k, val] : kwargs) ns.set(k, val);
        return ns;
      }));
    }
    if (name == "raise_exception") {
      return Value(Function([](const ValueList& args, const KwArgs&) -> Value {
        throw InputError(args.empty() ? "template raised an exception" : args[0].to_output());
      }));
    }
    if (name == "range") {
      return Value(Function([this](const ValueList& args, const KwArgs&) {
        int64_t start = 0, stop = 0, step = 1;
        if (args.size() == 1) {
          stop = args[0].as_int();
        } else if (args.size() >= 2) {
          start = args[0].as_int();
          stop = args[1].as_int();
          if (args.size() > 2) step = args[2].as_int();
        }
        if (step == 0) fail_input("range() step must not be zero");
        // The count first, in 128 bits: a list of billions would run out of memory, and
        // stepping past INT64_MAX would overflow.
        const __int128 span = step > 0 ? __int128{stop} - start : __int128{start} - stop;
        const __int128 abs_step = step > 0 ? __int128{step} : -__int128{step};
        const __int128 count = span <= 0 ? 0 : (span + abs_step - 1) / abs_step;
        if (count > kMaxLoopIterations - iterations_)
          fail_input("range() of {} items passes the limit of {} loop iterations",
                     static_cast<double>(count), kMaxLoopIterations);
        iterations_ += static_cast<int64_t>(count);
        ValueList out;
        out.reserve(static_cast<size_t>(count));
        for (__int128 k = 0; k < count; ++k)
          out.push_back(Value(static_cast<int64_t>(start + k * step)));
        return Value(out);
      }));
    }
    if (name == "dict") {
      return Value(Function([](const ValueList&, const KwArgs& kwargs) {
        Value d{ValueDict{}};
        for (const auto& [k, val] : kwargs) d.set(k, val);
        return d;
      }));
    }
    return v;
  }

  static int64_t normalize_index(int64_t i, int64_t n) { return i < 0 ? i + n : i; }

  Value index(const Value& object, const Value& key, size_t line) {
    if (object.is_dict()) {
      Value v = object.get(key.to_output());
      if (v.is_undefined())
        if (auto method = bound_method(object, key.to_output())) return *method;
      return v;
    }
    if ((object.is_list() || object.is_string()) && key.kind() == Value::Kind::kInt) {
      const ValueList items =
          object.is_list() ? object.list() : apply_filter("list", object, {}, {}).list();
      const int64_t i = normalize_index(key.as_int(), static_cast<int64_t>(items.size()));
      if (i < 0 || i >= static_cast<int64_t>(items.size())) return Value();
      return items[i];
    }
    if (key.is_string()) {
      if (auto method = bound_method(object, key.as_string())) return *method;
    }
    (void)line;
    return Value();
  }

  Value slice(const Expr& e, const Scope& scope) {
    const Value object = eval(*e.a, scope);
    const ValueList items =
        object.is_list() ? object.list() : apply_filter("list", object, {}, {}).list();
    const auto n = static_cast<int64_t>(items.size());
    const int64_t step = e.d ? eval(*e.d, scope).as_int() : 1;
    if (step == 0) fail_input("template line {}: slice step must not be zero", e.line);
    const auto bound = [&](const ExprPtr& x, int64_t fallback) {
      if (!x) return fallback;
      const Value v = eval(*x, scope);
      if (v.is_none()) return fallback;
      int64_t i = normalize_index(v.as_int(), n);
      if (step > 0) return std::clamp<int64_t>(i, 0, n);
      return std::clamp<int64_t>(i, -1, n - 1);
    };
    const int64_t start = bound(e.b, step > 0 ? 0 : n - 1);
    const int64_t stop = bound(e.c, step > 0 ? n : -1);
    ValueList out;
    // 128-bit index: a step near INT64_MAX must not overflow past the end.
    for (__int128 i = start; step > 0 ? i < stop : i > stop; i += step)
      out.push_back(items[static_cast<size_t>(i)]);
    if (object.is_string()) {
      std::string s;
      for (const Value& c : out) s += c.as_string();
      return Value(s);
    }
    return Value(out);
  }

  static bool contains(const Value& container, const Value& item) {
    if (container.is_string())
      return container.as_string().find(item.to_output()) != std::string::npos;
    if (container.is_dict()) return !container.get(item.to_output()).is_undefined();
    if (container.is_list())
      for (const Value& v : container.list())
        if (v.equals(item)) return true;
    return false;
  }

  static int compare(const Value& a, const Value& b, size_t line) {
    if (a.is_number() && b.is_number())
      return a.as_number() < b.as_number() ? -1 : a.as_number() > b.as_number();
    if (a.is_string() && b.is_string())
      return a.as_string().compare(b.as_string()) < 0 ? -1 : a.as_string() != b.as_string();
    fail_input("template line {}: cannot compare these values", line);
  }

  Value binary(const Expr& e, const Scope& scope) {
    const std::string& op = e.name;
    if (op == "and") {
      Value l = eval(*e.a, scope);
      return l.truthy() ? eval(*e.b, scope) : l;
    }
    if (op == "or") {
      Value l = eval(*e.a, scope);
      return l.truthy() ? l : eval(*e.b, scope);
    }
    const Value l = eval(*e.a, scope), r = eval(*e.b, scope);
    if (op == "==") return Value(l.equals(r));
    if (op == "!=") return Value(!l.equals(r));
    if (op == "<") return Value(compare(l, r, e.line) < 0);
    if (op == ">") return Value(compare(l, r, e.line) > 0);
    if (op == "<=") return Value(compare(l, r, e.line) <= 0);
    if (op == ">=") return Value(compare(l, r, e.line) >= 0);
    if (op == "in") return Value(contains(r, l));
    if (op == "not in") return Value(!contains(r, l));
    if (op == "~") return Value(l.to_output() + r.to_output());
    if (op == "+") {
      if (l.is_string() && r.is_string()) return Value(l.as_string() + r.as_string());
      if (l.is_list() && r.is_list()) {
        ValueList out = l.list();
        out.insert(out.end(), r.list().begin(), r.list().end());
        return Value(out);
      }
      if (l.is_string() || r.is_string()) {
        // HF jinja concatenates a string with anything by its printed form.
        return Value(l.to_output() + r.to_output());
      }
    }
    if (op == "*" && l.is_string() && r.kind() == Value::Kind::kInt) {
      if (r.as_int() > 0 &&
          l.as_string().size() > kMaxStringBytes / static_cast<uint64_t>(r.as_int()))
        fail_input("template line {}: string longer than {} bytes", e.line, kMaxStringBytes);
      std::string out;
      if (l.as_string().empty()) return Value(out);
      for (int64_t i = 0; i < r.as_int(); ++i) out += l.as_string();
      return Value(out);
    }
    if (!l.is_number() || !r.is_number())
      fail_input("template line {}: unsupported operands for '{}'", e.line, op);
    const bool ints = l.kind() == Value::Kind::kInt && r.kind() == Value::Kind::kInt;
    if (op == "/") {
      if (r.as_number() == 0) fail_input("template line {}: division by zero", e.line);
      return Value(l.as_number() / r.as_number());
    }
    if (ints) {
      const int64_t a = l.as_int(), b = r.as_int();
      if (op == "+") return Value(checked(add, a, b, e.line));
      if (op == "-") return Value(checked(sub, a, b, e.line));
      if (op == "*") return Value(checked(mul, a, b, e.line));
      if (b == 0) fail_input("template line {}: division by zero", e.line);
      if (a == INT64_MIN && b == -1) fail_input("template line {}: integer overflow", e.line);
      int64_t q = a / b;
      if ((a % b != 0) && ((a < 0) != (b < 0))) --q;  // Python floors
      if (op == "//") return Value(q);
      if (op == "%") return Value(static_cast<int64_t>(a - __int128{q} * b));
    }
    const double a = l.as_number(), b = r.as_number();
    if (op == "+") return Value(a + b);
    if (op == "-") return Value(a - b);
    if (op == "*") return Value(a * b);
    if (op == "//") return Value(std::floor(a / b));
    if (op == "%") return Value(a - std::floor(a / b) * b);
    fail_input("template line {}: unknown operator '{}'", e.line, op);
  }

  int depth_ = 0;
  int64_t iterations_ = 0;
};

}  // namespace
}  // namespace jinja

JinjaTemplate::JinjaTemplate(std::string_view source) : body_(jinja::parse(jinja::lex(source))) {}
JinjaTemplate::~JinjaTemplate() = default;
JinjaTemplate::JinjaTemplate(JinjaTemplate&&) noexcept = default;
JinjaTemplate& JinjaTemplate::operator=(JinjaTemplate&&) noexcept = default;

std::string JinjaTemplate::render(const nlohmann::ordered_json& context) const {
  jinja::Scope globals;
  if (context.is_object())
    for (const auto& [k, v] : context.items()) globals.set(k, jinja::Value::from_json(v));
  jinja::Scope scope(&globals);
  std::string out;
  jinja::Interpreter().exec(body_, scope, out);
  return out;
}

}  // namespace handoff::text
