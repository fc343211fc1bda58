// The request surface vLLM users expect, in-process against the real DeepSeek-V3 tokenizer and
// chat template: random seeds without `seed`, `developer` as system, the special-token
// options, and /tokenize and /detokenize's bodies.
#include <gtest/gtest.h>

#include <functional>
#include <memory>
#include <set>
#include <string>

#include "../text/text_test_support.h"
#include "api_error_support.h"
#include "handoff/serve/openai_protocol.h"
#include "handoff/serve/tokenize_api.h"
#include "handoff/text/stream_decoder.h"

namespace handoff::serve {
namespace {

using nlohmann::json;

class OpenAiSurface : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!testing::require_node_modules()) GTEST_SKIP();
    const std::string dir = testing::deepseek_v3_dir().string();
    tokenizer_ = text::Tokenizer::load(dir);
    template_ = text::ChatTemplate::load(dir);
    ctx_.served_model = "m";
    ctx_.tokenizer = tokenizer_.get();
    ctx_.chat_template = template_.get();
    ctx_.max_model_len = 64;
    ctx_.vocab_size = tokenizer_->vocab_size();
    ctx_.system_fingerprint = "fp_test";
  }

  ApiError error_of(const std::function<void()>& f) { return api_error_of(f); }

  std::unique_ptr<text::Tokenizer> tokenizer_;
  std::unique_ptr<text::ChatTemplate> template_;
  ProtocolContext ctx_;
};

TEST_F(OpenAiSurface, SeedIsRandomWhenAbsentAndKeptWhenGiven) {
  const std::string no_seed = R"({"prompt":"hi","max_tokens":2})";
  std::set<uint64_t> seeds;
  for (int i = 0; i < 8; ++i)
    seeds.insert(parse_request(Endpoint::kCompletions, no_seed, ctx_).request.seed);
  EXPECT_EQ(seeds.size(), 8u) << "eight requests without a seed drew a repeated seed";
  const std::string seeded = R"({"prompt":"hi","max_tokens":2,"seed":12345})";
  EXPECT_EQ(parse_request(Endpoint::kCompletions, seeded, ctx_).request.seed, 12345u);
  const std::string null_seed = R"({"prompt":"hi","max_tokens":2,"seed":null})";
  EXPECT_NE(parse_request(Endpoint::kCompletions, null_seed, ctx_).request.seed,
            parse_request(Endpoint::kCompletions, null_seed, ctx_).request.seed);
}

TEST_F(OpenAiSurface, DeveloperMessagesArePromptedAsSystem) {
  const auto prompt = [&](const std::string& role) {
    return parse_request(Endpoint::kChat,
                         R"({"messages":[{"role":")" + role +
                             R"(","content":"Answer in French."},{"role":"user","content":"Hi"}]})",
                         ctx_)
        .request.prompt;
  };
  const auto developer = prompt("developer");
  EXPECT_EQ(developer, prompt("system"));
  const auto user_only =
      parse_request(Endpoint::kChat, R"({"messages":[{"role":"user","content":"Hi"}]})", ctx_)
          .request.prompt;
  EXPECT_GT(developer.size(), user_only.size()) << "the developer message was dropped";
  EXPECT_NE(tokenizer_->decode(developer).find("Answer in French."), std::string::npos);
}

TEST_F(OpenAiSurface, SpecialTokenOptionsReachTheRequest) {
  const auto r = parse_request(Endpoint::kCompletions, R"({"prompt":"hi"})", ctx_).request;
  EXPECT_TRUE(r.skip_special_tokens);
  EXPECT_TRUE(r.spaces_between_special_tokens);
  const auto off = parse_request(
      Endpoint::kChat,
      R"({"messages":[{"role":"user","content":"Hi"}],"skip_special_tokens":false,"spaces_between_special_tokens":false})",
      ctx_);
  EXPECT_FALSE(off.request.skip_special_tokens);
  EXPECT_FALSE(off.request.spaces_between_special_tokens);
  const ApiError e = error_of([&] {
    parse_request(Endpoint::kCompletions, R"({"prompt":"hi","skip_special_tokens":"no"})", ctx_);
  });
  EXPECT_EQ(e.status, 400);
  EXPECT_EQ(e.param, "skip_special_tokens");
}

TEST_F(OpenAiSurface, ResponsesCarryTheSystemFingerprint) {
  const ParsedRequest p =
      parse_request(Endpoint::kChat, R"({"messages":[{"role":"user","content":"Hi"}]})", ctx_);
  engine::RequestEvent all;
  all.text = "x";
  all.finish_reason = "stop";
  EXPECT_EQ(make_response(p, "chatcmpl-1", 0, {all}, ctx_)["system_fingerprint"], "fp_test");
  EXPECT_EQ(make_chunk(p, "chatcmpl-1", 0, all, ctx_)["system_fingerprint"], "fp_test");
  EXPECT_EQ(make_role_chunk(p, "chatcmpl-1", 0)["system_fingerprint"], "fp_test");
  EXPECT_EQ(make_usage_chunk(p, "chatcmpl-1", 0, 1, 1)["system_fingerprint"], "fp_test");
}

