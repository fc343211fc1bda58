// Tool-call and reasoning parsers: every family's format, fed whole, split in two at every byte,
// and one byte at a time, must give the same content, reasoning and calls.
#include <gtest/gtest.h>

#include "delta_collector.h"
#include "handoff/error.h"
#include "handoff/text/chat_output_parser.h"
#include "handoff/text/chat_template.h"
#include "stream_cuts.h"
#include "text_test_support.h"

namespace handoff::text {
namespace {

using Result = handoff::testing::CollectedOutput;
using Collector = handoff::testing::DeltaCollector;

struct ParserSetup {
  ToolCallFormat tools = ToolCallFormat::kNone;
  ReasoningFormat reasoning = ReasoningFormat::kNone;
  bool starts_in_reasoning = false;
  nlohmann::json tool_defs = nullptr;
};

ChatOutputParser make(const ParserSetup& s) {
  return ChatOutputParser(s.reasoning == ReasoningFormat::kNone
                              ? nullptr
                              : std::make_unique<ReasoningParser>(s.starts_in_reasoning),
                          make_tool_call_parser(s.tools, s.tool_defs));
}

Collector collect_pieces(const ParserSetup& s, const std::vector<std::string_view>& pieces) {
  auto parser = make(s);
  Collector c;
  for (auto p : pieces) c.add(parser.push(p));
  c.add(parser.finish());
  EXPECT_EQ(c.breach, "") << "the delta contract";
  return c;
}
Result parse_pieces(const ParserSetup& s, const std::vector<std::string_view>& pieces) {
  return collect_pieces(s, pieces).r;
}

void expect_same(const Result& got, const Result& want, const std::string& how) {
  EXPECT_EQ(got.content, want.content) << how;
  EXPECT_EQ(got.reasoning, want.reasoning) << how;
  EXPECT_EQ(got.calls, want.calls) << how;
}

// The whole text at once, every split in two, and byte by byte.
void expect_parses(const ParserSetup& s, std::string_view text, const Result& want) {
  expect_same(parse_pieces(s, {text}), want, "whole");
  for (size_t i = 0; i <= text.size(); ++i)
    expect_same(parse_pieces(s, {text.substr(0, i), text.substr(i)}), want,
                "split at byte " + std::to_string(i));
  expect_same(parse_pieces(s, handoff::testing::bytes_of(text)), want, "byte by byte");
}

const nlohmann::json kTools = nlohmann::json::parse(R"([
  {"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object",
    "properties": {"city": {"type": "string"}, "zip": {"type": "string"}, "days": {"type": "integer"}}}}},
  {"type": "function", "function": {"name": "run", "parameters": {"type": "object",
    "properties": {"flags": {"type": "array"}}}}}])");

TEST(ToolCallParser, DeepSeekV3) {
  const ParserSetup s{ToolCallFormat::kDeepSeekV3};
  expect_parses(
      s,
      "Let me check.\n\n<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>"
      "get_weather\n```json\n{\"city\": \"Paris\"}\n```<｜tool▁call▁end｜>\n"
      "<｜tool▁call▁begin｜>function<｜tool▁sep｜>get_time\n```json\n{\"tz\": \"東京\"}\n```"
      "<｜tool▁call▁end｜><｜tool▁calls▁end｜>",
      {"Let me check.",
       "",
       {{"get_weather", R"({"city": "Paris"})"}, {"get_time", R"({"tz": "東京"})"}}});
  // The npm template's own single-call form (no closing block token) at the end of the output.
  expect_parses(
      s,
      "<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>get_weather\n```json"
      "\n{}\n```<｜tool▁call▁end｜>",
      {"", "", {{"get_weather", "{}"}}});
}

TEST(ToolCallParser, DeepSeekV31) {
  const ParserSetup s{ToolCallFormat::kDeepSeekV31};
  expect_parses(
      s,
      "<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>get_weather<｜tool▁sep｜>{\"city\": "
      "\"Paris\"}<｜tool▁call▁end｜><｜tool▁call▁begin｜>run<｜tool▁sep｜>{\"flags\": "
      "[\"-a\"]}<｜tool▁call▁end｜><｜tool▁calls▁end｜> trailing",
      {"trailing", "", {{"get_weather", R"({"city": "Paris"})"}, {"run", R"({"flags": ["-a"]})"}}});
}

