// `handoff generate` end to end: its --dump equals the golden field by field, and bad input is
// a clear error with a non-zero exit.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "cli_support.h"

namespace handoff::testing {
namespace {

const std::string kCase = std::string(HANDOFF_TEST_DATA) + "/golden/glm5_tiny_sparse";

TEST(GenerateCli, DumpMatchesGoldenFieldByField) {
  const auto tmp = std::filesystem::temp_directory_path() / "handoff_generate_cli_test";
  std::filesystem::create_directories(tmp);
  const std::string dump = (tmp / "dump.json").string();
  const auto r = run_handoff("generate --model " + kCase + " --prompts-json " + kCase +
                             "/prompts.json --max-new-tokens 8 --dtype f32 --dump " + dump);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("tokens/s"), std::string::npos);
  const auto ours = nlohmann::json::parse(std::ifstream(dump));
  const auto golden = nlohmann::json::parse(std::ifstream(kCase + "/golden.json"));
  EXPECT_EQ(ours["format"], golden["format"]);
  ASSERT_EQ(ours["prompts"].size(), golden["prompts"].size());
  for (size_t p = 0; p < golden["prompts"].size(); ++p) {
    const auto& o = ours["prompts"][p];
    const auto& g = golden["prompts"][p];
    for (const char* exact : {"tokens", "n_decode", "greedy_tokens", "next_token_after_decode",
                              "indexer_topk_prefill", "indexer_topk_decode", "moe_experts_prefill"})
      EXPECT_EQ(o[exact], g[exact]) << exact << " of prompt " << p;
    for (const char* close : {"prefill_logits", "prefill_last_logits", "decode_logits"})
      EXPECT_LE(json_max_diff(o[close], g[close]), 1e-4) << close << " of prompt " << p;
  }
  std::filesystem::remove_all(tmp);
}

TEST(GenerateCli, BadInputIsAClearError) {
  struct Case {
    std::string args;
    std::string message;
  };
  const std::vector<Case> cases = {
      {"generate --model " + kCase + " --prompt-ids 1,x,3", "'x' is not a token id"},
      {"generate --model " + kCase + " --prompt-ids 1,999", "outside the vocabulary"},
      {"generate --model " + kCase, "exactly one of --prompt, --prompt-ids or --prompts-json"},
      {"generate --model " + kCase + " --prompt-ids 1 --top-p 0", "top_p"},
      {"generate --model " + kCase + " --prompt-ids 1 --prompts-json /nonexistent.json",
       "exactly one"},
      {"generate --model " + kCase + " --prompts-json /nonexistent.json", "/nonexistent.json"},
      {"generate --model /nonexistent-model --prompt-ids 1", "/nonexistent-model"},
  };
  for (const auto& c : cases) {
    const auto r = run_handoff(c.args);
    EXPECT_NE(r.exit_code, 0) << c.args;
    EXPECT_NE(r.output.find(c.message), std::string::npos) << c.args << "\n" << r.output;
  }
}

}  // namespace
}  // namespace handoff::testing
