#pragma once
// Filters, tests and methods of built-in types available to templates.
#include <optional>
#include <string>

#include "handoff/text/jinja_value.h"

namespace handoff::text::jinja {

// `value | name(args)`; throws InputError for an unknown filter.
Value apply_filter(const std::string& name, const Value& value, const ValueList& args,
                   const KwArgs& kwargs);
// `value is name(args)`; throws InputError for an unknown test.
bool apply_test(const std::string& name, const Value& value, const ValueList& args);
// `value.name` when it names a method of strings, lists or dicts (e.g. "a".startswith);
// nullopt when it does not.
std::optional<Value> bound_method(const Value& value, const std::string& name);

}  // namespace handoff::text::jinja
