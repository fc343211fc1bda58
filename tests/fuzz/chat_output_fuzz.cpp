// Fuzzes the reasoning and tool-call parsers with model output, which a user can steer with the
// prompt. The first byte picks the parsers (tool-call format, reasoning format, whether the
// output starts inside a thinking block), the second how the text is cut, the rest is the text.
// The text is parsed whole, one byte at a time and in pieces of varying size. Every run must keep
// the delta contract (a call's first delta names it, nothing follows its end, indices go up from
// 0), and all runs must agree on the content, the reasoning and the completed calls. A call that
// never ends may differ: once its name is streamed it cannot be taken back, and the server shows
// only completed calls (the text of one cut short is in the content).
#include <cstdlib>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "fuzz_support.h"
#include "handoff/text/chat_output_parser.h"

namespace {

using handoff::text::ParsedOutput;
using handoff::text::ReasoningFormat;
using handoff::text::ToolCallFormat;

struct Call {
  std::string name, arguments;
  bool ended = false;
  bool operator==(const Call&) const = default;
};

struct Result {
  std::string content, reasoning;
  std::vector<Call> calls;
  void add(ParsedOutput&& out) {
    content += out.content;
    reasoning += out.reasoning;
    for (auto& d : out.calls) {
      if (d.index == calls.size()) {
        if (d.name.empty()) std::abort();  // a call's first delta names it
        calls.push_back({d.name, "", false});
      } else if (d.index + 1 != calls.size() || !d.name.empty()) {
        std::abort();  // an earlier call after a later one, or a name sent twice
      }
      if (calls.back().ended) std::abort();  // a delta after the call's end
      calls.back().arguments += d.arguments;
      calls.back().ended = d.end;
    }
  }
  // The completed calls are a prefix: after an unfinished one nothing is parsed as a call.
  std::vector<Call> completed() const {
    std::vector<Call> done;
    for (const auto& c : calls) {
      if (!c.ended) break;
      done.push_back(c);
    }
    return done;
  }
};

const nlohmann::json& tools() {
  static const nlohmann::json t = nlohmann::json::parse(R"([
    {"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object",
      "properties": {"city": {"type": "string"}, "days": {"type": "integer"}}}}},
    {"type": "function", "function": {"name": "run", "parameters": {"type": "object",
      "properties": {"flags": {"type": "array"}}}}}])");
  return t;
}

constexpr ToolCallFormat kFormats[] = {ToolCallFormat::kNone, ToolCallFormat::kDeepSeekV3,
                                       ToolCallFormat::kDeepSeekV31, ToolCallFormat::kDeepSeekV32,
                                       ToolCallFormat::kGlm45};
constexpr ReasoningFormat kReasoning[] = {ReasoningFormat::kNone, ReasoningFormat::kDeepSeekR1,
                                          ReasoningFormat::kGlm45};

Result parse(uint8_t setup, const std::vector<std::string_view>& pieces) {
  const ToolCallFormat format = kFormats[setup % 5];
  const ReasoningFormat reasoning = kReasoning[setup / 5 % 3];
  const bool starts_in_reasoning = (setup / 15) % 2 == 1;
  handoff::text::ChatOutputParser parser(
      reasoning == ReasoningFormat::kNone
          ? nullptr
          : std::make_unique<handoff::text::ReasoningParser>(starts_in_reasoning),
      handoff::text::make_tool_call_parser(format, tools()));
  Result r;
  for (auto p : pieces) r.add(parser.push(p));
  r.add(parser.finish());
  return r;
}

void expect_same(const Result& got, const Result& want) {
  if (got.content != want.content || got.reasoning != want.reasoning ||
      got.completed() != want.completed())
    std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 2) return 0;
  const uint8_t setup = data[0];
  const uint32_t cut = data[1];
  const std::string_view text(reinterpret_cast<const char*>(data) + 2, size - 2);
  const Result whole = parse(setup, {text});
  expect_same(parse(setup, handoff::fuzz::bytes_of(text)), whole);
  expect_same(parse(setup, handoff::fuzz::pieces_of(text, cut, 32)), whole);
  return 0;
}
