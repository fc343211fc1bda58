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

#include "../text/delta_collector.h"
#include "../text/stream_cuts.h"
#include "handoff/text/chat_output_parser.h"

namespace {

using handoff::text::ReasoningFormat;
using handoff::text::ToolCallFormat;

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

using handoff::testing::DeltaCollector;

DeltaCollector parse(uint8_t setup, const std::vector<std::string_view>& pieces) {
  const ToolCallFormat format = kFormats[setup % 5];
  const ReasoningFormat reasoning = kReasoning[setup / 5 % 3];
  const bool starts_in_reasoning = (setup / 15) % 2 == 1;
  handoff::text::ChatOutputParser parser(
      reasoning == ReasoningFormat::kNone
          ? nullptr
          : std::make_unique<handoff::text::ReasoningParser>(starts_in_reasoning),
      handoff::text::make_tool_call_parser(format, tools()));
  DeltaCollector c;
  for (auto p : pieces) c.add(parser.push(p));
  c.add(parser.finish());
  if (!c.breach.empty()) std::abort();
  return c;
}

void expect_same(const DeltaCollector& got, const DeltaCollector& want) {
  if (got.r.content != want.r.content || got.r.reasoning != want.r.reasoning ||
      got.completed() != want.completed())
    std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 2) return 0;
  const uint8_t setup = data[0];
  const uint32_t cut = data[1];
  const std::string_view text(reinterpret_cast<const char*>(data) + 2, size - 2);
  const DeltaCollector whole = parse(setup, {text});
  expect_same(parse(setup, handoff::testing::bytes_of(text)), whole);
  expect_same(parse(setup, handoff::testing::pieces_of(text, cut, 32)), whole);
  return 0;
}
