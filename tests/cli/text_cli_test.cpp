// `handoff tokenize` and `handoff render-chat` end to end through the binary.
#include <gtest/gtest.h>

#include "../text/text_test_support.h"
#include "cli_support.h"

namespace handoff::testing {
namespace {

TEST(TokenizeCli, EncodesAndDecodesJsonLines) {
  if (!require_node_modules()) return;
  const std::string model = deepseek_v3_dir().string();
  const auto encoded = command_stdout("printf '%s\\n' '{\"text\": \"Hello, my dog is cute\"}' | " +
                                      std::string(HANDOFF_BINARY) + " tokenize --model " + model);
  EXPECT_EQ(encoded, "{\"ids\":[0,19923,14,1026,6397,344,33125]}\n");
  const auto plain =
      command_stdout("printf '%s\\n' '{\"text\": \"Hello\"}' | " + std::string(HANDOFF_BINARY) +
                     " tokenize --no-special --tokenizer " + model);
  EXPECT_EQ(plain.find("[0,"), std::string::npos);
  const auto decoded =
      command_stdout("printf '%s\\n' '{\"ids\": [0,19923,14,1026,6397,344,33125]}' | " +
                     std::string(HANDOFF_BINARY) + " tokenize --decode --model " + model);
  EXPECT_EQ(decoded, "{\"text\":\"<｜begin▁of▁sentence｜>Hello, my dog is cute\"}\n");
}

TEST(RenderChatCli, RendersDeepSeekTemplate) {
  if (!require_node_modules()) return;
  const auto out = command_stdout(
      "printf '%s' '{\"messages\": [{\"role\": \"user\", \"content\": \"hi\"}], "
      "\"add_generation_prompt\": true}' | " +
      std::string(HANDOFF_BINARY) + " render-chat --model " + deepseek_v3_dir().string());
  EXPECT_EQ(out, "<｜begin▁of▁sentence｜><｜User｜>hi<｜Assistant｜>");
}

TEST(RenderChatCli, MissingTemplateExitsWithInputError) {
  const auto dir = std::filesystem::temp_directory_path() / "handoff_cli_no_template";
  std::filesystem::create_directories(dir);
  const auto result = run_handoff("render-chat --model " + dir.string() + " < /dev/null");
  EXPECT_EQ(result.exit_code, 2);
  EXPECT_NE(result.output.find("has no chat template"), std::string::npos) << result.output;
}

TEST(TokenizeCli, BadInputExitsWithInputError) {
  if (!require_node_modules()) return;
  const auto input = std::filesystem::temp_directory_path() / "handoff_tokenize_bad.jsonl";
  std::ofstream(input) << "not json\n";
  const auto result =
      run_handoff("tokenize --model " + deepseek_v3_dir().string() + " < " + input.string());
  EXPECT_EQ(result.exit_code, 2) << result.output;
}

}  // namespace
}  // namespace handoff::testing
