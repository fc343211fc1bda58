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
void expect_matches_reference(const std::filesystem::path& model_dir) {
  const auto conversations_path =
      std::filesystem::path(HANDOFF_TEST_DATA) / "templates/conversations.jsonl";
  const auto conversations = read_json_lines(read_file(conversations_path));
  ASSERT_GE(conversations.size(), 20u);
  const auto reference = read_json_lines(
      command_stdout("node " + (tests_dir() / "tools/render_reference.mjs").string() + " " +
                     model_dir.string() + " " + conversations_path.string()));
  ASSERT_EQ(reference.size(), conversations.size());
  const auto chat_template = ChatTemplate::load(model_dir.string());
  for (size_t i = 0; i < conversations.size(); ++i) {
    ChatRequest request;
    request.messages = conversations[i]["messages"];
    request.add_generation_prompt = conversations[i].value("add_generation_prompt", false);
    if (conversations[i].contains("tools")) request.tools = conversations[i]["tools"];
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
