// Forced tool calls: every text a format's grammar accepts, completed by its shortest completion,
// must parse with that format's real parser into exactly one call to an allowed function with a
// JSON-object argument string, and nothing else. Random walks over the accepted bytes check it.
#include "handoff/text/tool_call_grammar.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <random>

#include "handoff/error.h"
#include "handoff/text/chat_output_parser.h"

namespace handoff::text {
namespace {

const std::vector<std::string> kNames = {"get_weather", "get", "get_time", "run-it"};
const ToolCallFormat kFormats[] = {ToolCallFormat::kDeepSeekV3, ToolCallFormat::kDeepSeekV31,
                                   ToolCallFormat::kDeepSeekV32, ToolCallFormat::kGlm45};

struct Parsed {
  std::string content, reasoning;
  std::vector<std::pair<std::string, std::string>> calls;
};

Parsed parse(ToolCallFormat format, const std::string& text, bool reasoning) {
  ChatOutputParser parser(reasoning ? std::make_unique<ReasoningParser>(true) : nullptr,
                          make_tool_call_parser(format, nlohmann::json::array()));
  ParsedOutput out = parser.push(text);
  out.append(parser.finish());
  Parsed p{out.content, out.reasoning, {}};
  for (const auto& d : out.calls) {
    if (!d.name.empty()) p.calls.push_back({d.name, ""});
    if (!p.calls.empty()) p.calls.back().second += d.arguments;
  }
  return p;
}

void expect_one_call(ToolCallFormat format, const std::string& text, bool reasoning,
                     const std::vector<std::string>& names) {
  const Parsed p = parse(format, text, reasoning);
  const std::string how = std::string(tool_call_format_name(format)) + ": " + text;
  EXPECT_EQ(p.content, "") << how;
  EXPECT_EQ(p.reasoning, "") << how;
  ASSERT_EQ(p.calls.size(), 1u) << how;
  EXPECT_NE(std::find(names.begin(), names.end(), p.calls[0].first), names.end()) << how;
  const auto args = nlohmann::json::parse(p.calls[0].second, nullptr, false);
  EXPECT_TRUE(args.is_object()) << how << " -> " << p.calls[0].second;
}

TEST(ToolCallGrammar, ShortestCallParses) {
  for (ToolCallFormat f : kFormats) {
    auto g = ToolCallGrammar::make(f, kNames, "");
    ToolCallGrammarState s(*g);
    const std::string text = s.completion();
    EXPECT_EQ(text.size(), s.completion_cost());
    expect_one_call(f, text, false, {"get"});  // the shortest name
    ASSERT_TRUE(s.feed(text)) << text;
    EXPECT_TRUE(s.done());
    EXPECT_FALSE(s.feed('x'));  // nothing after the call
  }
  // The template's own forms are texts of the grammar.
  const std::pair<ToolCallFormat, std::string> canonical[] = {
      {ToolCallFormat::kDeepSeekV3,
       "<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>get_weather\n```json\n"
       "{\"city\": \"Paris\"}\n```<｜tool▁call▁end｜><｜tool▁calls▁end｜>"},
      {ToolCallFormat::kDeepSeekV31,
       "<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>get_weather<｜tool▁sep｜>{\"city\": "
       "\"Paris\"}<｜tool▁call▁end｜><｜tool▁calls▁end｜>"},
      {ToolCallFormat::kDeepSeekV32,
       "<｜DSML｜function_calls>\n<｜DSML｜invoke name=\"get_weather\">\n<｜DSML｜parameter "
       "name=\"city\" string=\"true\">Paris</｜DSML｜parameter>\n<｜DSML｜parameter name=\"days\" "
       "string=\"false\">3</｜DSML｜parameter>\n</｜DSML｜invoke>\n</｜DSML｜function_calls>"},
      {ToolCallFormat::kGlm45,
       "<tool_call>get_weather<arg_key>city</arg_key><arg_value>Paris</arg_value><arg_key>days"
       "</arg_key><arg_value>3</arg_value></tool_call>"},
  };
  for (const auto& [f, text] : canonical) {
    const auto grammar = ToolCallGrammar::make(f, {"get_weather"}, "");
    ToolCallGrammarState s(*grammar);
    EXPECT_TRUE(s.feed(text)) << text;
    EXPECT_TRUE(s.done()) << text;
    // A name that is not allowed is refused where it departs from the allowed ones.
    const auto other_grammar = ToolCallGrammar::make(f, {"get_time"}, "");
    ToolCallGrammarState other(*other_grammar);
    EXPECT_FALSE(other.feed(text)) << text;
  }
}

TEST(ToolCallGrammar, RefusesWhatWouldBreakTheParser) {
  auto v31 = ToolCallGrammar::make(ToolCallFormat::kDeepSeekV31, {"f"}, "");
  ToolCallGrammarState s(*v31);
  ASSERT_TRUE(s.feed(std::string("<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>f<｜tool▁sep｜>")));
  EXPECT_FALSE(ToolCallGrammarState(s).feed(' '));  // the object starts at once
  ASSERT_TRUE(s.feed(std::string("{\"a\":\"<｜tool▁call▁end")));
  EXPECT_FALSE(s.feed(std::string("｜>")));  // the end marker inside a string
  // DSML: a key has no quotes or tags; a string="false" value is JSON.
  auto dsml = ToolCallGrammar::make(ToolCallFormat::kDeepSeekV32, {"f"}, "");
  ToolCallGrammarState d(*dsml);
  ASSERT_TRUE(
      d.feed(std::string("<｜DSML｜function_calls>\n<｜DSML｜invoke name=\"f\">\n"
                         "<｜DSML｜parameter name=\"k")));
  EXPECT_FALSE(ToolCallGrammarState(d).feed('<'));
  ASSERT_TRUE(d.feed(std::string("\" string=\"false\">")));
  EXPECT_FALSE(ToolCallGrammarState(d).feed('P'));  // Paris is not JSON
  ASSERT_TRUE(d.feed(std::string("12")));
  EXPECT_TRUE(ToolCallGrammarState(d).feed(std::string("</｜DSML｜parameter>\n")));
  // GLM: a leading </think> closes the thinking block the prompt opened.
  auto glm = ToolCallGrammar::make(ToolCallFormat::kGlm45, {"f"}, "</think>");
  ToolCallGrammarState g(*glm);
  EXPECT_FALSE(ToolCallGrammarState(g).feed(std::string("<tool_call>")));
  EXPECT_TRUE(g.in_literal());
  EXPECT_TRUE(g.feed(std::string("</think><tool_call>f<arg_key>")));
  EXPECT_FALSE(g.in_literal());  // a key is free text
  // Bad setups are input errors.
  EXPECT_THROW(ToolCallGrammar::make(ToolCallFormat::kNone, {"f"}, ""), InputError);
  EXPECT_THROW(ToolCallGrammar::make(ToolCallFormat::kGlm45, {}, ""), InputError);
  EXPECT_THROW(ToolCallGrammar::make(ToolCallFormat::kGlm45, {"f", "f"}, ""), InputError);
  EXPECT_THROW(ToolCallGrammar::make(ToolCallFormat::kGlm45, {"a<b"}, ""), InputError);
}

// Random walks: each step picks a random accepted byte (biased to structure so that walks reach
// every part of the grammar), checks the completion's announced length, and finally the walk
// plus its completion must parse into exactly one call.
TEST(ToolCallGrammar, RandomWalksParseIntoOneCall) {
  std::mt19937 rng(7);
  const std::string structural = "{}[]\":,0123456789-.etrufalsn \n<>/\\｜";
  for (ToolCallFormat f : kFormats) {
    for (bool reasoning : {false, true}) {
      auto g = ToolCallGrammar::make(f, kNames, reasoning ? "</think>" : "");
      for (int walk = 0; walk < 150; ++walk) {
        ToolCallGrammarState s(*g);
        std::string text;
        const int steps = std::uniform_int_distribution<int>(0, 160)(rng);
        for (int i = 0; i < steps && !s.done(); ++i) {
          std::vector<uint8_t> ok;
          for (int b = 0; b < 256; ++b)
            if (ToolCallGrammarState(s).feed(static_cast<uint8_t>(b)))
              ok.push_back(static_cast<uint8_t>(b));
          ASSERT_FALSE(ok.empty()) << text;  // a text of the grammar can always go on
          uint8_t pick = ok[std::uniform_int_distribution<size_t>(0, ok.size() - 1)(rng)];
          if (rng() % 3 != 0) {  // prefer structural bytes when they fit
            std::vector<uint8_t> st;
            for (uint8_t b : ok)
              if (structural.find(static_cast<char>(b)) != std::string::npos) st.push_back(b);
            if (!st.empty())
              pick = st[std::uniform_int_distribution<size_t>(0, st.size() - 1)(rng)];
          }
          ASSERT_TRUE(s.feed(pick));
          text += static_cast<char>(pick);
          ASSERT_EQ(s.completion().size(), s.completion_cost()) << text;
        }
        const std::string completion = s.completion();
        ASSERT_TRUE(s.feed(completion)) << text << " + " << completion;
        ASSERT_TRUE(s.done());
        expect_one_call(f, text + completion, reasoning, kNames);
        if (::testing::Test::HasFailure()) return;
      }
    }
  }
}

}  // namespace
}  // namespace handoff::text
