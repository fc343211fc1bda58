#include "handoff/text/glm_tool_call_parser.h"

#include <set>

namespace handoff::text {
namespace {

using tool_scan::Cursor;
using tool_scan::Match;
using tool_scan::Step;
using tool_scan::trim;

constexpr std::string_view kCallBegin = "<tool_call>";
constexpr std::string_view kCallEnd = "</tool_call>";
constexpr std::string_view kKeyBegin = "<arg_key>";
constexpr std::string_view kKeyEnd = "</arg_key>";
constexpr std::string_view kValueBegin = "<arg_value>";
constexpr std::string_view kValueEnd = "</arg_value>";

class GlmParser : public tool_scan::BlockParser {
 public:
  explicit GlmParser(const nlohmann::json& tools) : BlockParser(std::string(kCallBegin), true) {
    // (function, parameter) pairs whose schema type is "string": their values stay text.
    if (!tools.is_array()) return;
    for (const auto& tool : tools) {
      if (!tool.is_object() || !tool.contains("function") || !tool["function"].is_object())
        continue;
      const auto& f = tool["function"];
      if (!f.contains("name") || !f["name"].is_string()) continue;
      const auto name = f["name"].get<std::string>();
      if (!f.contains("parameters") || !f["parameters"].is_object()) continue;
      const auto& props = f["parameters"].value("properties", nlohmann::json::object());
      if (!props.is_object()) continue;
      for (const auto& [key, schema] : props.items())
        if (schema.is_object() && schema.value("type", nlohmann::json()) == "string")
          string_params_.insert({name, key});
    }
  }

 protected:
  Step next(std::string_view s) const override {
    Cursor c{s};
    switch (c.literal(kCallBegin)) {
      case Match::kPartial:
        return {};
      case Match::kNo:
        return {Step::kEnd, 0, "", ""};  // the calls are over: content again
      case Match::kYes:
        break;
    }
    // The name ends at a newline or at the first tag after it.
    const std::string_view rest = s.substr(c.pos);
    size_t name_end = std::string_view::npos;
    for (std::string_view delimiter : {std::string_view("\n"), kKeyBegin, kCallEnd})
      name_end = std::min(name_end, rest.find(delimiter));
    if (name_end == std::string_view::npos) return {};
    const std::string name(trim(rest.substr(0, name_end)));
    if (name.empty()) return {Step::kInvalid, 0, "", ""};
    c.pos += name_end;
    nlohmann::ordered_json arguments = nlohmann::ordered_json::object();
    // An unfinished call: its name, and its arguments as far as they are certain (the value of
    // a string parameter streams as it is written; other values may turn out JSON or text).
    const auto more = [&](const std::string* key = nullptr, std::string_view value = {}) {
      return Step{Step::kNeedMore, 0, name,
                  tool_scan::partial_object(arguments, key, value, kValueEnd)};
    };
    while (true) {
      c.skip_space();
      if (c.at_end()) return more();
      const Match end = c.literal(kCallEnd);
      if (end == Match::kYes) break;
      if (end == Match::kPartial) return more();
      const Match key_begin = c.literal(kKeyBegin);
      if (key_begin == Match::kPartial) return more();
      if (key_begin == Match::kNo) return {Step::kInvalid, 0, "", ""};
      std::string key, value;
      if (c.until(kKeyEnd, key) != Match::kYes) return more();
      key = std::string(trim(key));
      c.skip_space();
      const Match value_begin = c.literal(kValueBegin);
      if (value_begin != Match::kYes)
        return value_begin == Match::kNo ? Step{Step::kInvalid, 0, "", ""} : more();
      const bool text = string_params_.count({name, key}) > 0;
      if (c.until(kValueEnd, value) != Match::kYes)
        return text ? more(&key, s.substr(c.pos)) : more();
      // A parameter given twice keeps its first value (what was streamed of it stays true).
      if (arguments.contains(key)) continue;
      if (!text) {
        auto parsed = nlohmann::ordered_json::parse(value, nullptr, false);
        if (!parsed.is_discarded()) {
          arguments[key] = std::move(parsed);
          continue;
        }
      }
      arguments[key] = value;
    }
    return {Step::kCall, c.pos, name, tool_scan::dump_object(arguments)};
  }

 private:
  std::set<std::pair<std::string, std::string>> string_params_;
};

}  // namespace

std::unique_ptr<ToolCallParser> make_glm_tool_call_parser(const nlohmann::json& tools) {
  return std::make_unique<GlmParser>(tools);
}

}  // namespace handoff::text
