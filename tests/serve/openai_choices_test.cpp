// n > 1 and batch prompts in the OpenAI protocol: parsing (every prompt of a list, bad ones
// named by index) and responses (one choice per index, usage counting each prompt once).
#include <gtest/gtest.h>

#include <memory>
#include <string>

#include "../text/text_test_support.h"
#include "handoff/serve/openai_protocol.h"

namespace handoff::serve {
namespace {

class OpenAiChoices : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!testing::require_node_modules()) GTEST_SKIP();
    const std::string dir = testing::deepseek_v3_dir().string();
    tokenizer_ = text::Tokenizer::load(dir);
    ctx_.served_model = "m";
    ctx_.tokenizer = tokenizer_.get();
    ctx_.max_model_len = 64;
    ctx_.vocab_size = tokenizer_->vocab_size();
  }
  ApiError error_of(const std::string& body) {
    try {
      parse_request(Endpoint::kCompletions, body, ctx_);
    } catch (const ApiError& e) {
      return e;
    }
    return ApiError(0, "accepted");
  }
  std::unique_ptr<text::Tokenizer> tokenizer_;
  ProtocolContext ctx_;
};

TEST_F(OpenAiChoices, ParsesBatchesOfTextsAndOfTokenIdsAndN) {
  ParsedRequest p =
      parse_request(Endpoint::kCompletions, R"({"prompt": ["Hello", "The sea"], "n": 3})", ctx_);
  ASSERT_EQ(p.prompts.size(), 2u);
  EXPECT_EQ(p.prompts[0], tokenizer_->encode("Hello", true));
  EXPECT_EQ(p.prompts[1], tokenizer_->encode("The sea", true));
  EXPECT_EQ(p.request.prompt, p.prompts[0]);
  EXPECT_EQ(p.request.n, 3);
  p = parse_request(Endpoint::kCompletions, R"({"prompt": [[5, 6], [7]]})", ctx_);
  EXPECT_EQ(p.prompts, (std::vector<std::vector<int32_t>>{{5, 6}, {7}}));
  p = parse_request(Endpoint::kCompletions, R"({"prompt": [5, 6]})", ctx_);  // one prompt
  EXPECT_EQ(p.prompts, (std::vector<std::vector<int32_t>>{{5, 6}}));
  EXPECT_EQ(p.request.n, 1);
  p = parse_request(Endpoint::kCompletions, R"({"prompt": "x", "n": 2, "best_of": 2})", ctx_);
  EXPECT_EQ(p.request.n, 2);
}

TEST_F(OpenAiChoices, NamesTheBadPromptOfABatchAndTheBadN) {
  struct Case {
    std::string body, param;
  };
  std::string too_long = "[";
  for (int i = 0; i < 70; ++i) too_long += (i ? ",5" : "5");
  too_long += "]";
  const Case cases[] = {
      {R"({"prompt": ["ok", 5]})", "prompt[1]"},
      {R"({"prompt": [[1], []]})", "prompt[1]"},
      {R"({"prompt": [[1], ["a"]]})", "prompt[1]"},
      {R"({"prompt": [[1], [-4]]})", "prompt[1]"},
      {R"({"prompt": ["ok", )" + too_long + "]}", "prompt[1]"},
      {R"({"prompt": []})", "prompt"},
      {R"({"prompt": "x", "n": 0})", "n"},
      {R"({"prompt": "x", "n": 129})", "n"},
      {R"({"prompt": "x", "n": 1.5})", "n"},
      {R"({"prompt": "x", "n": 2, "best_of": 1})", "best_of"},
  };
  for (const Case& c : cases) {
    const ApiError e = error_of(c.body);
    EXPECT_EQ(e.status, 400) << c.body;
    EXPECT_EQ(e.param, c.param) << c.body << ": " << e.what();
  }
  std::string many = R"({"prompt": [)";
  for (int i = 0; i < 1025; ++i) many += (i ? ",[1]" : "[1]");
  many += "]}";
  EXPECT_EQ(error_of(many).param, "prompt");
}

TEST_F(OpenAiChoices, ResponseHasEveryChoiceAndCountsEachPromptOnce) {
  const ParsedRequest p =
      parse_request(Endpoint::kCompletions, R"({"prompt": ["a", "b"], "n": 2})", ctx_);
  std::vector<engine::RequestEvent> choices(4);
  for (int i = 0; i < 4; ++i) {
    choices[i].index = i;
    choices[i].text = "t" + std::to_string(i);
    choices[i].finish_reason = "length";
    choices[i].prompt_tokens = i < 2 ? 5 : 7;  // prompt 0 has 5 tokens, prompt 1 has 7
    choices[i].completion_tokens = 3;
  }
  const nlohmann::json r = make_response(p, "cmpl-1", 0, choices, ctx_);
  ASSERT_EQ(r["choices"].size(), 4u);
  for (int i = 0; i < 4; ++i) {
    EXPECT_EQ(r["choices"][i]["index"], i);
    EXPECT_EQ(r["choices"][i]["text"], "t" + std::to_string(i));
  }
  EXPECT_EQ(r["usage"]["prompt_tokens"], 12);
  EXPECT_EQ(r["usage"]["completion_tokens"], 12);
  EXPECT_EQ(r["usage"]["total_tokens"], 24);
  const nlohmann::json chunk = make_chunk(p, "cmpl-1", 0, choices[3], ctx_);
  EXPECT_EQ(chunk["choices"][0]["index"], 3);
}

}  // namespace
}  // namespace handoff::serve
