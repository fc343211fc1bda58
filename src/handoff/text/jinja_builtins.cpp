#include "handoff/text/jinja_builtins.h"

#include <algorithm>
#include <cctype>
#include <cmath>

#include "handoff/error.h"
#include "handoff/text/jinja_limits.h"

namespace handoff::text::jinja {
namespace {

void check_size(size_t bytes) {
  if (bytes > kMaxStringBytes) fail_input("template string longer than {} bytes", kMaxStringBytes);
}

// The positional argument `index`; InputError naming `what` when it is missing.
const Value& required(const ValueList& args, size_t index, const char* what) {
  if (index >= args.size()) fail_input("{} needs {} argument(s)", what, index + 1);
  return args[index];
}

// A float as int64, as Python's int() truncates; InputError when it does not fit.
int64_t to_int(double d) {
  if (!(d > -9.2e18 && d < 9.2e18)) fail_input("{} does not fit an integer", d);
  return static_cast<int64_t>(d);
}

bool is_space(char c) {
  return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v';
}

std::string strip(const std::string& s, const Value& chars, bool left, bool right) {
  const auto drop = [&](char c) {
    return chars.is_string() ? chars.as_string().find(c) != std::string::npos : is_space(c);
  };
  size_t b = 0, e = s.size();
  if (left)
    while (b < e && drop(s[b])) ++b;
  if (right)
    while (e > b && drop(s[e - 1])) --e;
  return s.substr(b, e - b);
}

std::string replace_all(const std::string& s, const std::string& from, const std::string& to,
                        int64_t count = -1) {
  if (from.empty()) return s;
  std::string out;
  size_t pos = 0, hit;
  while (count != 0 && (hit = s.find(from, pos)) != std::string::npos) {
    out.append(s, pos, hit - pos);
    out += to;
    check_size(out.size());
    pos = hit + from.size();
    if (count > 0) --count;
  }
  out.append(s, pos);
  return out;
}

std::string map_ascii(std::string s, int (*f)(int)) {
  for (char& c : s)
    if (static_cast<unsigned char>(c) < 0x80) c = static_cast<char>(f(c));
  return s;
}

ValueList split(const std::string& s, const Value& sep, int64_t max_split) {
  ValueList parts;
  if (!sep.is_string() || sep.as_string().empty()) {  // Python str.split(): runs of whitespace
    size_t i = 0;
    while (i < s.size()) {
      while (i < s.size() && is_space(s[i])) ++i;
      if (i >= s.size()) break;
      if (max_split >= 0 && static_cast<int64_t>(parts.size()) == max_split) {
        parts.push_back(Value(strip(s.substr(i), Value(), false, true)));
        break;
      }
      size_t j = i;
      while (j < s.size() && !is_space(s[j])) ++j;
      parts.push_back(Value(s.substr(i, j - i)));
      i = j;
    }
    return parts;
  }
  const std::string& d = sep.as_string();
  size_t pos = 0, hit;
  while ((max_split < 0 || static_cast<int64_t>(parts.size()) < max_split) &&
         (hit = s.find(d, pos)) != std::string::npos) {
    parts.push_back(Value(s.substr(pos, hit - pos)));
    pos = hit + d.size();
  }
  parts.push_back(Value(s.substr(pos)));
  return parts;
}

Value arg(const ValueList& args, const KwArgs& kwargs, size_t index, const char* name,
          Value fallback = Value()) {
  for (const auto& [k, v] : kwargs)
    if (k == name) return v;
  return index < args.size() ? args[index] : fallback;
}

int64_t length_of(const Value& v) {
  if (v.is_string()) {  // characters, not bytes
    int64_t n = 0;
    for (unsigned char c : v.as_string()) n += (c & 0xC0) != 0x80;
    return n;
  }
  if (v.is_list()) return static_cast<int64_t>(v.list().size());
  if (v.is_dict()) return static_cast<int64_t>(v.dict().size());
  fail_input("object of this type has no length");
}

ValueList items_of(const Value& v) {
  ValueList items;
  for (const auto& [k, val] : v.dict()) items.push_back(Value(ValueList{Value(k), val}));
  return items;
}

ValueList as_list(const Value& v) {
  if (v.is_list()) return v.list();
  if (v.is_dict()) {
    ValueList keys;
    for (const auto& [k, val] : v.dict()) keys.push_back(Value(k));
    return keys;
  }
  if (v.is_string()) {
    ValueList chars;
    const std::string& s = v.as_string();
    for (size_t i = 0; i < s.size();) {
      size_t j = i + 1;
      while (j < s.size() && (static_cast<unsigned char>(s[j]) & 0xC0) == 0x80) ++j;
      chars.push_back(Value(s.substr(i, j - i)));
      i = j;
    }
    return chars;
  }
  if (v.is_undefined() || v.is_none()) return {};
  fail_input("value is not iterable");
}

Value attribute(const Value& v, const std::string& path) {
  Value cur = v;
  size_t start = 0;
  while (start <= path.size()) {
    const size_t dot = path.find('.', start);
    cur = cur.get(path.substr(start, dot == std::string::npos ? std::string::npos : dot - start));
    if (dot == std::string::npos) break;
    start = dot + 1;
  }
  return cur;
}

}  // namespace

Value apply_filter(const std::string& name, const Value& value, const ValueList& args,
                   const KwArgs& kwargs) {
  if (name == "trim" || name == "strip")
    return Value(strip(value.to_output(), arg(args, kwargs, 0, "chars"), true, true));
  if (name == "tojson") {
    const Value indent = arg(args, kwargs, 0, "indent");
    if (!indent.is_number()) return Value(value.to_json());
    const double spaces = indent.as_number();
    if (!(spaces <= 64)) fail_input("tojson indent must be at most 64, got {}", spaces);
    return Value(value.to_json(spaces < 0 ? -1 : static_cast<int>(spaces)));
  }
  if (name == "length" || name == "count") return Value(length_of(value));
  if (name == "default" || name == "d") {
    const bool boolean = arg(args, kwargs, 1, "boolean", Value(false)).truthy();
    if (value.is_undefined() || (boolean && !value.truthy()))
      return arg(args, kwargs, 0, "default_value", Value(""));
    return value;
  }
  if (name == "upper") return Value(map_ascii(value.to_output(), ::toupper));
  if (name == "lower") return Value(map_ascii(value.to_output(), ::tolower));
  if (name == "string") return Value(value.to_output());
  if (name == "safe" || name == "e" || name == "escape") return value;
  if (name == "capitalize") {
    std::string s = map_ascii(value.to_output(), ::tolower);
    if (!s.empty()) s[0] = static_cast<char>(std::toupper(s[0]));
    return Value(s);
  }
  if (name == "join") {
    const Value sep = arg(args, kwargs, 0, "d", Value(""));
    std::string out;
    const ValueList items = as_list(value);
    const std::string separator = sep.to_output();
    for (size_t i = 0; i < items.size(); ++i) {
      if (i) out += separator;
      out += items[i].to_output();
      check_size(out.size());
    }
    return Value(out);
  }
  if (name == "first" || name == "last") {
    const ValueList items = as_list(value);
    if (items.empty()) return Value();
    return name == "first" ? items.front() : items.back();
  }
  if (name == "replace")
    return Value(replace_all(value.to_output(), arg(args, kwargs, 0, "old").to_output(),
                             arg(args, kwargs, 1, "new").to_output(),
                             arg(args, kwargs, 2, "count", Value(-1)).as_int()));
  if (name == "items" && !value.is_dict()) fail_input("items needs a dict");
  if (name == "items") return Value(items_of(value));
  if (name == "list") return Value(as_list(value));
  if (name == "reverse") {
    if (value.is_string()) {
      ValueList chars = as_list(value);
      std::string out;
      for (auto it = chars.rbegin(); it != chars.rend(); ++it) out += it->as_string();
      return Value(out);
    }
    ValueList items = as_list(value);
    std::reverse(items.begin(), items.end());
    return Value(items);
  }
  if (name == "int") {
    if (value.is_number()) return Value(to_int(value.as_number()));
    try {
      return Value(static_cast<int64_t>(std::stoll(value.to_output())));
    } catch (const std::exception&) {
      return arg(args, kwargs, 0, "default", Value(0));
    }
  }
  if (name == "float") {
    if (value.is_number()) return Value(value.as_number());
    try {
      return Value(std::stod(value.to_output()));
    } catch (const std::exception&) {
      return arg(args, kwargs, 0, "default", Value(0.0));
    }
  }
  if (name == "abs") {
    if (value.kind() == Value::Kind::kInt) {
      if (value.as_int() == INT64_MIN) fail_input("abs({}) overflows", value.as_int());
      return Value(static_cast<int64_t>(std::llabs(value.as_int())));
    }
    return Value(std::fabs(value.as_number()));
  }
  if (name == "unique") {
    ValueList out;
    const ValueList items = as_list(value);
    // Pairwise comparison: quadratic, so bounded (chat templates dedupe a handful of names).
    constexpr size_t kMaxUnique = 10'000;
    if (items.size() > kMaxUnique) fail_input("unique over more than {} items", kMaxUnique);
    for (const Value& v : items)
      if (std::none_of(out.begin(), out.end(), [&](const Value& o) { return o.equals(v); }))
        out.push_back(v);
    return Value(out);
  }
  if (name == "map") {
    const Value attr = arg(args, kwargs, 99, "attribute");
    ValueList out;
    for (const Value& v : as_list(value))
      out.push_back(attr.is_string()
                        ? attribute(v, attr.as_string())
                        : apply_filter(required(args, 0, "map").to_output(), v, {}, {}));
    return Value(out);
  }
  if (name == "selectattr" || name == "rejectattr") {
    const bool select = name == "selectattr";
    ValueList out;
    for (const Value& v : as_list(value)) {
      const Value a = attribute(v, required(args, 0, name.c_str()).to_output());
      const bool pass = args.size() > 1 ? apply_test(args[1].to_output(), a,
                                                     ValueList(args.begin() + 2, args.end()))
                                        : a.truthy();
      if (pass == select) out.push_back(v);
    }
    return Value(out);
  }
  if (name == "select" || name == "reject") {
    const bool select = name == "select";
    ValueList out;
    for (const Value& v : as_list(value)) {
      const bool pass = args.empty() ? v.truthy()
                                     : apply_test(args[0].to_output(), v,
                                                  ValueList(args.begin() + 1, args.end()));
      if (pass == select) out.push_back(v);
    }
    return Value(out);
  }
  if (name == "dictsort") {
    if (!value.is_dict()) fail_input("dictsort needs a dict");
    ValueList items = items_of(value);
    std::stable_sort(items.begin(), items.end(), [](const Value& a, const Value& b) {
      return a.list()[0].as_string() < b.list()[0].as_string();
    });
    return Value(items);
  }
  fail_input("unknown filter '{}'", name);
}

bool apply_test(const std::string& name, const Value& value, const ValueList& args) {
  using K = Value::Kind;
  if (name == "defined") return !value.is_undefined();
  if (name == "undefined") return value.is_undefined();
  if (name == "none") return value.is_none();
  if (name == "string") return value.is_string();
  if (name == "number") return value.is_number();
  if (name == "integer") return value.kind() == K::kInt;
  if (name == "float") return value.kind() == K::kFloat;
  if (name == "boolean") return value.kind() == K::kBool;
  if (name == "true") return value.kind() == K::kBool && value.as_bool();
  if (name == "false") return value.kind() == K::kBool && !value.as_bool();
  if (name == "mapping") return value.is_dict();
  if (name == "sequence") return value.is_list() || value.is_string() || value.is_dict();
  if (name == "iterable") return value.is_list() || value.is_string() || value.is_dict();
  if (name == "callable") return value.kind() == K::kFunction;
  if (name == "odd") return value.kind() == K::kInt && value.as_int() % 2 != 0;
  if (name == "even") return value.kind() == K::kInt && value.as_int() % 2 == 0;
  if (name == "lower")
    return value.is_string() && map_ascii(value.as_string(), ::tolower) == value.as_string();
  if (name == "upper")
    return value.is_string() && map_ascii(value.as_string(), ::toupper) == value.as_string();
  if (name == "equalto" || name == "eq" || name == "sameas")
    return !args.empty() && value.equals(args[0]);
  if (name == "ne") return args.empty() || !value.equals(args[0]);
  if (name == "in") {
    if (args.empty()) return false;
    for (const Value& v : as_list(args[0]))
      if (v.equals(value)) return true;
    return false;
  }
  fail_input("unknown test '{}'", name);
}

std::optional<Value> bound_method(const Value& value, const std::string& name) {
  if (value.is_string()) {
    const std::string s = value.as_string();
    if (name == "startswith" || name == "endswith") {
      const bool start = name == "startswith";
      return Value(Function([s, start](const ValueList& args, const KwArgs&) {
        const auto test = [&](const Value& p) {
          const std::string& x = p.as_string();
          return start ? s.starts_with(x) : s.ends_with(x);
        };
        if (args.empty()) fail_input("startswith/endswith needs an argument");
        if (args[0].is_list())
          return Value(std::any_of(args[0].list().begin(), args[0].list().end(), test));
        return Value(test(args[0]));
      }));
    }
    if (name == "strip" || name == "lstrip" || name == "rstrip") {
      const bool left = name != "rstrip", right = name != "lstrip";
      return Value(Function([s, left, right](const ValueList& args, const KwArgs&) {
        return Value(strip(s, args.empty() ? Value() : args[0], left, right));
      }));
    }
    if (name == "split" || name == "rsplit") {
      return Value(Function([s](const ValueList& args, const KwArgs& kwargs) {
        const Value max = arg(args, kwargs, 1, "maxsplit", Value(-1));
        return Value(split(s, arg(args, kwargs, 0, "sep"), max.as_int()));
      }));
    }
    if (name == "upper" || name == "lower" || name == "title" || name == "capitalize") {
      return Value(Function([s, name](const ValueList&, const KwArgs&) {
        if (name == "title") {
          std::string out = s;
          bool word_start = true;
          for (char& c : out) {
            if (std::isalpha(static_cast<unsigned char>(c))) {
              c = static_cast<char>(word_start ? std::toupper(c) : std::tolower(c));
              word_start = false;
            } else {
              word_start = true;
            }
          }
          return Value(out);
        }
        return apply_filter(name, Value(s), {}, {});
      }));
    }
    if (name == "replace") {
      return Value(Function([s](const ValueList& args, const KwArgs& kwargs) {
        return apply_filter("replace", Value(s), args, kwargs);
      }));
    }
    if (name == "find") {
      return Value(Function([s](const ValueList& args, const KwArgs&) {
        const size_t pos = s.find(required(args, 0, "find").to_output());
        return Value(pos == std::string::npos ? int64_t{-1} : static_cast<int64_t>(pos));
      }));
    }
    if (name == "format") {
      return Value(Function([s](const ValueList& args, const KwArgs&) {
        std::string out;
        size_t next_arg = 0;
        for (size_t i = 0; i < s.size(); ++i) {
          if (s[i] == '{' && i + 1 < s.size() && s[i + 1] == '}') {
            if (next_arg < args.size()) out += args[next_arg++].to_output();
            check_size(out.size());
            ++i;
          } else {
            out += s[i];
          }
        }
        return Value(out);
      }));
    }
  }
  if (value.is_dict()) {
    if (name == "items")
      return Value(
          Function([value](const ValueList&, const KwArgs&) { return Value(items_of(value)); }));
    if (name == "keys" || name == "values") {
      const bool keys = name == "keys";
      return Value(Function([value, keys](const ValueList&, const KwArgs&) {
        ValueList out;
        for (const auto& [k, v] : value.dict()) out.push_back(keys ? Value(k) : v);
        return Value(out);
      }));
    }
    if (name == "get") {
      return Value(Function([value](const ValueList& args, const KwArgs&) {
        const Value v = value.get(required(args, 0, "get").to_output());
        if (v.is_undefined()) return args.size() > 1 ? args[1] : Value::none();
        return v;
      }));
    }
  }
  if (value.is_list() && name == "append") {
    return Value(Function([value](const ValueList& args, const KwArgs&) {
      value.append(required(args, 0, "append"));
      return Value::none();
    }));
  }
  return std::nullopt;
}

}  // namespace handoff::text::jinja
