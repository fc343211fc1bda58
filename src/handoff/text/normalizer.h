#pragma once
// Normalizers from tokenizer.json: only the simple, table-free ones are supported; anything else
// is rejected at load time rather than silently producing different ids.
#include <functional>
#include <nlohmann/json.hpp>
#include <string>

namespace handoff::text {

using Normalizer = std::function<std::string(std::string)>;

// Supported: null, Sequence, Replace (String pattern), Prepend, Lowercase (ASCII), Strip.
Normalizer make_normalizer(const nlohmann::json& config);

}  // namespace handoff::text
