// --activations end to end: exact (the default) and bf16 compute different logits at --dtype
// bf16 (the golden prompts of 30 and 70 tokens are prefill-sized), the log says which ran, and
// the flag is a usage error where it does not apply.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "cli_support.h"

namespace handoff::testing {
namespace {

namespace fs = std::filesystem;
const std::string kBf16 = std::string(HANDOFF_TEST_DATA) + "/golden/dsv32_small_bf16";

TEST(ActivationsCli, BothModesRunAndDiffer) {
  const fs::path dir =
      fs::temp_directory_path() / ("handoff_activations_cli_" + std::to_string(getpid()));
  fs::create_directories(dir);
  const std::string common =
      " --model " + kBf16 + " --prompts-json " + kBf16 + "/prompts.json --max-new-tokens 2";
  nlohmann::json dumps[3];
  const char* flags[3] = {"", " --activations exact", " --activations bf16"};
  for (int i = 0; i < 3; ++i) {
    const std::string file = (dir / ("d" + std::to_string(i) + ".json")).string();
    const auto r = run_handoff("generate --dump " + file + common + flags[i]);
    ASSERT_EQ(r.exit_code, 0) << flags[i] << "\n" << r.output;
    EXPECT_EQ(r.output.find("bf16 activations") != std::string::npos, i == 2) << r.output;
    dumps[i] = nlohmann::json::parse(std::ifstream(file));
  }
  fs::remove_all(dir);
  EXPECT_EQ(dumps[0]["prompts"], dumps[1]["prompts"]);  // exact is the default
  // The 30-token prompt's prefill rounds; the 8-token one's does not.
  EXPECT_EQ(dumps[0]["prompts"][0]["prefill_logits"], dumps[2]["prompts"][0]["prefill_logits"]);
  EXPECT_NE(dumps[0]["prompts"][1]["prefill_logits"], dumps[2]["prompts"][1]["prefill_logits"]);
}

TEST(ActivationsCli, MisuseIsAUsageError) {
  struct Case {
    std::string args, message;
  };
  const std::vector<Case> cases = {
      {"generate --model " + kBf16 + " --prompt-ids 1 --dtype f32 --activations bf16",
       "--activations bf16: applies to --dtype bf16 only"},
      {"generate --model " + kBf16 + " --prompt-ids 1 --dtype f32 --activations exact",
       "--activations exact: applies to --dtype bf16 only"},
      {"bench offline --model " + kBf16 + " --dtype f32 --activations exact", "--activations"},
      {"generate --model " + kBf16 + " --prompt-ids 1 --activations fp16", "--activations"},
  };
  for (const auto& c : cases) {
    const auto r = run_handoff(c.args);
    EXPECT_EQ(r.exit_code, 2) << c.args << "\n" << r.output;
    EXPECT_NE(r.output.find(c.message), std::string::npos) << c.args << "\n" << r.output;
  }
}

}  // namespace
}  // namespace handoff::testing
