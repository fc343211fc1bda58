#include "handoff/text/jinja_value.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "handoff/error.h"
#include "handoff/text/jinja_limits.h"

namespace handoff::text::jinja {

Value Value::none() {
  Value v;
  v.kind_ = Kind::kNone;
  return v;
}
Value::Value(bool b) : kind_(Kind::kBool), data_(b) {}
Value::Value(int64_t i) : kind_(Kind::kInt), data_(i) {}
Value::Value(double d) : kind_(Kind::kFloat), data_(d) {}
Value::Value(std::string s) : kind_(Kind::kString), data_(std::move(s)) {}
Value::Value(ValueList list)
    : kind_(Kind::kList), data_(std::make_shared<ValueList>(std::move(list))) {
  for (const Value& v : this->list())
    if (v.kind_ == Kind::kFunction) fail_input("a function cannot be stored in a list or dict");
}
Value::Value(ValueDict dict)
    : kind_(Kind::kDict), data_(std::make_shared<ValueDict>(std::move(dict))) {
  for (const auto& [k, v] : this->dict())
    if (v.kind_ == Kind::kFunction) fail_input("a function cannot be stored in a list or dict");
}
Value::Value(Function fn)
    : kind_(Kind::kFunction), data_(std::make_shared<Function>(std::move(fn))) {}

namespace {

const char* kind_name(Value::Kind kind) {
  switch (kind) {
    case Value::Kind::kUndefined:
      return "undefined";
    case Value::Kind::kNone:
      return "none";
    case Value::Kind::kBool:
      return "a boolean";
    case Value::Kind::kInt:
      return "an integer";
    case Value::Kind::kFloat:
      return "a float";
    case Value::Kind::kString:
      return "a string";
    case Value::Kind::kList:
      return "a list";
    case Value::Kind::kDict:
      return "a dict";
    case Value::Kind::kFunction:
      return "a function";
  }
  return "a value";
}

void check_depth(int depth) {
  if (depth > kMaxNesting) fail_input("value nesting deeper than {}", kMaxNesting);
}

void check_size(const std::string& s) {
  if (s.size() > kMaxStringBytes)
    fail_input("template string longer than {} bytes", kMaxStringBytes);
}

Value from_json_at(const nlohmann::ordered_json& j, int depth) {
  check_depth(depth);
  switch (j.type()) {
    case nlohmann::json::value_t::null:
      return Value::none();
    case nlohmann::json::value_t::boolean:
      return Value(j.get<bool>());
    case nlohmann::json::value_t::number_integer:
      return Value(j.get<int64_t>());
    case nlohmann::json::value_t::number_unsigned: {
      const auto u = j.get<uint64_t>();  // above INT64_MAX only a float can hold it
      if (u > static_cast<uint64_t>(INT64_MAX)) return Value(static_cast<double>(u));
      return Value(static_cast<int64_t>(u));
    }
    case nlohmann::json::value_t::number_float:
      return Value(j.get<double>());
    case nlohmann::json::value_t::string:
      return Value(j.get<std::string>());
    case nlohmann::json::value_t::array: {
      ValueList list;
      for (const auto& e : j) list.push_back(from_json_at(e, depth + 1));
      return Value(std::move(list));
    }
    case nlohmann::json::value_t::object: {
      ValueDict dict;
      for (const auto& [k, v] : j.items()) dict.emplace_back(k, from_json_at(v, depth + 1));
      return Value(std::move(dict));
    }
    default:
      return Value();
  }
}

}  // namespace

Value Value::from_json(const nlohmann::ordered_json& j) { return from_json_at(j, 1); }

Value::~Value() {
  // Moves the children of containers this value owns alone onto a work list, so releasing a
  // chain nested a million deep takes a loop, not a million stack frames.
  const auto owned_alone = [](const Value& v) {
    if (v.kind_ == Kind::kList)
      return std::get<std::shared_ptr<ValueList>>(v.data_).use_count() == 1;
    if (v.kind_ == Kind::kDict)
      return std::get<std::shared_ptr<ValueDict>>(v.data_).use_count() == 1;
    return false;
  };
  if (!owned_alone(*this)) return;
  ValueList pending;
  const auto take_children = [&](const Value& v) {
    if (v.kind_ == Kind::kList) {
      ValueList& items = *std::get<std::shared_ptr<ValueList>>(v.data_);
      for (Value& item : items)
        if (owned_alone(item)) pending.push_back(std::move(item));
      items.clear();
    } else {
      ValueDict& items = *std::get<std::shared_ptr<ValueDict>>(v.data_);
      for (auto& [key, item] : items)
        if (owned_alone(item)) pending.push_back(std::move(item));
      items.clear();
    }
  };
  take_children(*this);
  while (!pending.empty()) {
    Value v = std::move(pending.back());
    pending.pop_back();
    take_children(v);
  }
}

void Value::wrong_kind(Kind wanted) const {
  fail_input("expected {} but got {}", kind_name(wanted), kind_name(kind_));
}

void Value::check_insert(const Value& v) const {
  if (v.kind_ == Kind::kFunction) fail_input("a function cannot be stored in a list or dict");
  if (v.kind_ != Kind::kList && v.kind_ != Kind::kDict) return;
  // Walks `v` (each container once) looking for this container.
  const void* self =
      kind_ == Kind::kList ? static_cast<const void*>(&list()) : static_cast<const void*>(&dict());
  std::vector<const Value*> todo{&v};
  std::vector<const void*> seen;
  while (!todo.empty()) {
    const Value* x = todo.back();
    todo.pop_back();
    const void* id = x->kind_ == Kind::kList ? static_cast<const void*>(&x->list())
                                             : static_cast<const void*>(&x->dict());
    if (id == self) fail_input("a list or dict cannot be put inside itself");
    if (std::find(seen.begin(), seen.end(), id) != seen.end()) continue;
    seen.push_back(id);
    const auto visit = [&](const Value& child) {
      if (child.kind_ == Kind::kList || child.kind_ == Kind::kDict) todo.push_back(&child);
    };
    if (x->kind_ == Kind::kList)
      for (const Value& child : x->list()) visit(child);
    else
      for (const auto& [k, child] : x->dict()) visit(child);
  }
}

double Value::as_number() const {
  if (kind_ == Kind::kInt) return static_cast<double>(as_int());
  return held<double>(Kind::kFloat);
}

Value Value::get(const std::string& key) const {
  if (kind_ != Kind::kDict) return Value();
  for (const auto& [k, v] : dict())
    if (k == key) return v;
  return Value();
}

void Value::set(const std::string& key, Value v) const {
  if (kind_ != Kind::kDict) fail_input("cannot set '{}' on {}", key, kind_name(kind_));
  check_insert(v);
  for (auto& [k, existing] : dict())
    if (k == key) {
      existing = std::move(v);
      return;
    }
  dict().emplace_back(key, std::move(v));
}

void Value::append(Value v) const {
  check_insert(v);
  list().push_back(std::move(v));
}

bool Value::truthy() const {
  switch (kind_) {
    case Kind::kUndefined:
    case Kind::kNone:
      return false;
    case Kind::kBool:
      return as_bool();
    case Kind::kInt:
      return as_int() != 0;
    case Kind::kFloat:
      return as_number() != 0.0;
    case Kind::kString:
      return !as_string().empty();
    case Kind::kList:
      return !list().empty();
    case Kind::kDict:
      return !dict().empty();
    case Kind::kFunction:
      return true;
  }
  return false;
}

namespace {

std::string format_float(double d) {
  if (std::isfinite(d) && d == std::floor(d) && std::fabs(d) < 1e16)
    return fmt::format("{:.1f}", d);
  return fmt::format("{}", d);
}

}  // namespace

std::string Value::to_output() const {
  if (kind_ == Kind::kString) return as_string();
  std::string out;
  output_to(out, 1);
  return out;
}

// Containers are printed into one string checked as it grows, so a small value that shares
// one sub-list many times cannot make a huge one.
void Value::output_to(std::string& out, int depth) const {
  check_depth(depth);
  const auto element = [&](const Value& e) {
    if (e.is_string())
      out += "'" + e.as_string() + "'";
    else
      e.output_to(out, depth + 1);
    check_size(out);
  };
  switch (kind_) {
    case Kind::kUndefined:
      return;
    case Kind::kNone:
      out += "None";
      return;
    case Kind::kBool:
      out += as_bool() ? "True" : "False";
      return;
    case Kind::kInt:
      out += std::to_string(as_int());
      return;
    case Kind::kFloat:
      out += format_float(as_number());
      return;
    case Kind::kString:
      out += as_string();
      check_size(out);
      return;
    case Kind::kList: {
      out += "[";
      for (size_t i = 0; i < list().size(); ++i) {
        if (i) out += ", ";
        element(list()[i]);
      }
      out += "]";
      return;
    }
    case Kind::kDict: {
      out += "{";
      bool first = true;
      for (const auto& [k, v] : dict()) {
        if (!first) out += ", ";
        first = false;
        out += "'" + k + "': ";
        element(v);
      }
      out += "}";
      return;
    }
    case Kind::kFunction:
      out += "<function>";
      return;
  }
}

std::string Value::to_json(int indent) const {
  std::string out;
  json_to(out, indent, 0);
  return out;
}

void Value::json_to(std::string& out, int indent, int depth) const {
  check_depth(depth + 1);
  const auto newline = [&](int d) {
    if (indent >= 0) out += "\n" + std::string(static_cast<size_t>(indent) * d, ' ');
  };
  const auto string = [&](const std::string& s) {
    out += nlohmann::json(s).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  };
  switch (kind_) {
    case Kind::kUndefined:
    case Kind::kNone:
    case Kind::kFunction:
      out += "null";
      return;
    case Kind::kBool:
      out += as_bool() ? "true" : "false";
      return;
    case Kind::kInt:
      out += std::to_string(as_int());
      return;
    case Kind::kFloat:
      out += format_float(as_number());
      return;
    case Kind::kString:
      string(as_string());
      check_size(out);
      return;
    case Kind::kList: {
      if (list().empty()) {
        out += "[]";
        return;
      }
      out += "[";
      for (size_t i = 0; i < list().size(); ++i) {
        if (i) out += indent < 0 ? ", " : ",";
        newline(depth + 1);
        list()[i].json_to(out, indent, depth + 1);
        check_size(out);
      }
      newline(depth);
      out += "]";
      return;
    }
    case Kind::kDict: {
      if (dict().empty()) {
        out += "{}";
        return;
      }
      out += "{";
      bool first = true;
      for (const auto& [k, v] : dict()) {
        if (!first) out += indent < 0 ? ", " : ",";
        first = false;
        newline(depth + 1);
        string(k);
        out += ": ";
        v.json_to(out, indent, depth + 1);
        check_size(out);
      }
      newline(depth);
      out += "}";
      return;
    }
  }
}

nlohmann::ordered_json Value::to_json_value() const {
  return nlohmann::ordered_json::parse(to_json());
}

bool Value::equals(const Value& other) const {
  int64_t steps = 0;
  return equals(other, 1, steps);
}

bool Value::equals(const Value& other, int depth, int64_t& steps) const {
  check_depth(depth);
  if (++steps > kMaxCompareSteps)
    fail_input("comparison visits more than {} values", kMaxCompareSteps);
  if (is_number() && other.is_number()) return as_number() == other.as_number();
  if (kind_ != other.kind_) {
    // Python: True == 1 is True; keep bool/int comparisons numeric.
    return false;
  }
  switch (kind_) {
    case Kind::kUndefined:
    case Kind::kNone:
      return true;
    case Kind::kBool:
      return as_bool() == other.as_bool();
    case Kind::kString:
      return as_string() == other.as_string();
    case Kind::kList: {
      if (&list() == &other.list()) return true;
      if (list().size() != other.list().size()) return false;
      for (size_t i = 0; i < list().size(); ++i)
        if (!list()[i].equals(other.list()[i], depth + 1, steps)) return false;
      return true;
    }
    case Kind::kDict: {
      if (&dict() == &other.dict()) return true;
      if (dict().size() != other.dict().size()) return false;
      for (const auto& [k, v] : dict())
        if (!v.equals(other.get(k), depth + 1, steps)) return false;
      return true;
    }
    default:
      return false;
  }
}

}  // namespace handoff::text::jinja