// The decoder's special-token handling on the real vocabulary: BOS (0) and EOS (1) are special,
// <｜User｜> (128803) is an added token that is not, so it always stays.
TEST_F(OpenAiSurface, StreamDecoderSkipsOrSpacesSpecialTokens) {
  const std::vector<int32_t> hello = tokenizer_->encode("Hello world", false);
  std::vector<int32_t> ids = {0};
  ids.insert(ids.end(), hello.begin(), hello.end());
  ids.push_back(128803);
  ids.push_back(1);
  ids.push_back(1);
  ids.insert(ids.end(), hello.begin(), hello.end());
  const std::string bos = "<｜begin▁of▁sentence｜>", eos = "<｜end▁of▁sentence｜>";
  EXPECT_EQ(text::decode_text(*tokenizer_, ids, {}),
            bos + "Hello world<｜User｜>" + eos + eos + "Hello world");
  EXPECT_EQ(text::decode_text(*tokenizer_, ids, {true, true}), "Hello world<｜User｜>Hello world");
  EXPECT_EQ(text::decode_text(*tokenizer_, ids, {false, true}),
            bos + " Hello world<｜User｜> " + eos + " " + eos + " Hello world");
  // Streamed one id at a time it is the same text.
  text::StreamDecoder decoder(*tokenizer_, {false, true});
  std::string streamed;
  for (int32_t id : ids) streamed += decoder.push(id);
  streamed += decoder.flush();
  EXPECT_EQ(streamed, text::decode_text(*tokenizer_, ids, {false, true}));
}

TEST_F(OpenAiSurface, TokenizeMatchesTheTokenizerAndDetokenizeRoundTrips) {
  const std::string text = "Hello, world! Grüße, 東京 🚀";
  const json t = tokenize(json{{"model", "m"}, {"prompt", text}}.dump(), ctx_);
  const std::vector<int32_t> expected = tokenizer_->encode(text, true);
  ASSERT_EQ(t["tokens"].get<std::vector<int32_t>>(), expected);
  EXPECT_EQ(t["count"], expected.size());
  EXPECT_EQ(t["max_model_len"], 64);
  EXPECT_EQ(expected.front(), 0) << "add_special_tokens defaults to true: BOS first";
  const json plain = tokenize(
      json{{"prompt", text}, {"add_special_tokens", false}, {"return_token_strs", true}}.dump(),
      ctx_);
  EXPECT_EQ(plain["count"], expected.size() - 1);
  std::string joined;
  for (const auto& s : plain["token_strs"]) joined += s.get<std::string>();
  EXPECT_EQ(joined, text);
  EXPECT_EQ(detokenize(json{{"tokens", plain["tokens"]}}.dump(), ctx_)["prompt"], text);
  EXPECT_EQ(detokenize(json{{"model", "m"}, {"tokens", t["tokens"]}}.dump(), ctx_)["prompt"],
            "<｜begin▁of▁sentence｜>" + text);
  // Longer than max_model_len is still counted: that is what a client tokenizes for.
  std::string long_text;
  for (int i = 0; i < 100; ++i) long_text += "word ";
  EXPECT_GT(tokenize(json{{"prompt", long_text}}.dump(), ctx_)["count"], 64);
}

TEST_F(OpenAiSurface, TokenizeChatCountsWhatTheChatRoutePrefills) {
  const json messages = json::array(
      {{{"role", "developer"}, {"content", "Be brief."}}, {{"role", "user"}, {"content", "Hi"}}});
  const json t = tokenize(json{{"messages", messages}}.dump(), ctx_);
  const auto prompt =
      parse_request(Endpoint::kChat, json{{"messages", messages}}.dump(), ctx_).request.prompt;
  EXPECT_EQ(t["tokens"].get<std::vector<int32_t>>(), prompt);
  const std::string rendered = detokenize(json{{"tokens", t["tokens"]}}.dump(), ctx_)["prompt"];
  EXPECT_EQ(rendered, "<｜begin▁of▁sentence｜>Be brief.<｜User｜>Hi<｜Assistant｜>");
  const json no_gen =
      tokenize(json{{"messages", messages}, {"add_generation_prompt", false}}.dump(), ctx_);
  EXPECT_EQ(detokenize(json{{"tokens", no_gen["tokens"]}}.dump(), ctx_)["prompt"],
            "<｜begin▁of▁sentence｜>Be brief.<｜User｜>Hi");
}

TEST_F(OpenAiSurface, TokenizeErrorsNameTheField) {
  const auto err = [&](const json& body, bool detok = false) {
    return error_of([&] { detok ? detokenize(body.dump(), ctx_) : tokenize(body.dump(), ctx_); });
  };
  EXPECT_EQ(err({{"prompt", "x"}, {"max_tokens", 3}}).param, "max_tokens");
  EXPECT_EQ(err({{"prompt", 3}}).param, "prompt");
  EXPECT_EQ(err(json::object()).param, "prompt");
  EXPECT_EQ(err({{"prompt", "x"}, {"add_special_tokens", "yes"}}).param, "add_special_tokens");
  EXPECT_EQ(err({{"prompt", "x"}, {"model", "other"}}).status, 404);
  EXPECT_EQ(err({{"messages", json::array()}}).param, "messages");
  EXPECT_EQ(err({{"tokens", {1, -1}}}, true).param, "tokens");
  EXPECT_EQ(err({{"tokens", {1, 1 << 30}}}, true).param, "tokens");
  EXPECT_EQ(err({{"tokens", "1 2"}}, true).param, "tokens");
  EXPECT_EQ(err({{"tokens", {1}}, {"skip_special_tokens", true}}, true).status, 400);
  EXPECT_EQ(error_of([&] { tokenize("{", ctx_); }).code, "invalid_json");
}

}  // namespace
}  // namespace handoff::serve
