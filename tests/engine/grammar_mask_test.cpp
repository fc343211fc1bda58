// The token mask of forced tool calls on the real DeepSeek-V3 tokenizer (129K ids): which tokens
// it allows at characteristic points, its length bound, and a sampler that follows it from
// random logits always produces a call the format's parser reads, within the token budget.
#include "handoff/engine/grammar_mask.h"

#include <gtest/gtest.h>

#include <chrono>
#include <cstdio>
#include <nlohmann/json.hpp>
#include <random>

#include "../text/text_test_support.h"
#include "handoff/engine/sampler.h"
#include "handoff/text/chat_output_parser.h"

namespace handoff::engine {
namespace {

using text::ToolCallFormat;
using text::ToolCallGrammar;
using text::ToolCallGrammarState;

class GrammarMask : public ::testing::Test {
 protected:
  // Loaded once for the suite (the 129K-token table takes a while to build).
  static void SetUpTestSuite() {
    if (!std::filesystem::exists(testing::deepseek_v3_dir() / "tokenizer.json")) return;
    tokenizer_ = text::Tokenizer::load(testing::deepseek_v3_dir().string());
    table_ = std::make_unique<TokenTable>(*tokenizer_);
  }
  static void TearDownTestSuite() {
    table_.reset();
    tokenizer_.reset();
  }
  void SetUp() override {
    if (!testing::require_node_modules()) GTEST_SKIP();
    allowed_.assign(static_cast<size_t>(table_->vocab_size()), 0);
  }
  int32_t id(const std::string& text) const {
    const auto ids = tokenizer_->encode(text, false);
    EXPECT_EQ(ids.size(), 1u) << text;
    return ids.empty() ? -1 : ids[0];
  }
  bool allows(int32_t token) const { return allowed_[static_cast<size_t>(token)] != 0; }

