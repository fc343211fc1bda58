// Bounded parsing of OpenAI requests: deep JSON anywhere in a body and prompts that cannot fit
// the context are refused with a 400 before any expensive work (no server needed).
#include <gtest/gtest.h>

#include <chrono>
#include <memory>
#include <optional>
#include <string>

#include "../text/text_test_support.h"
#include "api_error_support.h"
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
    return api_error_of([&] { parse_request(endpoint, body, ctx_); });
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
  // The body, chat_template_kwargs and 62 lists: 64 levels in all.
  const std::string body = R"({"messages":[{"role":"user","content":"hi"}],)"
                           R"("chat_template_kwargs":{"x":)" +
                           nested(62) + "}}";
  const ParsedRequest p = parse_request(Endpoint::kChat, body, ctx_);
  EXPECT_EQ(tokenizer_->decode(p.request.prompt),
            "<｜begin▁of▁sentence｜><｜User｜>hi<｜Assistant｜>");
  const std::string deeper = R"({"messages":[{"role":"user","content":"hi"}],)"
                             R"("chat_template_kwargs":{"x":)" +
                             nested(63) + "}}";
  EXPECT_EQ(error_of(Endpoint::kChat, deeper).status, 400);
}

TEST_F(OpenAiLimits, TokenizerBoundsBytesPerToken) {
  // DeepSeek-V3's longest vocab entry is 128 bytes and its normalizer keeps every byte.
  EXPECT_EQ(tokenizer_->max_bytes_per_token(), 128u);
}

template <typename F>
double seconds_of(F&& f) {
  const auto start = std::chrono::steady_clock::now();
  f();
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

// A 50 MB prompt was tokenised for 46 s before the error; its bytes alone prove it too long.
// Reading the body's JSON is the floor (a fraction of a second on an idle core; a loaded
// machine slows both alike), so the refusal must cost about that and no more.
TEST_F(OpenAiLimits, HugePromptIsRefusedBeforeTokenising) {
  const std::string huge(50u << 20, 'a');
  const std::string body = R"({"prompt":")" + huge + "\"}";
  const double floor =
      seconds_of([&] { [[maybe_unused]] const auto parsed = nlohmann::json::parse(body); });
  std::optional<ApiError> e;
  const double seconds = seconds_of([&] { e = error_of(Endpoint::kCompletions, body); });
  EXPECT_EQ(e->status, 400);
  EXPECT_EQ(e->code, "context_length_exceeded");
  EXPECT_EQ(e->param, "prompt");
  EXPECT_NE(std::string(e->what()).find("at least 409600 tokens"), std::string::npos) << e->what();
  EXPECT_LT(seconds, 2 * floor + 0.5) << "JSON alone: " << floor << " s";

  // Chat renders the template first (copies of the text), then refuses before tokenising.
  const std::string chat = R"({"messages":[{"role":"user","content":")" + huge + "\"}]}";
  const double chat_seconds = seconds_of([&] { e = error_of(Endpoint::kChat, chat); });
  EXPECT_EQ(e->status, 400);
  EXPECT_EQ(e->code, "context_length_exceeded");
  EXPECT_EQ(e->param, "messages");
  EXPECT_LT(chat_seconds, 4 * floor + 1.0) << "JSON alone: " << floor << " s";
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
