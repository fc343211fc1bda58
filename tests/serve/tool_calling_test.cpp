// Tool calling and reasoning at the protocol level (no server): tools reach the rendered prompt,
// bad tool fields are 400s naming them, and ChatOutput builds OpenAI messages, deltas and
// finish reasons from parsed output.
#include <gtest/gtest.h>

#include <filesystem>
#include <memory>
#include <string>

#include "../text/text_test_support.h"
#include "api_error_support.h"
#include "handoff/serve/chat_output.h"
#include "handoff/serve/openai_protocol.h"

namespace handoff::serve {
namespace {

using nlohmann::json;
using ojson = nlohmann::ordered_json;  // request bodies keep their key order, as clients send them

class ToolCalling : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!testing::require_node_modules()) GTEST_SKIP();
    tokenizer_ = text::Tokenizer::load(testing::deepseek_v3_dir().string());
    // DeepSeek-V3.2's template (it renders tool definitions) with DeepSeek-V3's tokenizer.
    template_ = text::ChatTemplate::load(
        testing::deepseek_v3_dir().string(),
        (std::filesystem::path(HANDOFF_TEST_DATA) / "templates/deepseek_v32/chat_template.jinja")
            .string());
    ctx_.served_model = "m";
    ctx_.tokenizer = tokenizer_.get();
    ctx_.chat_template = template_.get();
    ctx_.max_model_len = 8192;
    ctx_.vocab_size = tokenizer_->vocab_size();
    ctx_.tool_format = text::detect_tool_call_format(template_->source());
    ctx_.reasoning_format = text::detect_reasoning_format(template_->source());
  }

  ParsedRequest parse(const ojson& body) {
    return parse_request(Endpoint::kChat, body.dump(), ctx_);
  }
  ApiError error_of(const ojson& body) {
    return api_error_of([&] { parse(body); });
  }

  std::unique_ptr<text::Tokenizer> tokenizer_;
  std::unique_ptr<text::ChatTemplate> template_;
  ProtocolContext ctx_;
};

const ojson kTools = ojson::parse(R"([{"type": "function", "function": {"name": "get_weather",
  "description": "Weather in a city", "parameters": {"type": "object",
  "properties": {"city": {"type": "string"}}}}}])");
const ojson kQuestion = ojson::parse(R"([{"role": "user", "content": "Weather in Paris?"}])");

// The issue's first symptom: tools were accepted and dropped (prompt_tokens unchanged).
TEST_F(ToolCalling, ToolDefinitionsReachThePrompt) {
  const ParsedRequest plain = parse({{"messages", kQuestion}});
  const ParsedRequest with_tools = parse({{"messages", kQuestion}, {"tools", kTools}});
  EXPECT_GT(with_tools.request.prompt.size(), plain.request.prompt.size() + 50);
  const std::string text = tokenizer_->decode(with_tools.request.prompt);
  EXPECT_NE(text.find(R"({"name": "get_weather", "description": "Weather in a city")"),
            std::string::npos)
      << text;
  EXPECT_EQ(with_tools.tool_format, text::ToolCallFormat::kDeepSeekV32);
  EXPECT_EQ(plain.tool_format, text::ToolCallFormat::kNone);  // no tools: nothing to parse
  // tool_choice "none": tools still rendered, output not parsed for calls.
  const ParsedRequest none =
      parse({{"messages", kQuestion}, {"tools", kTools}, {"tool_choice", "none"}});
  EXPECT_EQ(none.request.prompt, with_tools.request.prompt);
  EXPECT_EQ(none.tool_format, text::ToolCallFormat::kNone);
  // Thinking switched on through chat_template_kwargs: the prompt opens the block.
  EXPECT_FALSE(plain.starts_in_reasoning);
  EXPECT_TRUE(parse({{"messages", kQuestion}, {"chat_template_kwargs", {{"thinking", true}}}})
                  .starts_in_reasoning);
}