  static std::unique_ptr<text::Tokenizer> tokenizer_;
  static std::unique_ptr<TokenTable> table_;
  std::vector<uint8_t> allowed_;
};
std::unique_ptr<text::Tokenizer> GrammarMask::tokenizer_;
std::unique_ptr<TokenTable> GrammarMask::table_;

TEST_F(GrammarMask, TableGroupsEveryTokenByItsFirstByte) {
  size_t grouped = 0;
  for (int b = 0; b < 256; ++b) {
    for (const int32_t* it = table_->group_begin(static_cast<uint8_t>(b));
         it != table_->group_end(static_cast<uint8_t>(b)); ++it)
      ASSERT_EQ(static_cast<uint8_t>(table_->bytes(*it)[0]), b);
    grouped += static_cast<size_t>(table_->group_end(static_cast<uint8_t>(b)) -
                                   table_->group_begin(static_cast<uint8_t>(b)));
    // Every byte has a token of its own: the length bound relies on it.
    EXPECT_TRUE(tokenizer_->token_id(std::string(1, static_cast<char>(b))).has_value()) << b;
  }
  EXPECT_GT(grouped, 128000u);
  EXPECT_EQ(table_->bytes(id("hello")), "hello");
  EXPECT_TRUE(table_->added(*tokenizer_->eos_id()));
}

TEST_F(GrammarMask, AllowsExactlyTheTokensThatFit) {
  auto g = ToolCallGrammar::make(ToolCallFormat::kDeepSeekV3, {"get_weather", "get_time"}, "",
                                 tokenizer_.get());
  ToolCallGrammarState s(*g);
  // Costs count tokens: the markers are one token each, not 25 bytes.
  const size_t bytes = s.completion().size();
  EXPECT_LT(s.completion_cost(), bytes / 4) << bytes;
  EXPECT_GE(s.completion_cost(), 10u);
  const int32_t calls_begin = *tokenizer_->token_id("<｜tool▁calls▁begin｜>");
  ASSERT_GT(allowed_tokens(*table_, s, 0, allowed_), 0);
  EXPECT_TRUE(allows(calls_begin));  // the format's own token
  EXPECT_TRUE(allows(id("<")));      // or its text spelled out
  EXPECT_FALSE(allows(id("hello")));
  EXPECT_FALSE(allows(*tokenizer_->eos_id()));
  // Every allowed token really fits, and a sample of refused ones really does not.
  for (int32_t t = 0; t < table_->vocab_size(); t += 97) {
    ToolCallGrammarState c = s;
    const bool fits = !table_->bytes(t).empty() && c.feed(table_->bytes(t));
    if (allows(t)) {
      EXPECT_TRUE(fits) << t;
    } else if (!table_->added(t)) {
      EXPECT_FALSE(fits) << t;
    }
  }

  ASSERT_TRUE(
      s.feed(std::string("<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>get_")));
  allowed_tokens(*table_, s, 0, allowed_);
  EXPECT_TRUE(allows(id("weather")));
  EXPECT_TRUE(allows(id("time")));
  EXPECT_FALSE(allows(id("date")));  // not a declared function

  ASSERT_TRUE(s.feed(std::string("weather\n```json\n{\"city\": \"Par")));
  const int64_t in_string = allowed_tokens(*table_, s, 0, allowed_);
  EXPECT_GT(in_string, 100000);  // nearly any text goes in a string
  EXPECT_TRUE(allows(id("is")));
  EXPECT_TRUE(allows(id("\"}")));
  EXPECT_FALSE(allows(*tokenizer_->eos_id()));
  EXPECT_FALSE(allows(calls_begin));  // markers only as the format's literals
  EXPECT_FALSE(allows(*tokenizer_->token_id("<｜tool▁call▁end｜>")));
  EXPECT_FALSE(allows(id("\n")));  // a raw newline is not JSON string text

  // The length bound: with as many tokens left as the completion has bytes (plus this one),
  // only tokens that keep the completion within the rest are allowed.
  const size_t need = s.completion_cost();
  allowed_tokens(*table_, s, static_cast<int64_t>(need), allowed_);
  int64_t bounded = 0;
  for (int32_t t = 0; t < table_->vocab_size(); ++t) {
    if (!allows(t)) continue;
    ++bounded;
    ToolCallGrammarState c = s;
    ASSERT_TRUE(c.feed(table_->bytes(t)));
    EXPECT_LE(c.completion_cost(), need - 1) << table_->bytes(t);
  }
  EXPECT_GT(bounded, 0);
  EXPECT_LT(bounded, in_string);
  EXPECT_TRUE(allows(id("\"")));
  EXPECT_FALSE(allows(id("is")));
}

// A sampler following the mask from random logits (greedy and at temperature 1) always ends a
// parseable call within max_tokens, in every format. Also reports the mask's cost per step.
TEST_F(GrammarMask, RandomLogitsAlwaysGiveACallWithinTheBudget) {
  std::mt19937 rng(3);
  std::vector<float> logits(static_cast<size_t>(table_->vocab_size()));
  const std::vector<std::string> names = {"get_weather", "get_time", "search"};
  double mask_seconds = 0;
  int64_t mask_calls = 0;
  for (ToolCallFormat f : {ToolCallFormat::kDeepSeekV3, ToolCallFormat::kDeepSeekV31,
                           ToolCallFormat::kDeepSeekV32, ToolCallFormat::kGlm45}) {
    auto g = ToolCallGrammar::make(f, names, "", tokenizer_.get());
    std::printf("shortest %s call: %zu tokens at most\n", text::tool_call_format_name(f),
                ToolCallGrammarState(*g).completion_cost());
    for (int trial = 0; trial < 2; ++trial) {
      ToolCallGrammarState s(*g);
      // Just enough for the shortest call, then some room for arguments.
      const int64_t max_tokens = static_cast<int64_t>(s.completion_cost()) + 2 + 30 * trial;
      Sampler sampler(static_cast<uint64_t>(trial));
      SamplingParams params;
      params.temperature = trial % 2 == 0 ? 0.0f : 1.0f;
      std::vector<int32_t> ids;
      while (!s.done()) {
        ASSERT_LT(static_cast<int64_t>(ids.size()), max_tokens) << tokenizer_->decode(ids);
        std::normal_distribution<float> noise(0.0f, 3.0f);
        for (auto& l : logits) l = noise(rng);
        const auto t0 = std::chrono::steady_clock::now();
        const int64_t budget = max_tokens - static_cast<int64_t>(ids.size());
        ASSERT_GT(allowed_tokens(*table_, s, budget, allowed_), 0);
        mask_seconds +=
            std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
        ++mask_calls;
        for (size_t i = 0; i < logits.size(); ++i)
          if (allowed_[i] == 0) logits[i] = -std::numeric_limits<float>::infinity();
        const int32_t t =
            sampler.sample(logits.data(), static_cast<int64_t>(logits.size()), params);
        ASSERT_TRUE(s.feed(table_->bytes(t)));
        ids.push_back(t);
      }
      const std::string text = tokenizer_->decode(ids);
      text::ChatOutputParser parser(nullptr,
                                    text::make_tool_call_parser(f, nlohmann::json::array()));
      text::ParsedOutput out = parser.push(text);
      out.append(parser.finish());
      EXPECT_EQ(out.content, "") << text;
      ASSERT_GE(out.calls.size(), 1u) << text;
      std::string arguments;
      for (const auto& d : out.calls) {
        EXPECT_EQ(d.index, 0u) << text;
        arguments += d.arguments;
      }
      EXPECT_NE(std::find(names.begin(), names.end(), out.calls[0].name), names.end()) << text;
      EXPECT_TRUE(nlohmann::json::parse(arguments, nullptr, false).is_object()) << text;
    }
  }
  std::printf("grammar mask: %.3f ms per step over %lld steps (vocab %d)\n",
              1e3 * mask_seconds / static_cast<double>(mask_calls),
              static_cast<long long>(mask_calls), table_->vocab_size());
}

// What one mask costs at characteristic points of a call (median of 15; printed for the README,
// asserted only loosely: the machine may be loaded).
TEST_F(GrammarMask, CostPerStep) {
  auto g = ToolCallGrammar::make(ToolCallFormat::kDeepSeekV3, {"get_weather", "get_time"}, "",
                                 tokenizer_.get());
  const std::pair<const char*, std::string> points[] = {
      {"opening marker", ""},
      {"function name", "<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>get"},
      {"JSON structure",
       "<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>get_time\n"
       "```json\n{\"city\": 12, "},
      {"JSON string",
       "<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>get_time\n"
       "```json\n{\"city\": \"Par"},
  };
  for (const auto& [what, prefix] : points) {
    ToolCallGrammarState s(*g);
    ASSERT_TRUE(s.feed(prefix)) << what;
    std::vector<double> ms;
    int64_t n = 0;
    for (int rep = 0; rep < 15; ++rep) {
      const auto t0 = std::chrono::steady_clock::now();
      n = allowed_tokens(*table_, s, 1000, allowed_);
      ms.push_back(
          std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
    }
    std::sort(ms.begin(), ms.end());
    std::printf("grammar mask at %-15s %7.3f ms (%lld of %d tokens allowed)\n", what, ms[7],
                static_cast<long long>(n), table_->vocab_size());
    EXPECT_GT(n, 0);
    EXPECT_LT(ms[7], 200.0) << what;
  }
}

}  // namespace
}  // namespace handoff::engine
