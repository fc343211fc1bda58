// Chat templates must render exactly like @huggingface/jinja for the committed conversations.
#include <gtest/gtest.h>

#include "handoff/error.h"
#include "handoff/text/chat_template.h"
#include "text_test_support.h"

namespace handoff::text {
namespace {

using handoff::testing::command_stdout;
using handoff::testing::read_file;
using handoff::testing::read_json_lines;
using handoff::testing::require_node_modules;
using handoff::testing::tests_dir;

// Renders every conversation with the template of `model_dir` in C++ and in JavaScript.
// The JavaScript side gets the tool-call arguments in the form the C++ side chose for the
// template (ChatTemplate::object_arguments), so both render the same messages.
void expect_matches_reference(const std::filesystem::path& model_dir) {
  const auto conversations_path =
      std::filesystem::path(HANDOFF_TEST_DATA) / "templates/conversations.jsonl";
  const auto conversations = read_json_lines(read_file(conversations_path));
  ASSERT_GE(conversations.size(), 35u);
  const auto chat_template = ChatTemplate::load(model_dir.string());
  const auto reference = read_json_lines(
      command_stdout("node " + (tests_dir() / "tools/render_reference.mjs").string() + " " +
                     model_dir.string() + " " + conversations_path.string() +
                     (chat_template->object_arguments() ? " object-arguments" : "")));
  ASSERT_EQ(reference.size(), conversations.size());
  for (size_t i = 0; i < conversations.size(); ++i) {
    ChatRequest request;
    request.messages = conversations[i]["messages"];
    request.add_generation_prompt = conversations[i].value("add_generation_prompt", false);
    if (conversations[i].contains("tools")) request.tools = conversations[i]["tools"];
    if (conversations[i].contains("chat_template_kwargs"))
      request.extra = conversations[i]["chat_template_kwargs"];
    if (reference[i].contains("error")) {
      EXPECT_THROW(chat_template->render(request), InputError) << "conversation " << i + 1;
      continue;
    }
    std::string rendered;
    try {
      rendered = chat_template->render(request);
    } catch (const std::exception& e) {
      ADD_FAILURE() << "conversation " << i + 1 << ": " << e.what();
      continue;
    }
    EXPECT_EQ(rendered, reference[i]["text"].get<std::string>()) << "conversation " << i + 1;
  }
}

TEST(ChatTemplateReference, DeepSeekV3MatchesHuggingFaceJinja) {
  if (!require_node_modules()) return;
  expect_matches_reference(handoff::testing::deepseek_v3_dir());
}

std::filesystem::path template_dir(const char* name) {
  return std::filesystem::path(HANDOFF_TEST_DATA) / "templates" / name;
}

// Templates from llama.cpp's models/templates (see tests/data/templates/README.md): they render
// tool definitions, tool calls, tool results, reasoning and the thinking switches.
TEST(ChatTemplateReference, DeepSeekV31MatchesHuggingFaceJinja) {
  if (!require_node_modules()) return;
  expect_matches_reference(template_dir("deepseek_v31"));
}
TEST(ChatTemplateReference, DeepSeekV32MatchesHuggingFaceJinja) {
  if (!require_node_modules()) return;
  expect_matches_reference(template_dir("deepseek_v32"));
}
TEST(ChatTemplateReference, Glm46MatchesHuggingFaceJinja) {
  if (!require_node_modules()) return;
  expect_matches_reference(template_dir("glm46"));
}
TEST(ChatTemplateReference, Glm47FlashMatchesHuggingFaceJinja) {
  if (!require_node_modules()) return;
  expect_matches_reference(template_dir("glm47_flash"));
}

// The probe picks the argument form each template renders: DeepSeek-V3 concatenates the JSON
// string, the others iterate over or serialise an object.
TEST(ChatTemplate, ToolCallArgumentFormIsProbedPerTemplate) {
  if (!require_node_modules()) return;
  EXPECT_FALSE(
      ChatTemplate::load(handoff::testing::deepseek_v3_dir().string())->object_arguments());
  for (const char* name : {"deepseek_v31", "deepseek_v32", "glm46", "glm47_flash"})
    EXPECT_TRUE(ChatTemplate::load(template_dir(name).string())->object_arguments()) << name;
  EXPECT_FALSE(ChatTemplate("{{ messages[0].content }}", "", "").object_arguments());
}

// Tool definitions reach the prompt (the issue: they were dropped) and the rendered tool call
// carries the arguments, in each template's own syntax.
TEST(ChatTemplate, ToolDefinitionsAndCallsAreRendered) {
  ChatRequest request;
  request.add_generation_prompt = true;
  request.tools = nlohmann::ordered_json::parse(
      R"([{"type":"function","function":{"name":"get_weather","parameters":{"type":"object","properties":{"city":{"type":"string"}}}}}])");
  request.messages = nlohmann::ordered_json::parse(
      R"([{"role":"user","content":"Weather?"},{"role":"assistant","content":null,"tool_calls":[{"id":"c","type":"function","function":{"name":"get_weather","arguments":"{\"city\": \"Paris\"}"}}]},{"role":"tool","tool_call_id":"c","content":"21"}])");
  const std::string v32 =
      ChatTemplate::load(template_dir("deepseek_v32").string())->render(request);
  EXPECT_NE(v32.find(R"({"name": "get_weather", "parameters")"), std::string::npos) << v32;
  EXPECT_NE(v32.find("<｜DSML｜parameter name=\"city\" string=\"true\">Paris</｜DSML｜parameter>"),
            std::string::npos)
      << v32;
  const std::string glm = ChatTemplate::load(template_dir("glm47_flash").string())->render(request);
  EXPECT_NE(glm.find("<tool_call>get_weather<arg_key>city</arg_key><arg_value>Paris</arg_value>"),
            std::string::npos)
      << glm;
  request.messages[1]["tool_calls"][0]["function"]["arguments"] = "{not json";
  EXPECT_THROW(ChatTemplate::load(template_dir("glm46").string())->render(request), InputError);
}

TEST(ChatTemplate, FolderWithoutTemplateIsInputError) {
  const auto dir = std::filesystem::temp_directory_path() / "handoff_no_template";
  std::filesystem::create_directories(dir);
  try {
    ChatTemplate::load(dir.string());
    ADD_FAILURE() << "expected InputError";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("has no chat template"), std::string::npos);
  }
}

}  // namespace
}  // namespace handoff::text