TEST(ToolCallParser, DeepSeekV32Dsml) {
  const ParserSetup s{ToolCallFormat::kDeepSeekV32};
  expect_parses(
      s,
      "Checking.\n\n<｜DSML｜function_calls>\n<｜DSML｜invoke name=\"get_weather\">\n"
      "<｜DSML｜parameter name=\"city\" string=\"true\">Paris</｜DSML｜parameter>\n"
      "<｜DSML｜parameter name=\"days\" string=\"false\">3</｜DSML｜parameter>\n"
      "</｜DSML｜invoke>\n<｜DSML｜invoke name=\"run\">\n"
      "<｜DSML｜parameter name=\"flags\" string=\"false\">[\"-a\", 1]</｜DSML｜parameter>\n"
      "<｜DSML｜parameter name=\"note\" string=\"true\">a \"quoted\" "
      "<b>東京</b></｜DSML｜parameter>\n"
      "</｜DSML｜invoke>\n</｜DSML｜function_calls>",
      {"Checking.",
       "",
       {{"get_weather", R"({"city":"Paris","days":3})"},
        {"run", R"({"flags":["-a",1],"note":"a \"quoted\" <b>東京</b>"})"}}});
}

TEST(ToolCallParser, Glm45BothLayouts) {
  const ParserSetup s{ToolCallFormat::kGlm45, ReasoningFormat::kNone, false, kTools};
  // GLM-4.5 / 4.6: one part per line; string parameters stay text even when they look like JSON.
  expect_parses(s,
                "<tool_call>get_weather\n<arg_key>city</arg_key>\n<arg_value>Paris</arg_value>\n"
                "<arg_key>zip</arg_key>\n<arg_value>75001</arg_value>\n<arg_key>days</arg_key>\n"
                "<arg_value>3</arg_value>\n</tool_call>",
                {"", "", {{"get_weather", R"({"city":"Paris","zip":"75001","days":3})"}}});
  // GLM-4.7 / 5: no newlines; two calls; an untyped value that is not JSON is a string.
  expect_parses(
      s,
      "Sure.<tool_call>run<arg_key>flags</arg_key><arg_value>[\"-l\"]</arg_value>"
      "<arg_key>x</arg_key><arg_value>not json</arg_value></tool_call>\n"
      "<tool_call>get_weather<arg_key>city</arg_key><arg_value>東京</arg_value></tool_call>",
      {"Sure.",
       "",
       {{"run", R"({"flags":["-l"],"x":"not json"})"}, {"get_weather", R"({"city":"東京"})"}}});
}

TEST(ToolCallParser, TextThatOnlyLooksLikeACallIsContent) {
  for (auto f : {ToolCallFormat::kDeepSeekV3, ToolCallFormat::kDeepSeekV31,
                 ToolCallFormat::kDeepSeekV32, ToolCallFormat::kGlm45}) {
    const ParserSetup s{f, ReasoningFormat::kNone, false, kTools};
    // '<' and marker prefixes that never complete.
    expect_parses(s, "a < b <tool <｜tool▁calls <｜DSML｜ end <",
                  {"a < b <tool <｜tool▁calls <｜DSML｜ end <", "", {}});
  }
  // A block that is not the format: given back as written.
  expect_parses(ParserSetup{ToolCallFormat::kDeepSeekV31}, "x<｜tool▁calls▁begin｜>oops</b>",
                {"x<｜tool▁calls▁begin｜>oops</b>", "", {}});
  expect_parses(ParserSetup{ToolCallFormat::kDeepSeekV32}, "<｜DSML｜function_calls>\n<p>hi</p>",
                {"<｜DSML｜function_calls>\n<p>hi</p>", "", {}});
  // A call cut off by max_tokens: its name was streamed, its text is shown as content.
  expect_parses(ParserSetup{ToolCallFormat::kGlm45}, "<tool_call>get_weather\n<arg_key>city",
                {"<tool_call>get_weather\n<arg_key>city", "", {{"get_weather", ""}}});
}

// Arguments stream as the model writes them: fed token by token (here: byte by byte), a call's
// arguments arrive in many pieces that add up to the whole, in every format; and a value given
// twice keeps its first value, so what was streamed of it stays true.
TEST(ToolCallParser, ArgumentsStreamIncrementally) {
  const std::pair<ToolCallFormat, std::string> calls[] = {
      {ToolCallFormat::kDeepSeekV3,
       "<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>get_weather\n```json\n"
       "{\"city\": \"Paris `x`\", \"days\": 3}\n```<｜tool▁call▁end｜><｜tool▁calls▁end｜>"},
      {ToolCallFormat::kDeepSeekV31,
       "<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>get_weather<｜tool▁sep｜>{\"city\": \"a "
       "<｜tool\"}"
       "  <｜tool▁call▁end｜><｜tool▁calls▁end｜>"},
      {ToolCallFormat::kDeepSeekV32,
       "<｜DSML｜function_calls>\n<｜DSML｜invoke name=\"get_weather\">\n<｜DSML｜parameter "
       "name=\"city\" string=\"true\">東京 \"q\" \xE2\x82 </｜DSML｜param</｜DSML｜parameter>\n"
       "<｜DSML｜parameter name=\"days\" string=\"false\">[3]</｜DSML｜parameter>\n"
       "<｜DSML｜parameter name=\"city\" string=\"true\">again</｜DSML｜parameter>\n"
       "</｜DSML｜invoke>\n</｜DSML｜function_calls>"},
      {ToolCallFormat::kGlm45,
       "<tool_call>get_weather<arg_key>city</arg_key><arg_value>東京 </arg_v</arg_value>"
       "<arg_key>days</arg_key><arg_value>3</arg_value><arg_key>city</arg_key><arg_value>x"
       "</arg_value></tool_call>"},
  };
  for (const auto& [f, text] : calls) {
    const ParserSetup s{f, ReasoningFormat::kNone, false, kTools};
    const Result whole = parse_pieces(s, {text});
    ASSERT_EQ(whole.calls.size(), 1u) << text;
    EXPECT_TRUE(nlohmann::json::parse(whole.calls[0].arguments).is_object()) << text;
    const Collector streamed = collect_pieces(s, handoff::testing::bytes_of(text));
    expect_same(streamed.r, whole, "byte by byte");
    EXPECT_GE(streamed.argument_pieces, 5u) << text;
    EXPECT_EQ(streamed.ended, std::vector<bool>{true}) << text;
  }
  const Result dsml = parse_pieces(ParserSetup{ToolCallFormat::kDeepSeekV32}, {calls[2].second});
  EXPECT_EQ(nlohmann::json::parse(dsml.calls[0].arguments)["city"],
            "東京 \"q\" \xEF\xBF\xBD </｜DSML｜param");
  const Result glm =
      parse_pieces(ParserSetup{ToolCallFormat::kGlm45, ReasoningFormat::kNone, false, kTools},
                   {calls[3].second});
  EXPECT_EQ(glm.calls[0].arguments, R"({"city":"東京 </arg_v","days":3})");
}

TEST(ReasoningParser, ThinkBlockIsSeparated) {
  for (auto f : {ReasoningFormat::kDeepSeekR1, ReasoningFormat::kGlm45}) {
    expect_parses(ParserSetup{ToolCallFormat::kNone, f, false},
                  "\n<think>\nLet me add: 2 + 2 = 4.\n</think>\n\nThe answer is 4.",
                  {"The answer is 4.", "\nLet me add: 2 + 2 = 4.\n", {}});
    // The prompt already opened the block (thinking on).
    expect_parses(ParserSetup{ToolCallFormat::kNone, f, true}, "hmm <b> </think>Four.",
                  {"Four.", "hmm <b> ", {}});
    // Cut while thinking: all of it is reasoning.
    expect_parses(ParserSetup{ToolCallFormat::kNone, f, true}, "still </thin",
                  {"", "still </thin", {}});
    // No think block at all: all content.
    expect_parses(ParserSetup{ToolCallFormat::kNone, f, false}, " <thought> plain",
                  {" <thought> plain", "", {}});
  }
}

TEST(ReasoningParser, ToolCallsAfterReasoningAreParsedAndInsideItAreNot) {
  const ParserSetup s{ToolCallFormat::kGlm45, ReasoningFormat::kGlm45, true, kTools};
  expect_parses(
      s,
      "I could <tool_call>x</tool_call> here.</think>\n<tool_call>get_weather"
      "<arg_key>city</arg_key><arg_value>Paris</arg_value></tool_call>",
      {"", "I could <tool_call>x</tool_call> here.", {{"get_weather", R"({"city":"Paris"})"}}});
  const ParserSetup d{ToolCallFormat::kDeepSeekV31, ReasoningFormat::kDeepSeekR1, false};
  expect_parses(d,
                "<think>need it</think>Checking.<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>f"
                "<｜tool▁sep｜>{}<｜tool▁call▁end｜><｜tool▁calls▁end｜>",
                {"Checking.", "need it", {{"f", "{}"}}});
}

TEST(ToolCallParser, NamesAndDetectionFromTemplates) {
  for (auto f : {ToolCallFormat::kNone, ToolCallFormat::kDeepSeekV3, ToolCallFormat::kDeepSeekV31,
                 ToolCallFormat::kDeepSeekV32, ToolCallFormat::kGlm45})
    EXPECT_EQ(tool_call_format_named(tool_call_format_name(f)), f);
  EXPECT_THROW(tool_call_format_named("hermes"), InputError);
  for (auto f : {ReasoningFormat::kNone, ReasoningFormat::kDeepSeekR1, ReasoningFormat::kGlm45})
    EXPECT_EQ(reasoning_format_named(reasoning_format_name(f)), f);
  EXPECT_THROW(reasoning_format_named("qwen3"), InputError);

  const auto dir = std::filesystem::path(HANDOFF_TEST_DATA) / "templates";
  const auto source = [&](const char* name) {
    return handoff::testing::read_file(dir / name / "chat_template.jinja");
  };
  EXPECT_EQ(detect_tool_call_format(source("deepseek_v31")), ToolCallFormat::kDeepSeekV31);
  EXPECT_EQ(detect_tool_call_format(source("deepseek_v32")), ToolCallFormat::kDeepSeekV32);
  EXPECT_EQ(detect_tool_call_format(source("glm46")), ToolCallFormat::kGlm45);
  EXPECT_EQ(detect_tool_call_format(source("glm47_flash")), ToolCallFormat::kGlm45);
  EXPECT_EQ(detect_reasoning_format(source("deepseek_v31")), ReasoningFormat::kDeepSeekR1);
  EXPECT_EQ(detect_reasoning_format(source("deepseek_v32")), ReasoningFormat::kDeepSeekR1);
  EXPECT_EQ(detect_reasoning_format(source("glm46")), ReasoningFormat::kGlm45);
  EXPECT_EQ(detect_reasoning_format(source("glm47_flash")), ReasoningFormat::kGlm45);
  if (!handoff::testing::require_node_modules()) return;
  const auto v3 = ChatTemplate::load(handoff::testing::deepseek_v3_dir().string());
  EXPECT_EQ(detect_tool_call_format(v3->source()), ToolCallFormat::kDeepSeekV3);
  EXPECT_EQ(detect_reasoning_format(v3->source()), ReasoningFormat::kNone);
}

TEST(ReasoningParser, PromptOpensReasoning) {
  EXPECT_TRUE(prompt_opens_reasoning("<｜Assistant｜><think>"));
  EXPECT_TRUE(prompt_opens_reasoning("<|assistant|><think>\n"));
  EXPECT_FALSE(prompt_opens_reasoning("<｜Assistant｜><think></think>"));
  EXPECT_FALSE(prompt_opens_reasoning("<|assistant|>"));
}

}  // namespace
}  // namespace handoff::text
