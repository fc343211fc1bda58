// Flags are checked before anything is read from disk: each bad value exits 2 with a message
// naming the flag, even when the model folder does not exist (so no load ran first). CLI11's
// own parse errors exit 2 as well; a run-time failure (NaN logits) exits 1.
#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <limits>

#include "cli_support.h"
#include "handoff/model/safetensors.h"

namespace handoff::testing {
namespace {

namespace fs = std::filesystem;

const std::string kMissing = "/nonexistent-handoff-model";
const std::string kGolden = std::string(HANDOFF_TEST_DATA) + "/golden/dsv32_tiny_sparse";

struct Case {
  std::string flags;
  std::string flag;  // the message must name it
};

// Runs `command` + each case's flags against a missing model: exit 2, the flag named, the
// model folder never looked at, and all of it fast.
void expect_flag_errors(const std::string& command, const std::vector<Case>& cases) {
  for (const Case& c : cases) {
    const auto start = std::chrono::steady_clock::now();
    const auto r = run_handoff(command + " " + c.flags);
    const double seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    EXPECT_EQ(r.exit_code, 2) << command << " " << c.flags << "\n" << r.output;
    EXPECT_NE(r.output.find(c.flag), std::string::npos) << command << " " << c.flags << "\n"
                                                        << r.output;
    EXPECT_EQ(r.output.find(kMissing), std::string::npos)
        << "the model was opened before the flags were checked: " << c.flags << "\n"
        << r.output;
    EXPECT_LT(seconds, 10.0) << c.flags;
  }
}

const std::vector<Case> kEngineCases = {
    {"--threads 0", "--threads"},
    {"--threads -3", "--threads"},
    {"--max-waiting 0", "--max-waiting"},
    {"--max-num-seqs 0", "--max-num-seqs"},
    {"--max-num-batched-tokens 0", "--max-num-batched-tokens"},
    {"--max-model-len 1", "--max-model-len"},
    {"--block-size 0", "--block-size"},
    {"--block-size 100000", "--block-size"},
    {"--kv-cache-tokens 8", "--kv-cache-tokens"},  // less than one block of 16
    {"--kv-cache-tokens 99999999999", "--kv-cache-tokens"},
    {"--comm-timeout 1e30", "--comm-timeout"},
    {"--comm-timeout -1", "--comm-timeout"},
    {"--comm-timeout 0", "--comm-timeout"},
    {"--tp 0", "--tp"},
    {"--pp 100000", "--pp"},
};

TEST(FlagErrorsCli, ServeEngineFlagsFailBeforeTheModelLoads) {
  expect_flag_errors("serve --port 0 --model " + kMissing, kEngineCases);
}

TEST(FlagErrorsCli, BenchOfflineEngineFlagsFailBeforeTheModelLoads) {
  expect_flag_errors("bench offline --num-prompts 1 --model " + kMissing, kEngineCases);
}

TEST(FlagErrorsCli, BenchSharedPrefixLenIsCheckedFirst) {
  expect_flag_errors("bench offline --num-prompts 1 --model " + kMissing,
                     {{"--input-len 16 --shared-prefix-len 17", "--shared-prefix-len"},
                      {"--shared-prefix-len -1", "--shared-prefix-len"}});
  // No server listens there: the flags are refused before any request.
  expect_flag_errors("bench serve --url http://127.0.0.1:9 --num-prompts 1",
                     {{"--input-len 16 --shared-prefix-len 17", "--shared-prefix-len"},
                      {"--soak --shared-prefix-len 4", "--shared-prefix-len"}});
}

TEST(FlagErrorsCli, GenerateFlagsFailBeforeTheModelLoads) {
  expect_flag_errors("generate --prompt-ids 1,2 --model " + kMissing,
                     {
                         {"--threads 0", "--threads"},
                         {"--max-new-tokens -1", "--max-new-tokens"},
                         {"--max-new-tokens 99999999999", "--max-new-tokens"},
                         {"--prefill-chunk -1", "--prefill-chunk"},
                         {"--comm-timeout 1e30", "--comm-timeout"},
                         {"--comm-timeout nan", "--comm-timeout"},
                         {"--temperature -1", "--temperature"},
                         {"--top-p 0", "--top-p"},
                         {"--top-k -1", "--top-k"},
                         {"--tp 0", "--tp"},
                         {"--fail-rank 0 --fail-at-step -5", "--fail-at-step"},
                     });
  // A text prompt would load the tokenizer from the (missing) folder: flags come first.
  expect_flag_errors("generate --prompt hello --model " + kMissing, {{"--threads 0", "--threads"}});
}

// The chat flags: unknown parser names, a missing or unparsable template file.
TEST(FlagErrorsCli, ChatTemplateAndParserFlagsFailBeforeTheModelLoads) {
  const fs::path bad = fs::temp_directory_path() / "handoff_flag_errors_bad_template.jinja";
  { std::ofstream(bad) << "{% if messages %}unclosed"; }
  const std::vector<Case> cases = {
      {"--tool-call-parser hermes", "--tool-call-parser"},
      {"--reasoning-parser qwen3", "--reasoning-parser"},
      {"--chat-template /nonexistent-handoff-template.jinja", "--chat-template"},
      {"--chat-template " + bad.string(), "--chat-template"},
  };
  expect_flag_errors("serve --port 0 --model " + kMissing, cases);
  const std::string out =
      (fs::temp_directory_path() / "handoff_flag_errors_make_model_tpl").string();
  fs::remove_all(out);
  expect_flag_errors("make-model --preset tiny --out " + out, {cases[2], cases[3]});
  EXPECT_FALSE(fs::exists(out)) << "make-model wrote before checking --chat-template";
  fs::remove(bad);
}

TEST(FlagErrorsCli, PlanAndMakeModelFlags) {
  expect_flag_errors("plan --config " + kMissing + "/config.json",
                     {
                         {"--tokens 0", "--tokens"},
                         {"--tokens 99999999999", "--tokens"},
                         {"--tokens 2 --logit-rows 5", "--logit-rows"},
                         {"--tp 0", "--tp"},
                         {"--weight-dtype fp4", "--weight-dtype"},
                         {"--weight-dtype BF16", "--weight-dtype"},
                         {"--kv-cache-dtype int8", "--kv-cache-dtype"},
                         {"--indexer-cache-dtype f16", "--indexer-cache-dtype"},
                         {"--mem-per-rank 0", "--mem-per-rank"},
                         {"--mem-per-rank 0GiB", "--mem-per-rank"},
                         {"--mem-per-rank=-80G", "--mem-per-rank"},
                         {"--mem-per-rank -80G", "--mem-per-rank"},
                         {"--mem-per-rank 80X", "--mem-per-rank"},
                         {"--mem-per-rank lots", "--mem-per-rank"},
                         {"--mem-reserve 1G", "--mem-reserve"},  // needs --mem-per-rank
                         {"--mem-per-rank 80G --mem-reserve=-1G", "--mem-reserve"},
                     });
  const std::string out = (fs::temp_directory_path() / "handoff_flag_errors_make_model").string();
  fs::remove_all(out);
  expect_flag_errors("make-model --preset tiny --out " + out,
                     {
                         {"--max-shard-mb 0", "--max-shard-mb"},
                         {"--max-shard-mb -1", "--max-shard-mb"},
                     });
  EXPECT_FALSE(fs::exists(out)) << "make-model wrote before checking its flags";
}

TEST(FlagErrorsCli, CommTimeoutBeyondInt64MillisecondsIsRefusedAtOnce) {
  // It used to start the ranks and fail with "timed out after -9223372036854775808 ms".
  const auto r = run_handoff("generate --model " + kGolden +
                             " --prompt-ids 1,2,3 --max-new-tokens 2 --tp 2 --comm-timeout 1e30");
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find("--comm-timeout must be a number of seconds"), std::string::npos)
      << r.output;
  EXPECT_EQ(r.output.find("timed out"), std::string::npos) << r.output;
}

TEST(FlagErrorsCli, ParseErrorsExitTwoAndHelpExitsZero) {
  const std::vector<std::string> usage_errors = {
      "generate --model " + kMissing + " --prompt-ids 1 --threads abc",  // not a number
      "generate --model " + kMissing + " --prompt-ids 1 --dtype f16",    // not a member
      "serve --model " + kMissing + " --no-such-flag",                   // unknown flag
      "make-model --out /tmp/x",                                         // --preset missing
      "frobnicate",                                                      // no such command
      "",                                                                // no command
  };
  for (const auto& args : usage_errors) {
    const auto r = run_handoff(args);
    EXPECT_EQ(r.exit_code, 2) << args << "\n" << r.output;
  }
  EXPECT_EQ(run_handoff("generate --help").exit_code, 0);
  EXPECT_EQ(run_handoff("--help").exit_code, 0);
}

// The golden model with a NaN in its final norm weight.
class NanModelCli : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("handoff_nan_model_" + std::to_string(::getpid()));
    fs::create_directories(dir_);
    fs::copy_file(kGolden + "/config.json", dir_ / "config.json",
                  fs::copy_options::overwrite_existing);
    const auto st = model::SafetensorsFile::open(kGolden + "/model.safetensors");
    std::vector<std::pair<std::string, tensor::Tensor>> tensors;
    for (const auto& [name, e] : st->entries()) {
      tensor::Tensor t = st->get(name).contiguous();
      if (name == "model.norm.weight") t.data<float>()[3] = std::numeric_limits<float>::quiet_NaN();
      tensors.emplace_back(name, t);
    }
    model::write_safetensors((dir_ / "model.safetensors").string(), tensors);
  }
  void TearDown() override { fs::remove_all(dir_); }
  fs::path dir_;
};

TEST_F(NanModelCli, GenerateRefusesTheModelOrFailsTheRequestNeverPrintsGarbage) {
  const std::string gen =
      "generate --model " + dir_.string() + " --prompt-ids 1,2,3,4 --max-new-tokens 4 ";
  auto r = run_handoff(gen);
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find("'model.norm.weight'"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find((dir_ / "model.safetensors").string()), std::string::npos) << r.output;
  EXPECT_EQ(r.output.find("generated:"), std::string::npos) << r.output;
  // Skipping the scan loads it; the first NaN logits end the run with exit 1, no tokens.
  r = run_handoff(gen + "--no-check-weights");
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_NE(r.output.find("non-finite logit (nan)"), std::string::npos) << r.output;
  EXPECT_EQ(r.output.find("generated:"), std::string::npos) << r.output;
}

}  // namespace
}  // namespace handoff::testing