TEST_F(ToolCalling, BadToolFieldsAre400sNamingThem) {
  const std::pair<ojson, std::string> cases[] = {
      {{{"tools", kTools}, {"tool_choice", 12345}}, "tool_choice"},
      {{{"tools", kTools}, {"tool_choice", "any"}}, "tool_choice"},
      {{{"tools", kTools}, {"tool_choice", {{"type", "function"}}}}, "tool_choice"},
      {{{"tools", kTools},
        {"tool_choice", {{"type", "function"}, {"function", {{"name", "other"}}}}}},
       "tool_choice"},
      {{{"tool_choice", "auto"}}, "tool_choice"},
      {{{"tools", ojson::object()}}, "tools"},
      {{{"tools", {{{"type", "function"}}}}}, "tools[0].function"},
      {{{"tools", {{{"type", "function"}, {"function", {{"name", ""}}}}}}},
       "tools[0].function.name"},
      {{{"tools", {kTools[0], kTools[0]}}}, "tools[1].function.name"},
      {{{"tools", {{{"type", "function"}, {"function", {{"name", "f"}, {"parameters", "x"}}}}}}},
       "tools[0].function.parameters"},
      {{{"chat_template_kwargs", {{"messages", ojson::array()}}}}, "chat_template_kwargs"},
      {{{"chat_template_kwargs", 1}}, "chat_template_kwargs"},
  };
  for (const auto& [extra, param] : cases) {
    ojson body = extra;
    body["messages"] = kQuestion;
    const ApiError e = error_of(body);
    EXPECT_EQ(e.status, 400) << body.dump();
    EXPECT_EQ(e.param, param) << body.dump() << ": " << e.what();
  }
  ojson history = kQuestion;
  history.push_back(
      {{"role", "assistant"},
       {"content", nullptr},
       {"tool_calls",
        {{{"id", "c"},
          {"type", "function"},
          {"function", {{"name", "get_weather"}, {"arguments", ojson::object()}}}}}}});
  EXPECT_EQ(error_of({{"messages", history}}).param,
            "messages[1].tool_calls[0].function.arguments");
  history[1]["tool_calls"][0]["function"]["arguments"] = R"({"city": "Paris"})";
  history.push_back({{"role", "tool"}, {"content", "21"}});
  EXPECT_EQ(error_of({{"messages", history}}).param, "messages[2].tool_call_id");
  history[2]["tool_call_id"] = "c";
  EXPECT_EQ(error_of({{"messages", history}}).status, 0);
  // A server whose template shows no tool-call format refuses tools it could not parse.
  ctx_.tool_format = text::ToolCallFormat::kNone;
  EXPECT_EQ(error_of({{"messages", kQuestion}, {"tools", kTools}}).param, "tools");
  EXPECT_EQ(error_of({{"messages", kQuestion}, {"tools", kTools}, {"tool_choice", "none"}}).status,
            0);
}

ParsedRequest glm_request(bool starts_in_reasoning) {
  ParsedRequest p;
  p.endpoint = Endpoint::kChat;
  p.tool_format = text::ToolCallFormat::kGlm45;
  p.tools = json(kTools);
  p.reasoning_format = text::ReasoningFormat::kGlm45;
  p.starts_in_reasoning = starts_in_reasoning;
  return p;
}

TEST(ChatOutput, MessageAndFinishReason) {
  auto out = ChatOutput::make(glm_request(true));
  ASSERT_NE(out, nullptr);
  const json m = out->message(
      "Need it.</think><tool_call>get_weather<arg_key>city</arg_key><arg_value>Paris</arg_value>"
      "</tool_call>");
  EXPECT_TRUE(m["content"].is_null());
  EXPECT_EQ(m["reasoning_content"], "Need it.");
  ASSERT_EQ(m["tool_calls"].size(), 1u);
  EXPECT_EQ(m["tool_calls"][0]["type"], "function");
  EXPECT_EQ(m["tool_calls"][0]["function"]["name"], "get_weather");
  EXPECT_EQ(m["tool_calls"][0]["function"]["arguments"], R"({"city":"Paris"})");
  EXPECT_EQ(m["tool_calls"][0]["id"].get<std::string>().size(), 5u + 24u);
  EXPECT_EQ(out->finish_reason(std::string("stop")), "tool_calls");
  EXPECT_EQ(out->finish_reason(std::string("length")), "length");

  auto plain = ChatOutput::make(glm_request(false));
  const json answer = plain->message("It is sunny.");
  EXPECT_EQ(answer["content"], "It is sunny.");
  EXPECT_TRUE(answer["reasoning_content"].is_null());
  EXPECT_FALSE(answer.contains("tool_calls"));
  EXPECT_EQ(plain->finish_reason(std::string("stop")), "stop");
  // Neither parser: no ChatOutput, the text is content as it is.
  ParsedRequest none;
  none.endpoint = Endpoint::kChat;
  EXPECT_EQ(ChatOutput::make(none), nullptr);
}

TEST(ChatOutput, StreamDeltas) {
  auto out = ChatOutput::make(glm_request(true));
  std::vector<json> deltas;
  for (const char* piece : {"Hm", "m.</th", "ink>", "<tool_call>get_", "weather<arg_key>ci",
                            "ty</arg_key><arg_value>Paris</arg_value></tool_call>"})
    deltas.push_back(out->delta(piece, false));
  deltas.push_back(out->delta("", true));
  EXPECT_EQ(deltas[0], json({{"reasoning_content", "Hm"}}));
  EXPECT_EQ(deltas[1], json({{"reasoning_content", "m."}}));
  EXPECT_EQ(deltas[2], json({{"content", ""}}));  // a token that shows nothing yet
  EXPECT_EQ(deltas[3], json({{"content", ""}}));
  // The name as soon as it is complete, with the call's id and type.
  ASSERT_TRUE(deltas[4].contains("tool_calls")) << deltas[4];
  const json& first = deltas[4]["tool_calls"][0];
  EXPECT_EQ(first["index"], 0);
  EXPECT_EQ(first["type"], "function");
  EXPECT_EQ(first["function"]["name"], "get_weather");
  EXPECT_EQ(first["function"]["arguments"], "");
  EXPECT_EQ(deltas[5]["tool_calls"][0],
            json({{"index", 0}, {"function", {{"arguments", R"({"city":"Paris"})"}}}}));
  EXPECT_EQ(deltas[6], json::object());  // the last chunk carries only the finish reason
  EXPECT_EQ(out->finish_reason(std::string("stop")), "tool_calls");
}

}  // namespace
}  // namespace handoff::serve
