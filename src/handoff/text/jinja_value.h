#pragma once
// Runtime values of the Jinja interpreter. Lists and dicts are shared by reference, as in Python,
// so a namespace() object mutated inside a loop is seen outside it.
#include <cstdint>
#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
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
  static Value from_json(const nlohmann::ordered_json& j);

  Kind kind() const { return kind_; }
  bool is_undefined() const { return kind_ == Kind::kUndefined; }
  bool is_none() const { return kind_ == Kind::kNone; }
  bool is_string() const { return kind_ == Kind::kString; }
  bool is_number() const { return kind_ == Kind::kInt || kind_ == Kind::kFloat; }
  bool is_list() const { return kind_ == Kind::kList; }
  bool is_dict() const { return kind_ == Kind::kDict; }

  bool as_bool() const { return std::get<bool>(data_); }
  int64_t as_int() const { return std::get<int64_t>(data_); }
  double as_number() const;  // int or float as double
  const std::string& as_string() const { return std::get<std::string>(data_); }
  ValueList& list() const { return *std::get<std::shared_ptr<ValueList>>(data_); }
  ValueDict& dict() const { return *std::get<std::shared_ptr<ValueDict>>(data_); }
  const Function& function() const { return *std::get<std::shared_ptr<Function>>(data_); }

  // Dict lookup; undefined when absent.
  Value get(const std::string& key) const;
  void set(const std::string& key, Value v) const;

  bool truthy() const;
  // How {{ value }} prints (Python-like: floats keep ".0", True/False as HF jinja prints them).
  std::string to_output() const;
  // JSON text like Python json.dumps(ensure_ascii=False); indent < 0 means one line.
  std::string to_json(int indent = -1, int depth = 0) const;
  nlohmann::ordered_json to_json_value() const;

  bool equals(const Value& other) const;

 private:
  Kind kind_ = Kind::kUndefined;
  std::variant<std::monostate, bool, int64_t, double, std::string, std::shared_ptr<ValueList>,
               std::shared_ptr<ValueDict>, std::shared_ptr<Function>>
      data_;
};

}  // namespace handoff::text::jinja
