#pragma once
// Runtime values of the Jinja interpreter. Lists and dicts are shared by reference, as in Python,
// so a namespace() object mutated inside a loop is seen outside it. Containers never hold
// functions and never hold themselves, so shared references form no cycle (a bound method or
// macro inside a dict would capture its owner or a scope that ends first).
#include <cstdint>
#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <utility>
#include <variant>
#include <vector>

namespace handoff::text::jinja {

class Value;
using ValueList = std::vector<Value>;
// Insertion-ordered, like Python dicts and JSON objects as HF passes them.
using ValueDict = std::vector<std::pair<std::string, Value>>;
using KwArgs = std::vector<std::pair<std::string, Value>>;
using Function = std::function<Value(const ValueList& args, const KwArgs& kwargs)>;

class Value {
 public:
  enum class Kind { kUndefined, kNone, kBool, kInt, kFloat, kString, kList, kDict, kFunction };

  Value() = default;  // undefined
  static Value none();
  Value(bool b);
  Value(int64_t i);
  Value(int i) : Value(static_cast<int64_t>(i)) {}
  Value(double d);
  Value(std::string s);
  Value(const char* s) : Value(std::string(s)) {}
  Value(ValueList list);
  Value(ValueDict dict);
  Value(Function fn);
  // Throws InputError when `j` nests deeper than kMaxNesting.
  static Value from_json(const nlohmann::ordered_json& j);

  // Deep values (a chain of appends) are released without recursion.
  ~Value();
  Value(const Value&) = default;
  Value(Value&&) noexcept = default;
  Value& operator=(const Value&) = default;
  Value& operator=(Value&&) noexcept = default;

  Kind kind() const { return kind_; }
  bool is_undefined() const { return kind_ == Kind::kUndefined; }
  bool is_none() const { return kind_ == Kind::kNone; }
  bool is_string() const { return kind_ == Kind::kString; }
  bool is_number() const { return kind_ == Kind::kInt || kind_ == Kind::kFloat; }
  bool is_list() const { return kind_ == Kind::kList; }
  bool is_dict() const { return kind_ == Kind::kDict; }

  // The accessors throw InputError naming both kinds when the value is of another kind.
  bool as_bool() const { return held<bool>(Kind::kBool); }
  int64_t as_int() const { return held<int64_t>(Kind::kInt); }
  double as_number() const;  // int or float as double
  const std::string& as_string() const { return held<std::string>(Kind::kString); }
  ValueList& list() const { return *held<std::shared_ptr<ValueList>>(Kind::kList); }
  ValueDict& dict() const { return *held<std::shared_ptr<ValueDict>>(Kind::kDict); }
  const Function& function() const { return *held<std::shared_ptr<Function>>(Kind::kFunction); }

  // Dict lookup; undefined when absent.
  Value get(const std::string& key) const;
  // Sets a dict entry / appends to a list; InputError for a function or a cycle.
  void set(const std::string& key, Value v) const;
  void append(Value v) const;

  bool truthy() const;
  // How {{ value }} prints (Python-like: floats keep ".0", True/False as HF jinja prints them).
  std::string to_output() const;
  // JSON text like Python json.dumps(ensure_ascii=False); indent < 0 means one line.
  std::string to_json(int indent = -1) const;
  nlohmann::ordered_json to_json_value() const;

  // Python ==; InputError past kMaxNesting or kMaxCompareSteps.
  bool equals(const Value& other) const;

 private:
  template <typename T>
  const T& held(Kind kind) const {
    if (kind_ != kind) wrong_kind(kind);
    return std::get<T>(data_);
  }
  [[noreturn]] void wrong_kind(Kind wanted) const;
  // InputError when `v` may not go inside this container.
  void check_insert(const Value& v) const;
  void output_to(std::string& out, int depth) const;
  void json_to(std::string& out, int indent, int depth) const;
  bool equals(const Value& other, int depth, int64_t& steps) const;

  Kind kind_ = Kind::kUndefined;
  std::variant<std::monostate, bool, int64_t, double, std::string, std::shared_ptr<ValueList>,
               std::shared_ptr<ValueDict>, std::shared_ptr<Function>>
      data_;
};

}  // namespace handoff::text::jinja
