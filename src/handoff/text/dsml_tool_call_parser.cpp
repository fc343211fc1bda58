#include "handoff/text/dsml_tool_call_parser.h"

namespace handoff::text {
namespace {

using tool_scan::Cursor;
using tool_scan::Match;
using tool_scan::Step;

constexpr std::string_view kBlockBegin = "<｜DSML｜function_calls>";
constexpr std::string_view kBlockEnd = "</｜DSML｜function_calls>";
constexpr std::string_view kInvokeBegin = "<｜DSML｜invoke name=\"";
constexpr std::string_view kInvokeEnd = "</｜DSML｜invoke>";
constexpr std::string_view kParamBegin = "<｜DSML｜parameter name=\"";
constexpr std::string_view kParamEnd = "</｜DSML｜parameter>";

class DsmlParser : public tool_scan::BlockParser {
 public:
  DsmlParser() : BlockParser(std::string(kBlockBegin), false) {}

 protected:
  Step next(std::string_view s) const override {
    Cursor c{s};
    if (auto step = tool_scan::block_end_or_call(c, kBlockEnd, kInvokeBegin)) return *step;
    std::string name;
    if (c.until("\">", name) != Match::kYes) return {};
    if (name.empty()) return {Step::kInvalid, 0, "", ""};
    nlohmann::ordered_json arguments = nlohmann::ordered_json::object();
    // An unfinished call: its name, and its arguments as far as they are certain (a string
    // value streams as it is written).
    const auto more = [&](const std::string* key = nullptr, std::string_view value = {}) {
      return Step{Step::kNeedMore, 0, name,
                  tool_scan::partial_object(arguments, key, value, kParamEnd)};
    };
    while (true) {
      c.skip_space();
      if (c.at_end()) return more();
      const Match end = c.literal(kInvokeEnd);
      if (end == Match::kYes) break;
      if (end == Match::kPartial) return more();
      const Match param = c.literal(kParamBegin);
      if (param == Match::kPartial) return more();
      if (param == Match::kNo) return {Step::kInvalid, 0, "", ""};
      std::string key, kind, value;
      if (c.until("\" string=\"", key) != Match::kYes) return more();
      if (c.until("\">", kind) != Match::kYes) return more();
      if (c.until(kParamEnd, value) != Match::kYes)
        return kind == "true" ? more(&key, s.substr(c.pos)) : more();
      if (kind != "true" && kind != "false") return {Step::kInvalid, 0, "", ""};
      // A parameter given twice keeps its first value (what was streamed of it stays true).
      if (arguments.contains(key)) continue;
      if (kind == "true") {
        arguments[key] = value;
      } else {
        // JSON as the format asks; a value that is not JSON is kept as the string written.
        arguments[key] = nlohmann::ordered_json::parse(value, nullptr, false);
        if (arguments[key].is_discarded()) arguments[key] = value;
      }
    }
    return {Step::kCall, c.pos, name, tool_scan::dump_object(arguments)};
  }
};

}  // namespace

std::unique_ptr<ToolCallParser> make_dsml_tool_call_parser() {
  return std::make_unique<DsmlParser>();
}

}  // namespace handoff::text
