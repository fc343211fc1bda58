// DeepSeek-V3 and DeepSeek-V3.1 tool calls: a block of calls between special tokens, each call's
// name and JSON arguments split by <｜tool▁sep｜> (V3 also names the call's type first and
// fences the arguments as a json code block).
#include "handoff/text/deepseek_tool_call_parser.h"

#include <algorithm>

namespace handoff::text {
namespace {

using tool_scan::Cursor;
using tool_scan::Match;
using tool_scan::Step;
using tool_scan::trim;

constexpr std::string_view kCallsBegin = "<｜tool▁calls▁begin｜>";
constexpr std::string_view kCallsEnd = "<｜tool▁calls▁end｜>";
constexpr std::string_view kCallBegin = "<｜tool▁call▁begin｜>";
constexpr std::string_view kCallEnd = "<｜tool▁call▁end｜>";
constexpr std::string_view kSep = "<｜tool▁sep｜>";

// The arguments of a V3 call: a ```json fenced block (the fence is optional).
std::string unfence(std::string_view body) {
  body = trim(body);
  if (body.substr(0, 7) == "```json")
    body.remove_prefix(7);
  else if (body.substr(0, 3) == "```")
    body.remove_prefix(3);
  if (body.size() >= 3 && body.substr(body.size() - 3) == "```") body.remove_suffix(3);
  body = trim(body);
  return body.empty() ? "{}" : std::string(body);
}

class DeepSeekParser : public tool_scan::BlockParser {
 public:
  explicit DeepSeekParser(bool v31) : BlockParser(std::string(kCallsBegin), false), v31_(v31) {}

 protected:
  Step next(std::string_view s) const override {
    Cursor c{s};
    if (auto step = tool_scan::block_end_or_call(c, kCallsEnd, kCallBegin)) return *step;
    std::string head;
    if (c.until(kSep, head) != Match::kYes) return {};
    const size_t body_start = c.pos;
    std::string body;
    const bool complete = c.until(kCallEnd, body) == Match::kYes;
    std::string name;
    if (v31_) {
      name = trim(head);
    } else {
      // V3: the type ("function") before the separator, the name on the line after it.
      const std::string_view text = complete ? std::string_view(body) : s.substr(c.pos);
      const size_t newline = text.find('\n');
      if (newline == std::string_view::npos && !complete) return {};
      name = trim(text.substr(0, newline));
      if (complete) body = newline == std::string_view::npos ? "" : body.substr(newline + 1);
    }
    if (name.empty()) return {Step::kInvalid, 0, "", ""};
    if (!complete) {
      std::string_view rest = s.substr(body_start);
      if (!v31_) rest.remove_prefix(std::min(rest.size(), rest.find('\n') + 1));
      return {Step::kNeedMore, 0, name, partial_arguments(rest)};
    }
    std::string arguments = v31_ ? std::string(trim(body)) : unfence(body);
    if (arguments.empty()) arguments = "{}";
    return {Step::kCall, c.pos, name, arguments};
  }

 private:
  // The certain prefix of the arguments of an unfinished call, from the text after the name:
  // what unfence / trim will keep of it whatever follows (the end that could begin the end
  // marker, trailing whitespace and, for V3, backticks that could be the closing fence, wait).
  std::string partial_arguments(std::string_view body) const {
    body.remove_suffix(tool_scan::partial_suffix(body, kCallEnd));
    body = trim(body);
    if (!v31_) {
      constexpr std::string_view kFence = "```json";
      if (body.substr(0, kFence.size()) == kFence)
        body.remove_prefix(kFence.size());
      else if (kFence.substr(0, body.size()) == body)
        return "";  // could still become the opening fence
      else if (body.substr(0, 3) == "```")
        body.remove_prefix(3);
      body = trim(body);
      while (!body.empty() && body.back() == '`') {
        body.remove_suffix(1);
        body = trim(body);
      }
    }
    return std::string(body);
  }

  bool v31_;
};

}  // namespace

std::unique_ptr<ToolCallParser> make_deepseek_tool_call_parser(bool v31) {
  return std::make_unique<DeepSeekParser>(v31);
}

}  // namespace handoff::text
