#include "handoff/text/jinja_value.h"

#include <fmt/format.h>

#include <cmath>

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
    : kind_(Kind::kList), data_(std::make_shared<ValueList>(std::move(list))) {}
Value::Value(ValueDict dict)
    : kind_(Kind::kDict), data_(std::make_shared<ValueDict>(std::move(dict))) {}
Value::Value(Function fn)
    : kind_(Kind::kFunction), data_(std::make_shared<Function>(std::move(fn))) {}

Value Value::from_json(const nlohmann::ordered_json& j) {
  switch (j.type()) {
    case nlohmann::json::value_t::null:
      return none();
    case nlohmann::json::value_t::boolean:
      return Value(j.get<bool>());
    case nlohmann::json::value_t::number_integer:
    case nlohmann::json::value_t::number_unsigned:
      return Value(j.get<int64_t>());
    case nlohmann::json::value_t::number_float:
      return Value(j.get<double>());
    case nlohmann::json::value_t::string:
      return Value(j.get<std::string>());
    case nlohmann::json::value_t::array: {
      ValueList list;
      for (const auto& e : j) list.push_back(from_json(e));
      return Value(std::move(list));
    }
    case nlohmann::json::value_t::object: {
      ValueDict dict;
      for (const auto& [k, v] : j.items()) dict.emplace_back(k, from_json(v));
      return Value(std::move(dict));
    }
    default:
      return Value();
  }
}

double Value::as_number() const {
  return kind_ == Kind::kInt ? static_cast<double>(as_int()) : std::get<double>(data_);
}

Value Value::get(const std::string& key) const {
  if (kind_ != Kind::kDict) return Value();
  for (const auto& [k, v] : dict())
    if (k == key) return v;
  return Value();
}

void Value::set(const std::string& key, Value v) const {
  for (auto& [k, existing] : dict())
    if (k == key) {
      existing = std::move(v);
      return;
    }
  dict().emplace_back(key, std::move(v));
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
  switch (kind_) {
    case Kind::kUndefined:
      return "";
    case Kind::kNone:
      return "None";
    case Kind::kBool:
      return as_bool() ? "True" : "False";
    case Kind::kInt:
      return std::to_string(as_int());
    case Kind::kFloat:
      return format_float(as_number());
    case Kind::kString:
      return as_string();
    case Kind::kList: {
      std::string out = "[";
      for (size_t i = 0; i < list().size(); ++i) {
        if (i) out += ", ";
        const Value& e = list()[i];
        out += e.is_string() ? "'" + e.as_string() + "'" : e.to_output();
      }
      return out + "]";
    }
    case Kind::kDict: {
      std::string out = "{";
      bool first = true;
      for (const auto& [k, v] : dict()) {
        if (!first) out += ", ";
        first = false;
        out += "'" + k + "': " + (v.is_string() ? "'" + v.as_string() + "'" : v.to_output());
      }
      return out + "}";
    }
    case Kind::kFunction:
      return "<function>";
  }
  return "";
}

std::string Value::to_json(int indent, int depth) const {
  const auto newline = [&](int d) {
    return indent < 0 ? std::string() : "\n" + std::string(static_cast<size_t>(indent * d), ' ');
  };
  switch (kind_) {
    case Kind::kUndefined:
    case Kind::kNone:
    case Kind::kFunction:
      return "null";
    case Kind::kBool:
      return as_bool() ? "true" : "false";
    case Kind::kInt:
      return std::to_string(as_int());
    case Kind::kFloat:
      return format_float(as_number());
    case Kind::kString:
      return nlohmann::json(as_string())
          .dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
    case Kind::kList: {
      if (list().empty()) return "[]";
      std::string out = "[";
      for (size_t i = 0; i < list().size(); ++i) {
        if (i) out += indent < 0 ? ", " : ",";
        out += newline(depth + 1) + list()[i].to_json(indent, depth + 1);
      }
      return out + newline(depth) + "]";
    }
    case Kind::kDict: {
      if (dict().empty()) return "{}";
      std::string out = "{";
      bool first = true;
      for (const auto& [k, v] : dict()) {
        if (!first) out += indent < 0 ? ", " : ",";
        first = false;
        out += newline(depth + 1) + Value(k).to_json() + ": " + v.to_json(indent, depth + 1);
      }
      return out + newline(depth) + "}";
    }
  }
  return "null";
}

nlohmann::ordered_json Value::to_json_value() const {
  return nlohmann::ordered_json::parse(to_json());
}

bool Value::equals(const Value& other) const {
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
      if (list().size() != other.list().size()) return false;
      for (size_t i = 0; i < list().size(); ++i)
        if (!list()[i].equals(other.list()[i])) return false;
      return true;
    }
    case Kind::kDict: {
      if (dict().size() != other.dict().size()) return false;
      for (const auto& [k, v] : dict())
        if (!v.equals(other.get(k))) return false;
      return true;
    }
    default:
      return false;
  }
}

}  // namespace handoff::text::jinja
