// Bounded parsing of OpenAI requests: deep JSON anywhere in a body and prompts that cannot fit
// the context are refused with a 400 before any expensive work (no server needed).
#include <gtest/gtest.h>

#include <chrono>
#include <memory>
#include <string>

#include "../text/text_test_support.h"
#include "handoff/serve/openai_protocol.h"

namespace handoff::serve {
namespace {

class OpenAiLimits : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!testing::require_node_modules()) GTEST_SKIP();
    const std::string dir = testing::deepseek_v3_dir().string();
    tokenizer_ = text::Tokenizer::load(dir);
    template_ = text::ChatTemplate::load(dir);
    ctx_.served_model = "m";
    ctx_.tokenizer = tokenizer_.get();
    ctx_.chat_template = template_.get();
    ctx_.max_model_len = 4096;
    ctx_.vocab_size = tokenizer_->vocab_size();
  }

  // The ApiError parse_request throws for `body` (status 0 when it accepts the body).
  ApiError error_of(Endpoint endpoint, const std::string& body) {
    try {
      parse_request(endpoint, body, ctx_);
    } catch (const ApiError& e) {
      return e;
    }
    return ApiError(0, "accepted");
  }

  std::unique_ptr<text::Tokenizer> tokenizer_;
  std::unique_ptr<text::ChatTemplate> template_;
  ProtocolContext ctx_;
};

std::string nested(int depth) { return std::string(depth, '[') + std::string(depth, ']'); }

// Each of these killed the server with a stack overflow at 20,000 levels.
TEST_F(OpenAiLimits, DeepJsonIsRefusedWherever) {
  const std::string deep = nested(20000);
  const std::string bodies[] = {
      R"({"messages":[{"role":"user","content":"hi","name":)" + deep + "}]}",
      R"({"messages":[{"role":"user","content":"hi"}],"tools":)" + deep + "}",
      R"({"messages":[{"role":"user","content":"hi"}],"chat_template_kwargs":{"x":)" + deep + "}}",
      R"({"messages":[{"role":"user","content":)" + deep + "}]}",
  };
  for (const std::string& body : bodies) {
    const ApiError e = error_of(Endpoint::kChat, body);
    EXPECT_EQ(e.status, 400) << body.substr(0, 80);
    EXPECT_NE(std::string(e.what()).find("nests deeper than 64 levels"), std::string::npos)
        << e.what();
  }
  const ApiError e = error_of(Endpoint::kCompletions, R"({"prompt":)" + deep + "}");
  EXPECT_EQ(e.status, 400);
  EXPECT_NE(std::string(e.what()).find("nests deeper than 64"), std::string::npos) << e.what();
}

TEST_F(OpenAiLimits, NestingWithinTheLimitStillRenders) {
  // The body, chat_template_kwargs, the kwarg and 61 more levels: 64 in all.
  const std::string body = R"({"messages":[{"role":"user","content":"hi"}],)"
                           R"("chat_template_kwargs":{"x":)" +
                           nested(61) + "}}";
  const ParsedRequest p = parse_request(Endpoint::kChat, body, ctx_);
  EXPECT_EQ(tokenizer_->decode(p.request.prompt),
            "<｜begin▁of▁sentence｜><｜User｜>hi<｜Assistant｜>");
  const std::string deeper = R"({"messages":[{"role":"user","content":"hi"}],)"
                             R"("chat_template_kwargs":{"x":)" +
                             nested(62) + "}}";
  EXPECT_EQ(error_of(Endpoint::kChat, deeper).status, 400);
}

TEST_F(OpenAiLimits, TokenizerBoundsBytesPerToken) {
  // DeepSeek-V3's longest vocab entry is 128 bytes and its normalizer keeps every byte.
  EXPECT_EQ(tokenizer_->max_bytes_per_token(), 128u);
}

// A 50 MB prompt was tokenised for 46 s before the error; its bytes alone prove it too long.
TEST_F(OpenAiLimits, HugePromptIsRefusedBeforeTokenising) {
  const std::string huge(50u << 20, 'a');
  const auto start = std::chrono::steady_clock::now();
  const ApiError e = error_of(Endpoint::kCompletions, R"({"prompt":")" + huge + "\"}");
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  EXPECT_EQ(e.status, 400);
  EXPECT_EQ(e.code, "context_length_exceeded");
  EXPECT_EQ(e.param, "prompt");
  EXPECT_NE(std::string(e.what()).find("at least 409600 tokens"), std::string::npos) << e.what();
  EXPECT_LT(seconds, 1.0);

  const auto chat_start = std::chrono::steady_clock::now();
  const ApiError c =
      error_of(Endpoint::kChat, R"({"messages":[{"role":"user","content":")" + huge + "\"}]}");
  const double chat_seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - chat_start).count();
  EXPECT_EQ(c.status, 400);
  EXPECT_EQ(c.code, "context_length_exceeded");
  EXPECT_EQ(c.param, "messages");
  EXPECT_LT(chat_seconds, 2.0);
}

TEST_F(OpenAiLimits, TokenCountOverTheContextIs400) {
  // Too few bytes to prove it, too many tokens once tokenised ("1 " is one token each).
  std::string text;
  for (int i = 0; i < 5000; ++i) text += "1 ";
  const ApiError e = error_of(Endpoint::kCompletions, R"({"prompt":")" + text + "\"}");
  EXPECT_EQ(e.status, 400);
  EXPECT_EQ(e.code, "context_length_exceeded");

  std::string ids = "[1";
  for (int i = 1; i < 4096; ++i) ids += ",1";
  const ApiError t = error_of(Endpoint::kCompletions, R"({"prompt":)" + ids + "]}");
  EXPECT_EQ(t.status, 400);
  EXPECT_EQ(t.code, "context_length_exceeded");
  EXPECT_NE(std::string(t.what()).find("4096 tokens"), std::string::npos) << t.what();
  // One token fewer leaves room for one generated token.
  const std::string fits = ids.substr(0, ids.size() - 2) + "]";
  const ParsedRequest p = parse_request(Endpoint::kCompletions, R"({"prompt":)" + fits + "}", ctx_);
  EXPECT_EQ(p.request.prompt.size(), 4095u);
}

}  // namespace
}  // namespace handoff::serve
